"""The lake: where the Delta tables live."""

import dagster as dg
from pydantic import Field

from eos_assets.settings import Settings


class LakeResource(dg.ConfigurableResource):
    """Root of the Delta tables; an asset key ``[layer, table]`` maps to ``<root>/layer/table``."""

    root: str = Field(description="Local path or object-store URI of the lake root.")
    storage_options: dict[str, str] = Field(
        default_factory=dict, description="delta-rs storage options for object stores."
    )

    def table_uri(self, *key: str) -> str:
        """Location of the table of asset key ``key``."""
        return Settings(lake_root=self.root).table_uri(*key)
