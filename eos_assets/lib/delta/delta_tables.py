"""Derived Delta tables: create, read small slices, commit files, upsert.

Spark computes and delta-rs commits (DESIGN.md, "Which engine writes which table, and why").
Large results are written by Spark tasks as Parquet files inside the table folder
(``file_writer.write_files``) and committed by the driver as add actions (``commit_adds``);
small ones go from ``DataFrame.toArrow()`` to ``upsert`` (a delta-rs merge).
Every commit is made from the snapshot the consumed upstream version was read from, with that
version (and any other state) as ``txn`` actions, so it is all-or-nothing and a racing
duplicate fails with ``CommitFailedError``.

Merged tables set ``delta.targetFileSize`` (``MERGED_FILE_SIZE``): a merge rewrites every file
holding a touched key, and without a cap it would write one ever-growing file that each run
rewrites whole. ``upsert`` adds a literal range on the key column to the merge predicate, so
delta-rs skips files whose statistics rule the range out.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.transaction import AddAction
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from eos_assets.lib.errors import EosError

MERGED_FILE_SIZE = 1024 * 1024


def ensure(
    uri: str,
    schema: pa.Schema,
    partition_by: Sequence[str] = (),
    configuration: Mapping[str, str] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """Create the table at ``uri`` unless it exists, before any run plans against it."""
    options = dict(storage_options or {})
    try:
        DeltaTable(uri, storage_options=options)
        return
    except TableNotFoundError:
        pass
    try:
        DeltaTable.create(
            uri,
            schema,
            mode="ignore",
            partition_by=list(partition_by) or None,
            configuration=dict(configuration or {}),
            storage_options=options,
        )
    except (OSError, DeltaError) as exc:
        raise EosError(
            f"cannot create the Delta table at {uri} ({' '.join(str(exc).split())[:200]}): make "
            "EOS_LAKE_ROOT a writable location"
        ) from exc


def merged_table_config() -> dict[str, str]:
    """Table properties of a table written by merges (see the module docstring)."""
    return {"delta.targetFileSize": str(MERGED_FILE_SIZE)}


def txn_versions(dt: DeltaTable, apps: Sequence[str]) -> dict[str, int | None]:
    """The ``txn`` version of each app id in snapshot ``dt``."""
    return {a: dt.transaction_version(a) for a in apps}


def commit_properties(txns: Mapping[str, int], metadata: Mapping[str, Any]) -> CommitProperties:
    """One ``txn`` action per app id plus the commit metadata."""
    return CommitProperties(
        custom_metadata={k: v if isinstance(v, str) else _json(v) for k, v in metadata.items()},
        app_transactions=[Transaction(a, v) for a, v in sorted(txns.items())],
    )


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


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


def read_rows(
    dt: DeltaTable,
    schema: pa.Schema,
    predicate: str | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """The rows of the files of snapshot ``dt`` that ``predicate`` may match, as Arrow.

    ``predicate`` prunes files (by partition values and statistics), not rows: filter the
    result. Partition columns are filled in from the log. Meant for small slices.
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


def as_uri(path: str) -> str:
    """A local path as a file:// URI; URIs unchanged."""
    return path if "://" in path else f"file://{path}"


def commit_adds(
    dt: DeltaTable,
    actions: Sequence[AddAction],
    schema: pa.Schema,
    partition_by: Sequence[str],
    txns: Mapping[str, int],
    metadata: Mapping[str, Any],
) -> None:
    """Commit ``actions`` (possibly none) and the ``txn`` actions in one commit, from ``dt``."""
    dt.create_write_transaction(
        list(actions),
        mode="append",
        schema=schema,
        partition_by=list(partition_by) or None,
        commit_properties=commit_properties(txns, metadata),
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

    An empty ``rows`` still commits the ``txn`` actions (as an empty append), so a run that
    consumed upstream versions without changing a row records it.
    """
    schema = pa.schema(dt.schema().to_arrow())  # type: ignore[arg-type]
    rows = rows.select(schema.names).cast(schema)
    props = commit_properties(txns, metadata)
    if rows.num_rows == 0:
        dt.create_write_transaction([], mode="append", schema=schema, commit_properties=props)
        return {"num_source_rows": 0}
    # Sorted by the range key, inserted rows land in files with narrow key ranges, which keeps
    # the file pruning of later merges effective.
    rows = rows.sort_by(range_key)
    bounds = pc.min_max(rows.column(range_key))
    low, high = (_sql_literal(bounds[k].as_py()) for k in ("min", "max"))
    match = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    predicate = f"t.{range_key} BETWEEN {low} AND {high} AND {match}"
    return (
        dt.merge(rows, predicate, source_alias="s", target_alias="t", commit_properties=props)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def _sql_literal(value: object) -> str:
    if isinstance(value, datetime | date):
        return f"'{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def spark_empty(spark: SparkSession, schema: pa.Schema) -> DataFrame:
    """An empty DataFrame of ``schema``."""
    return spark.createDataFrame([], spark_schema(schema))
