"""The DuckDB serving database."""

import dagster as dg
import duckdb
from pydantic import Field

from eos_assets.lib.serving import warehouse_file


class WarehouseResource(dg.ConfigurableResource):
    """DuckDB file that serves KPI tables to dashboards and fast checks.

    Serving writes each new version into a copy and swaps it in atomically, so any number of
    read-only connections (``duckdb -readonly``, notebooks, dashboards) may stay open.
    """

    path: str = Field(description="Path of the DuckDB database file.")

    def read(self) -> duckdb.DuckDBPyConnection:
        """A read-only connection to the version being served now.

        Raises:
            EosError: nothing was served yet.
        """
        return warehouse_file.connect_reader(self.path)
