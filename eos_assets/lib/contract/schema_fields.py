"""Which JSON keys of a record a contract reads, and the table both JSON paths fill with them.

``schema_careful`` (the reference) and ``schema_bulk`` (fast) each turn Kafka values into the
same *fields table*; ``schema`` then checks it vectorised. One ``Slot`` per JSON key read: the
declared id field, time field and payload fields, then ``schema_version``, which every stream
may carry. A slot says which JSON kind its key must have and the Arrow type of its column:

- the id field: a string; the time field: a string (``iso8601``) or a number (epoch formats,
  read as float64, which holds every millisecond of years 0001-9999 exactly);
- payload: string, timestamp (an ISO-8601 string) and boolean as such; double as float64; long
  as int64, exactly (a long written ``2.0`` or ``1e3`` is read by the careful path);
- ``schema_version`` as float64, as written, checked later.

A *checked* slot (the id, the time, a required field, a string field with declared values)
also has a ``<column>:kind`` column: the JSON kind found when it is the wrong kind, so the
error can say what was there; for a long, ``number`` there means a number that is not an
integral int64. A *text* slot (an optional string field without values) takes any other JSON
kind as its compact JSON text. Any other slot of the wrong kind is null.
"""

import functools
from dataclasses import dataclass

import pyarrow as pa

from eos_assets.lib.contract.stream_shape import (
    BOOLEAN,
    DOUBLE,
    LONG,
    STRING,
    TIMESTAMP,
    Contract,
)

JSON_ERROR = "json:error"
SCHEMA_VERSION = "schema_version"
ID_COLUMN, TIME_COLUMN = "event_id", "event_time"

# The JSON kind a payload field of each type is read from.
JSON_KIND = {
    STRING: "string",
    TIMESTAMP: "string",
    LONG: "number",
    DOUBLE: "number",
    BOOLEAN: "boolean",
}
# The fields-table type a payload field of each type is read as.
ARROW = {
    STRING: pa.string(),
    TIMESTAMP: pa.string(),  # parsed later, as the time field is
    LONG: pa.int64(),
    DOUBLE: pa.float64(),
    BOOLEAN: pa.bool_(),
}


@dataclass(frozen=True)
class Slot:
    """One JSON key read from every record: its column, expected kind and how it is kept."""

    key: str
    column: str
    kind: str  # the JSON kind: string, number or boolean
    arrow: pa.DataType
    checked: bool = False
    text: bool = False

    @property
    def long(self) -> bool:
        """Whether the number is read exactly, as an int64."""
        return self.arrow == pa.int64()


@dataclass(frozen=True)
class Layout:
    """The slots of one contract and the schema of its fields table."""

    slots: tuple[Slot, ...]
    schema: pa.Schema


def kind_column(column: str) -> str:
    """The column holding the JSON kind found in the checked slot ``column`` when wrong."""
    return f"{column}:kind"


@functools.lru_cache(maxsize=64)
def layout(contract: Contract) -> Layout:
    """The slots of ``contract`` and its fields table schema.

    Raises:
        ValueError: two slots read the same JSON key.
    """
    epoch = contract.epoch_time
    slots = [
        Slot(contract.id_field, ID_COLUMN, "string", pa.string(), checked=True),
        Slot(
            contract.time_field,
            TIME_COLUMN,
            "number" if epoch else "string",
            pa.float64() if epoch else pa.string(),
            checked=True,
        ),
    ]
    for f in contract.fields:
        checked = f.required or (f.type == STRING and f.values is not None)
        text = f.type == STRING and not checked
        slots.append(
            Slot(f.key, f.name, JSON_KIND[f.type], ARROW[f.type], checked=checked, text=text)
        )
    slots.append(Slot(SCHEMA_VERSION, SCHEMA_VERSION, "number", pa.float64()))
    keys = [s.key for s in slots]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(
            f"the contract reads the JSON key {twice[0]!r} twice: declare each field once"
        )
    columns = [
        (JSON_ERROR, pa.string()),
        *[(s.column, s.arrow) for s in slots],
        *[(kind_column(s.column), pa.string()) for s in slots if s.checked],
    ]
    return Layout(tuple(slots), pa.schema(columns))
