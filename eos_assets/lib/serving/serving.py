"""Mirror KPI Delta tables into the DuckDB serving database, upserting changed rows only.

A table with a primary key gets a DuckDB table with that key and is upserted; one without (a
KPI recomputed whole) is replaced by its snapshot. ``eos_delta_versions`` records the Delta
version each table reflects. One mirror run is ONE DuckDB transaction: every upsert
(``INSERT ... ON CONFLICT DO UPDATE``), every replacement and the new versions commit together
or not at all, so a reader never sees rows of one version with the version number of another.
``serve`` runs it on a copy of the database file and swaps the copy in (``warehouse_file``), so
readers of the file, however many and however long, never stop it.

Rows to upsert are those of the files added since the mirrored version that are still live in
the current snapshot (a merge rewrites files; rows never disappear from keyed KPI tables, so
every changed row lives in such a file). Unchanged rows in those files are upserted again,
which is harmless. When the log entries since the mirrored version are gone, or nothing was
mirrored yet, every live file is read: the upsert makes that a full refresh. DuckDB reads Delta
through delta-rs and Arrow (its ``delta`` extension is not installable offline).
"""

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from eos_assets.lib import faults
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived import increments
from eos_assets.lib.errors import EosError
from eos_assets.lib.serving import warehouse_file

VERSIONS_TABLE = "eos_delta_versions"
BEFORE_COMMIT = "serving_before_commit"
CRASH_POINTS = (BEFORE_COMMIT, warehouse_file.BEFORE_SWAP)

_DUCK_TYPES = {
    pa.string(): "VARCHAR",
    pa.int64(): "BIGINT",
    pa.int32(): "INTEGER",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.date32(): "DATE",
    pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ",
}


def quoted(name: str) -> str:
    """A served table's name as SQL: ``stream.kpi`` is the table ``kpi`` in the schema
    ``stream``."""
    return ".".join(f'"{part}"' for part in name.split("."))


@dataclass(frozen=True)
class ServedTable:
    """A Delta table served from DuckDB as ``name`` (``<schema>.<table>`` or ``<table>``).

    With a primary ``key`` (and the table's ``schema``) the copy is upserted with the rows of
    the files added since it was mirrored; without one (a table recomputed whole, such as a SQL
    KPI) the copy is replaced by the snapshot's rows, with the snapshot's columns.
    """

    name: str
    uri: str
    schema: pa.Schema | None = None
    key: tuple[str, ...] = ()


@dataclass
class MirrorOutcome:
    """What one mirror run did, per table: the Delta version and rows upserted."""

    versions: dict[str, int] = field(default_factory=dict)
    upserted: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0


