"""What a derived table has not consumed yet of its upstream Delta table.

Every derived table records, in its own ``txn`` action with app id
``eos:upstream:<layer>/<table>``, the upstream Delta version it has consumed. The new data of a
run are the files *added with* ``dataChange=true`` in upstream versions ``(consumed, current]``,
read from the upstream ``_delta_log/<version>.json`` entries, as Delta's own streaming source
does: a compaction re-adds rows with ``dataChange=false`` and so never feeds them again.

The upstreams read this way (bronze/raw_events, silver/events) are append-only: a ``remove``
with ``dataChange=true`` means rows were deleted or overwritten, which an incremental consumer
cannot follow, so it stops with the fix (rebuild the derived table). The log entries must still
exist: Delta keeps them ``delta.logRetentionDuration`` (30 days by default) after a checkpoint.

The version consumed, the data written and the new ``txn`` go into one commit made from the
``DeltaTable`` snapshot the consumed version was read from, so a racing duplicate run fails
with ``CommitFailedError`` and re-plans (DESIGN.md, "Positions live with the data"):
``incremental.py`` runs that step for every derived table.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from eos_assets.lib.delta.delta_io import as_uri
from eos_assets.lib.delta.delta_log import file_uri, log_actions
from eos_assets.lib.errors import EosError

_REBUILD = "delete the derived table to rebuild it from the current snapshot"


@dataclass(frozen=True)
class AddedFile:
    """One data file added to the upstream table, with the version that added it."""

    version: int
    uri: str
    size: int
    records: int | None
    partition_values: Mapping[str, str | None]


def read_columns(files: Sequence[AddedFile], schema: pa.Schema) -> pa.Table:
    """The ``schema`` columns of the upstream ``files`` (at least one), read with Arrow on the
    driver; a column a file was written without reads as null, as Spark's reader does."""
    fs, _ = pafs.FileSystem.from_uri(as_uri(files[0].uri))
    paths = [pafs.FileSystem.from_uri(as_uri(f.uri))[1] for f in files]
    return pads.dataset(paths, schema=schema, format="parquet", filesystem=fs).to_table()


# Below this many rows an increment is computed in one Spark task: with no shuffle its job is
# one stage, where a shuffle adds a stage and its tasks (a continuous stream's batches).
ONE_TASK_ROWS = 100_000
# Spark writes a long literal into the Java code it generates for a query, and a decimal one
# into a table of constants beside it: with the upstream version as a long, every batch's query
# is new code to compile and new classes for the JIT. kpi_daily's query over the same four
# small files on a warm server, median of 12: as a long 0.46 s with a new version each time,
# 0.28 s with the same one; as this decimal 0.27 s either way. Precision 18 keeps it a
# long-backed decimal (19 or more: a Java BigDecimal per value).
PLAN_STABLE_VERSION = "decimal(18,0)"


@dataclass(frozen=True)
class Increment:
    """Upstream files added in versions ``(consumed, version]``.

    Attributes:
        upstream_uri: the upstream table.
        consumed: the version already consumed (None: nothing yet).
        version: the upstream version this increment reaches; its snapshot is what a run reads.
        files: files added with ``dataChange=true`` in those versions, in version order.
    """

    upstream_uri: str
    consumed: int | None
    version: int
    files: list[AddedFile] = field(default_factory=list)

    @property
    def is_new(self) -> bool:
        """True when upstream moved past the consumed version."""
        return self.consumed is None or self.version > self.consumed

    @property
    def records(self) -> int:
        """Rows in the added files (from their statistics; files without stats count 0)."""
        return sum(f.records or 0 for f in self.files)

    @property
    def fits_one_task(self) -> bool:
        """True when the increment is small enough for one Spark task (``ONE_TASK_ROWS``)."""
        return self.records < ONE_TASK_ROWS

    @property
    def first_version(self) -> int:
        """The first upstream version of this increment."""
        return 0 if self.consumed is None else self.consumed + 1


def load_upstream(
    uri: str, storage_options: Mapping[str, str] | None = None, version: int | None = None
) -> DeltaTable:
    """The snapshot of an upstream table at ``version`` (None: the latest).

    Raises:
        EosError: the table does not exist yet (materialize the upstream asset first).
    """
    try:
        return DeltaTable(uri, version=version, storage_options=dict(storage_options or {}))
    except TableNotFoundError as exc:
        raise EosError(
            f"the upstream table {uri} does not exist yet: materialize it first "
            "(materialize_all runs the whole graph in order)"
        ) from exc


def plan_increment(upstream: DeltaTable, upstream_uri: str, consumed: int | None) -> Increment:
    """The files ``upstream`` (a loaded snapshot) added after version ``consumed``.

    Raises:
        EosError: the upstream was rewritten (a data-changing remove), its log entries are
            gone, or it is older than what was consumed (it was re-created).
    """
    version = upstream.version()
    if consumed is not None and consumed > version:
        raise EosError(
            f"{upstream_uri} is at version {version} but version {consumed} was already "
            "consumed: the upstream table was re-created; delete the derived tables to rebuild"
        )
    start = 0 if consumed is None else consumed + 1
    files = added_files(upstream_uri, start, version) if start <= version else []
    return Increment(upstream_uri=upstream_uri, consumed=consumed, version=version, files=files)


def added_files(table_uri: str, first: int, last: int, append_only: bool = True) -> list[AddedFile]:
    """Files added with ``dataChange=true`` by versions ``first..last`` of a table.

    Raises:
        EosError: the table is ``append_only`` and a version removed data, or a log entry
            no longer exists.
    """
    files: list[AddedFile] = []
    for version in range(first, last + 1):
        for action in log_actions(table_uri, version, _REBUILD):
            remove = action.get("remove")
            if append_only and remove is not None and remove.get("dataChange", True):
                raise EosError(
                    f"version {version} of {table_uri} deleted or rewrote rows, which an "
                    "incremental consumer cannot follow: delete the derived tables to rebuild"
                )
            add = action.get("add")
            if add is None or not add.get("dataChange", True):
                continue
            stats = json.loads(add["stats"]) if add.get("stats") else {}
            files.append(
                AddedFile(
                    version=version,
                    uri=file_uri(table_uri, add["path"]),
                    size=int(add.get("size", 0)),
                    records=stats.get("numRecords"),
                    partition_values=add.get("partitionValues") or {},
                )
            )
    return files


def read_files(
    spark: SparkSession,
    files: Sequence[AddedFile],
    schema: StructType,
    version_column: str,
    version_type: str = "long",
) -> DataFrame:
    """The rows of ``files`` with the upstream version that added each as ``version_column``.

    ``schema`` holds the columns stored in the files (not partition columns). ``version_type``
    ``PLAN_STABLE_VERSION`` keeps the query's generated code the same from one batch to the
    next (see there); the caller then casts the column where the rows leave Spark.
    """
    by_version: dict[int, list[str]] = {}
    for f in files:
        by_version.setdefault(f.version, []).append(f.uri)
    frames = [
        spark.read.schema(schema)
        .parquet(*uris)
        .withColumn(version_column, F.lit(v).cast(version_type))
        for v, uris in sorted(by_version.items())
    ]
    if not frames:
        empty = spark.createDataFrame([], schema)
        return empty.withColumn(version_column, F.lit(None).cast(version_type))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame
