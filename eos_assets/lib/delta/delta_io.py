"""Delta tables through delta-rs: create, read, commit files with ``txn`` actions, upsert.

Spark computes and delta-rs commits (DESIGN.md, "Which engine writes which table, and why").
Large results are written by Spark tasks as Parquet files inside the table folder and committed
by the driver as add actions (``commit_files``); small ones go from ``DataFrame.toArrow()`` to
``upsert`` (a delta-rs merge).

The exactly-once commit rests on one measured property of delta-rs: a commit made from the
``DeltaTable`` snapshot that was used to read ``transaction_version`` fails with
``CommitFailedError`` when a concurrent commit wrote the same ``txn`` app id. Writing by path
re-loads the latest snapshot and would silently duplicate, so every commit here goes through
the snapshot object the positions were read from, with the new positions as ``txn`` actions:
all-or-nothing, and a racing duplicate fails.

Commit metadata: bronze keeps its values as JSON (its commit log reads ``eos.ranges`` back as
a list); derived tables store values that are not strings as JSON text (``text_values``).

Merged tables set ``delta.targetFileSize`` (``MERGED_FILE_SIZE``): a merge rewrites every file
holding a touched key, and without a cap it would write one ever-growing file that each run
rewrites whole. ``upsert`` adds a literal range on the key column to the merge predicate, so
delta-rs skips files whose statistics rule the range out.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import contextlib
import json
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from eos_assets.lib import lake_store, store_check, store_errors
from eos_assets.lib.errors import ConfigError, EosError

__all__ = [
    "MERGED_FILE_SIZE",
    "CommitFailedError",
    "DataFile",
    "add_action",
    "as_uri",
    "commit_files",
    "commit_properties",
    "data_files",
    "data_schema",
    "ensure_table",
    "exists",
    "find_commit",
    "load",
    "merged_table_config",
    "positions",
    "read_arrow",
    "read_rows",
    "read_spark",
    "spark_schema",
    "upsert",
]

MERGED_FILE_SIZE = 1024 * 1024


def ensure_table(
    uri: str,
    schema: pa.Schema,
    storage_options: Mapping[str, str] | None = None,
    *,
    partition_by: Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
) -> DeltaTable:
    """Open the table at ``uri``, creating it empty with ``schema`` first if it does not exist.

    Raises:
        EosError: the location cannot be written (a one-line cause and fix).
    """
    try:
        return load(uri, storage_options)
    except TableNotFoundError:
        pass
    try:
        store_check.require_conditional_put(uri, storage_options)
        return DeltaTable.create(
            uri,
            schema,
            mode="ignore",
            partition_by=list(partition_by) or None,
            configuration=dict(configuration or {}),
            storage_options=dict(storage_options or {}),
        )
    except (OSError, DeltaError) as exc:
        if explained := store_errors.explain(exc, uri, os.environ):
            raise EosError(explained) from exc
        raise EosError(
            f"cannot create the Delta table at {uri} ({_cause(exc)}): make "
            "EOS_LAKE_ROOT a writable location"
        ) from exc


def _cause(exc: Exception) -> str:
    """One line of an I/O error; delta-rs adds a multi-line Rust debug dump of the OS error."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc)
    rust = re.search(r'message: "([^"]+)"', text)
    if rust:
        return rust.group(1)
    return " ".join(text.split()) or type(exc).__name__


def merged_table_config() -> dict[str, str]:
    """Table properties of a table written by merges (see the module docstring)."""
    return {"delta.targetFileSize": str(MERGED_FILE_SIZE)}


def load(uri: str, storage_options: Mapping[str, str] | None = None) -> DeltaTable:
    """Open the latest snapshot of the table at ``uri``.

    Raises:
        TableNotFoundError: no table lives there.
        EosError: the lake's object store cannot be used (one line naming what to set).
    """
    with lake_errors(uri):
        return DeltaTable(uri, storage_options=dict(storage_options or {}))


def exists(uri: str, storage_options: Mapping[str, str] | None = None) -> bool:
    """True when a Delta table lives at ``uri``.

    Raises:
        EosError: the lake's object store cannot be used (one line naming what to set).
    """
    with lake_errors(uri):
        return DeltaTable.is_deltatable(uri, storage_options=dict(storage_options or {}))


@contextlib.contextmanager
def lake_errors(uri: str) -> Iterator[None]:
    """Turn an error of the lake's object store into its one line (``lake_store``)."""
    if problem := lake_store.problem(uri, os.environ):
        raise ConfigError(problem)
    try:
        yield
    except (TableNotFoundError, CommitFailedError):
        raise
    except (OSError, DeltaError) as exc:
        explained = store_errors.explain(exc, uri, os.environ)
        if explained is None:
            raise
        raise EosError(explained) from None


def positions(dt: DeltaTable, app_ids: Iterable[str]) -> dict[str, int | None]:
    """The ``txn`` version of each app id in snapshot ``dt`` (None if never committed)."""
    return {a: dt.transaction_version(a) for a in app_ids}


def find_commit(
    uri: str,
    key: str,
    value: str,
    storage_options: Mapping[str, str] | None = None,
    limit: int = 50,
) -> int:
    """The version of the recent commit whose metadata has ``key == value``.

    Raises:
        EosError: no such commit among the last ``limit``.
    """
    for entry in load(uri, storage_options).history(limit):
        if entry.get(key) == value:
            return int(entry["version"])
    raise EosError(f"commit with {key}={value} not found in the last {limit} versions of {uri}")


def add_action(
    path: str, size: int, stats: str, partition_values: Mapping[str, str | None] | None = None
) -> AddAction:
    """An add action for a Parquet file already written inside the table folder."""
    return AddAction(path, size, dict(partition_values or {}), int(time.time() * 1000), True, stats)


def commit_properties(
    txns: Mapping[str, int], metadata: Mapping[str, Any], *, text_values: bool = False
) -> CommitProperties:
    """One ``txn`` action per app id plus the commit metadata.

    Args:
        text_values: store metadata values that are not strings as JSON text, as derived
            tables do; by default they stay JSON values (see the module docstring).
    """
    if text_values:
        metadata = {k: v if isinstance(v, str) else _json(v) for k, v in metadata.items()}
    return CommitProperties(
        custom_metadata=dict(metadata),
        app_transactions=[Transaction(a, v) for a, v in sorted(txns.items())],
    )


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


def commit_files(
    dt: DeltaTable,
    actions: Sequence[AddAction],
    schema: pa.Schema,
    txns: Mapping[str, int],
    metadata: Mapping[str, Any],
    *,
    partition_by: Sequence[str] = (),
    text_values: bool = False,
) -> None:
    """Commit ``actions`` (possibly none) and one ``txn`` action per app id in one Delta
    commit, from ``dt``; ``text_values`` as in ``commit_properties``.

    Raises:
        CommitFailedError: a concurrent commit conflicted (for example it wrote one of the same
            ``txn`` app ids); nothing of this commit is visible and the caller must re-plan.
        EosError: the lake's object store failed the commit (one line; nothing committed).
    """
    with lake_errors(dt.table_uri):
        dt.create_write_transaction(
            list(actions),
            mode="append",
            schema=schema,
            partition_by=list(partition_by) or None,
            commit_properties=commit_properties(txns, metadata, text_values=text_values),
        )


def upsert(
    dt: DeltaTable,
    rows: pa.Table,
    keys: Sequence[str],
    range_key: str,
    txns: Mapping[str, int],
    metadata: Mapping[str, Any],
) -> dict[str, Any]:
    """Insert or replace ``rows`` by ``keys`` in one merge from ``dt``; return its metrics.

    Metadata values that are not strings are stored as JSON text (a derived table's commit).
    An empty ``rows`` still commits the ``txn`` actions (as an empty append), so a run that
    consumed upstream versions without changing a row records it.
    """
    schema = pa.schema(dt.schema().to_arrow())  # type: ignore[arg-type]
    rows = rows.select(schema.names).cast(schema)
    if rows.num_rows == 0:
        commit_files(dt, [], schema, txns, metadata, text_values=True)
        return {"num_source_rows": 0}
    props = commit_properties(txns, metadata, text_values=True)
    # Sorted by the range key, inserted rows land in files with narrow key ranges, which keeps
    # the file pruning of later merges effective.
    rows = rows.sort_by(range_key)
    bounds = pc.min_max(rows.column(range_key))
    low, high = (sql_literal(bounds[k].as_py()) for k in ("min", "max"))
    match = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    predicate = f"t.{range_key} BETWEEN {low} AND {high} AND {match}"
    with lake_errors(dt.table_uri):
        return (
            dt.merge(rows, predicate, source_alias="s", target_alias="t", commit_properties=props)
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )


