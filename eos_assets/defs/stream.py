"""One declared stream as the definitions take it: its name and the specs of its tables.

``ORDERS`` is the shipped orders stream, read from its declaration: the definitions built by
code in this folder compute it until they are built per declaration.
"""

from dataclasses import dataclass

from eos_assets.declaration import StreamModel, read_declaration
from eos_assets.lib.entity_state import EntitySpec
from eos_assets.lib.stream_shape import Contract, WindowShape
from eos_assets.stream_specs import contract, entity_spec, window_shape
from eos_assets.streams import declaration


@dataclass(frozen=True)
class Stream:
    """A declared stream's name, record contract, window shape and entity state."""

    name: str
    contract: Contract
    windows: WindowShape
    entity: EntitySpec | None

    @classmethod
    def of(cls, model: StreamModel) -> "Stream":
        """The specs of a checked declaration."""
        return cls(model.name, contract(model), window_shape(model), entity_spec(model))


ORDERS = Stream.of(read_declaration(declaration("orders")))
