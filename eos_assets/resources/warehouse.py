"""The DuckDB serving database."""

from pathlib import Path

import dagster as dg
import duckdb
from pydantic import Field


class WarehouseResource(dg.ConfigurableResource):
    """DuckDB file that serves KPI tables to dashboards and fast checks."""

    path: str = Field(description="Path of the DuckDB database file.")

    def connect(self, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """Open the database, creating its folder first."""
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        return duckdb.connect(self.path, read_only=read_only)
