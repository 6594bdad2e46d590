"""The KPIs a stream declares, computed by DuckDB and served in the serving database.

A declaration's KPIs are SQL over two tables: ``window_aggregates`` (the stream's windows)
and ``entity_state`` (its entity state). Each refresh reads the current snapshot of both Delta
tables (delta-rs, Arrow), runs every served KPI and replaces its table ``<stream>.<kpi>`` in the
serving database, in one DuckDB transaction that also records the two Delta versions the KPIs
reflect (``eos_declared_kpis``). It runs on a copy of the file that is swapped in
(``warehouse_file``), so readers keep a whole version and never block it; when both versions
are the ones already recorded nothing is written.

KPI SQL is free-form (distinct counts, ratios, window functions), so a KPI is recomputed whole
from the two tables, not patched: its cost grows with the window and entity tables, not with
the events, and both are much smaller than the events they summarize.
"""

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import duckdb
import pyarrow as pa
from deltalake.exceptions import TableNotFoundError

from eos_assets.lib.delta import delta_io
from eos_assets.lib.errors import EosError
from eos_assets.lib.serving import warehouse_file

VERSIONS_TABLE = "eos_declared_kpis"
WINDOWS = "window_aggregates"
ENTITY = "entity_state"


@dataclass
class KpiRefresh:
    """What one refresh did: the Delta versions read, and the rows of each KPI table."""

    versions: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    up_to_date: bool = False
    seconds: float = 0.0


def refresh(
    path: str,
    stream: str,
    kpis: Mapping[str, str],
    sources: Mapping[str, str],
    storage_options: Mapping[str, str] | None = None,
) -> KpiRefresh:
    """Recompute the ``kpis`` (name -> SQL) of ``stream`` into the serving database at ``path``.

    Args:
        path: the serving database file.
        stream: the stream's name, also the DuckDB schema of its KPI tables.
        kpis: the served KPIs and their SQL.
        sources: Delta table URI of ``window_aggregates`` and, if declared, ``entity_state``.
        storage_options: object-store options of the lake.

    Raises:
        EosError: a source table does not exist yet, or a KPI failed in DuckDB.
    """
    clock = time.monotonic()
    outcome = KpiRefresh()
    tables: dict[str, pa.Table] = {}
    for name, uri in sources.items():
        try:
            dt = delta_io.load(uri, storage_options)
        except TableNotFoundError:
            raise EosError(
                f"{uri} does not exist yet: materialize {name} before the KPIs of {stream}"
            ) from None
        outcome.versions[name] = dt.version()
        tables[name] = dt.to_pyarrow_table()

    def build(conn: duckdb.DuckDBPyConnection) -> KpiRefresh:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (stream VARCHAR, source VARCHAR, "
            "delta_version BIGINT NOT NULL, refreshed_at TIMESTAMPTZ, PRIMARY KEY (stream, source))"
        )
        recorded = dict(
            conn.execute(
                f"SELECT source, delta_version FROM {VERSIONS_TABLE} WHERE stream = ?", [stream]
            ).fetchall()
        )
        present = {
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", [stream]
            ).fetchall()
        }
        if recorded == outcome.versions and set(kpis) <= present:
            outcome.up_to_date = True
            return outcome
        for name, table in tables.items():
            conn.register(name, table)
        now = datetime.now(UTC)
        conn.execute("BEGIN TRANSACTION")
        try:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{stream}"')
            for name, sql in kpis.items():
                try:
                    conn.execute(f'CREATE OR REPLACE TABLE "{stream}"."{name}" AS {sql}')
                except duckdb.Error as exc:
                    detail = str(exc).splitlines()[0]
                    raise EosError(
                        f"KPI {stream}.{name} failed in DuckDB ({detail}): fix its SQL in the "
                        "stream's declaration"
                    ) from None
                count = conn.execute(f'SELECT count(*) FROM "{stream}"."{name}"').fetchone()
                outcome.rows[name] = int(count[0]) if count else 0
            for source, version in outcome.versions.items():
                conn.execute(
                    f"INSERT INTO {VERSIONS_TABLE} VALUES (?, ?, ?, ?) ON CONFLICT "
                    "(stream, source) DO UPDATE SET delta_version = excluded.delta_version, "
                    "refreshed_at = excluded.refreshed_at",
                    [stream, source, version, now],
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        finally:
            for name in tables:
                conn.unregister(name)
        return outcome

    result = warehouse_file.publish(path, build, lambda o: not o.up_to_date)
    result.seconds = time.monotonic() - clock
    return result