def create_ddl(table: ServedTable) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for ``table`` with its primary key."""
    assert table.schema is not None
    columns = []
    for f in table.schema:
        try:
            kind = _DUCK_TYPES[f.type]
        except KeyError as exc:
            raise EosError(
                f"column {f.name} of {table.name} has type {f.type} that the "
                "serving mirror does not map: add it to serving._DUCK_TYPES"
            ) from exc
        null = " NOT NULL" if f.name in table.key else ""
        columns.append(f'"{f.name}" {kind}{null}')
    key = ", ".join(f'"{k}"' for k in table.key)
    name = quoted(table.name)
    return f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(columns)}, PRIMARY KEY ({key}))"


def serve(
    path: str,
    tables: Sequence[ServedTable],
    storage_options: dict[str, str] | None = None,
) -> MirrorOutcome:
    """Mirror ``tables`` into the serving database at ``path`` (a new version if any changed)."""
    return warehouse_file.publish(
        path, lambda conn: mirror(conn, tables, storage_options), lambda o: bool(o.upserted)
    )


def mirror(
    conn: duckdb.DuckDBPyConnection,
    tables: Sequence[ServedTable],
    storage_options: dict[str, str] | None = None,
) -> MirrorOutcome:
    """Bring the DuckDB copies of ``tables`` up to their current Delta versions."""
    clock = time.monotonic()
    outcome = MirrorOutcome()
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (table_name VARCHAR PRIMARY KEY, "
        "delta_uri VARCHAR, delta_version BIGINT NOT NULL, rows_upserted BIGINT, "
        "mirrored_at TIMESTAMPTZ)"
    )
    for table in tables:
        if "." in table.name:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted(table.name.split('.')[0])}")
        if table.key:
            conn.execute(create_ddl(table))
    mirrored = dict(
        conn.execute(f"SELECT table_name, delta_version FROM {VERSIONS_TABLE}").fetchall()
    )
    changes: list[tuple[ServedTable, int, pa.Table]] = []
    for table in tables:
        try:
            dt = delta_io.load(table.uri, storage_options)
        except TableNotFoundError as exc:
            raise EosError(
                f"{table.uri} does not exist yet: materialize the KPI tables before serving them"
            ) from exc
        version = dt.version()
        outcome.versions[table.name] = version
        if mirrored.get(table.name) == version:
            outcome.skipped.append(table.name)
            continue
        changes.append((table, version, _changed_rows(table, dt, mirrored.get(table.name))))
    if not changes:
        outcome.seconds = time.monotonic() - clock
        return outcome
    now = datetime.now(UTC)
    conn.execute("BEGIN TRANSACTION")
    try:
        for table, version, rows in changes:
            if table.key:
                _upsert(conn, table, rows)
            else:
                _replace(conn, table, rows)
            conn.execute(
                f"INSERT INTO {VERSIONS_TABLE} VALUES (?, ?, ?, ?, ?) ON CONFLICT (table_name) "
                "DO UPDATE SET delta_uri = excluded.delta_uri, "
                "delta_version = excluded.delta_version, rows_upserted = excluded.rows_upserted, "
                "mirrored_at = excluded.mirrored_at",
                [table.name, table.uri, version, rows.num_rows, now],
            )
            outcome.upserted[table.name] = rows.num_rows
        faults.crash_point(BEFORE_COMMIT)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    outcome.seconds = time.monotonic() - clock
    return outcome


def _changed_rows(table: ServedTable, dt: DeltaTable, mirrored: int | None) -> pa.Table:
    """Rows of the live files added after version ``mirrored`` (every live file if None, or
    if the table is replaced whole)."""
    live = {f.rsplit("/", 1)[-1]: f for f in dt.file_uris()}
    wanted = list(live.values())
    schema = table.schema or pa.schema(dt.schema().to_arrow())  # type: ignore[arg-type]
    if table.key and mirrored is not None and mirrored < dt.version():
        try:
            added = increments.added_files(table.uri, mirrored + 1, dt.version(), append_only=False)
            names = {a.uri.rsplit("/", 1)[-1] for a in added}
            wanted = [uri for name, uri in live.items() if name in names]
        except EosError:
            pass  # the log since ``mirrored`` is gone: refresh from every live file
    if not wanted:
        return schema.empty_table()
    fs, _ = pafs.FileSystem.from_uri(delta_io.as_uri(wanted[0]))
    paths = [pafs.FileSystem.from_uri(delta_io.as_uri(u))[1] for u in wanted]
    return pq.read_table(paths, filesystem=fs, schema=schema)


def _replace(conn: duckdb.DuckDBPyConnection, table: ServedTable, rows: pa.Table) -> None:
    conn.register("_eos_rows", rows)
    try:
        conn.execute(f"CREATE OR REPLACE TABLE {quoted(table.name)} AS SELECT * FROM _eos_rows")
    finally:
        conn.unregister("_eos_rows")


def _upsert(conn: duckdb.DuckDBPyConnection, table: ServedTable, rows: pa.Table) -> None:
    assert table.schema is not None
    if rows.num_rows == 0:
        return
    conn.register("_eos_rows", rows)
    try:
        names = ", ".join(f'"{n}"' for n in table.schema.names)
        key = ", ".join(f'"{k}"' for k in table.key)
        updates = ", ".join(
            f'"{n}" = excluded."{n}"' for n in table.schema.names if n not in table.key
        )
        conn.execute(
            f"INSERT INTO {quoted(table.name)} ({names}) SELECT {names} FROM _eos_rows "
            f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
        )
    finally:
        conn.unregister("_eos_rows")