def sql_literal(value: object) -> str:
    if isinstance(value, datetime | date):
        return f"'{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def read_arrow(
    uri: str,
    storage_options: Mapping[str, str] | None = None,
    columns: Sequence[str] | None = None,
    version: int | None = None,
) -> pa.Table:
    """The whole snapshot at ``version`` (latest when None) of the small table at ``uri`` as
    Arrow, read from its files.

    Reads the Parquet files through an explicit pyarrow filesystem (delta-rs's default one can
    abort the interpreter at exit); valid because tables here have no deletion vectors. For a
    slice of a snapshot, with partition values filled in, use ``read_rows``.
    """
    dt = DeltaTable(uri, version=version, storage_options=dict(storage_options or {}))
    schema = pa.schema(dt.schema().to_arrow())  # type: ignore[arg-type]
    files = dt.file_uris()
    if not files:
        empty = schema.empty_table()
        return empty.select(list(columns)) if columns else empty
    fs, _ = pafs.FileSystem.from_uri(files[0])
    paths = [pafs.FileSystem.from_uri(f)[1] for f in files]
    return pq.read_table(
        paths, filesystem=fs, columns=list(columns) if columns else None, schema=schema
    )


def read_rows(
    dt: DeltaTable,
    schema: pa.Schema,
    predicate: str | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """The rows of the files of snapshot ``dt`` that ``predicate`` may match, as Arrow.

    ``predicate`` prunes files (by partition values and statistics), not rows: filter the
    result. Partition columns are filled in from the log. Meant for small slices; for a whole
    small table by its URI, ``read_arrow``.
    """
    names = list(columns or schema.names)
    target = pa.schema([schema.field(n) for n in names])
    pieces = []
    for f in data_files(dt, predicate):
        stored = [n for n in names if n not in f.partition_values]
        fs, path = pafs.FileSystem.from_uri(as_uri(f.uri))
        piece = pq.read_table(path, filesystem=fs, columns=stored)
        for name, value in f.partition_values.items():
            if name in names:
                column = pa.array([value] * piece.num_rows, schema.field(name).type)
                piece = piece.append_column(name, column)
        pieces.append(piece.select(names).cast(target))
    return pa.concat_tables(pieces) if pieces else target.empty_table()


@dataclass(frozen=True)
class DataFile:
    """A data file of a snapshot: where it is, its rows, its partition values."""

    uri: str
    records: int
    partition_values: Mapping[str, Any]


def data_files(dt: DeltaTable, predicate: str | None = None) -> list[DataFile]:
    """The files of snapshot ``dt`` that ``predicate`` may match (by partitions and stats)."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    parts = [n for n in actions.column_names if n.startswith("partition.")]
    info = {}
    for row in actions.select(["path", "num_records", *parts]).to_pylist():
        info[_name(row["path"])] = (
            int(row["num_records"] or 0),
            {p.removeprefix("partition."): row[p] for p in parts},
        )
    uris = dt.file_uris(file_pruning_predicate=predicate) if predicate else dt.file_uris()
    return [DataFile(u, *info[_name(u)]) for u in uris]


def _name(path: str) -> str:
    return unquote(path).rsplit("/", 1)[-1]


def as_uri(path: str) -> str:
    """A local path as a file:// URI; URIs unchanged."""
    return path if "://" in path else f"file://{path}"


def data_schema(schema: pa.Schema, partition_by: Sequence[str]) -> pa.Schema:
    """The columns stored in the data files: partition columns live in the log only."""
    return pa.schema([f for f in schema if f.name not in partition_by])


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema."""
    return from_arrow_schema(schema)


def read_spark(
    spark: SparkSession, uris: Sequence[str], schema: pa.Schema, partition_by: Sequence[str] = ()
) -> DataFrame:
    """The stored columns of ``uris`` as a DataFrame (an empty one when there are none)."""
    stored = spark_schema(data_schema(schema, partition_by))
    if not uris:
        return spark.createDataFrame([], stored)
    return spark.read.schema(stored).parquet(*uris)
