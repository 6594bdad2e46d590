"""The state of every entity of a stream, folded from its events (the KTable pattern).

A stream declares an entity key and how each state column folds the entity's events
(``EntitySpec``). Every fold is a commutative merge, so state needs no event history and
arrival order does not matter:

- ``latest``: the value of the entity's *latest* event, latest by ``(event_time, topic,
  partition, offset)`` (optionally without a prefix); the ordering key is kept in the
  ``last_*`` columns so that a later merge can compare;
- ``sum`` and ``count`` (optionally of the events whose fields equal given values) add up;
- ``min`` / ``first_time`` keep the least, ``max`` / ``last_time`` the greatest.

Merging the state of events A with that of events B gives the state of all of them, whatever
the split, so reprocessing gives the same state and an out-of-order event only updates what it
should (an old event never overwrites a ``latest`` value). Events without a key have no state.

Each run aggregates the new silver rows per entity in Spark, reads the current rows of only the
touched entities (files pruned by key statistics), combines them, and upserts the result with a
delta-rs merge that carries the consumed silver version as its ``txn``.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import time
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_assets.lib import faults
from eos_assets.lib.contract.schema_time import UTC_MICROS
from eos_assets.lib.delta import delta_io, txn_ids
from eos_assets.lib.derived import incremental, increments
from eos_assets.lib.derived.incremental import FromSilverOutcome
from eos_assets.lib.derived.silver_events import stored_schema

UPSTREAM = "silver/events"
APP = txn_ids.FROM_SILVER

BEFORE_MERGE = "entity_state_before_merge"
AFTER_MERGE = "entity_state_after_merge"
CRASH_POINTS = (BEFORE_MERGE, AFTER_MERGE)

# The ordering key of the latest event, and its id: kept in every entity table.
LAST_TIME = "last_event_time"
LATEST_KEY = (LAST_TIME, "last_topic", "last_partition", "last_offset")
TECHNICAL = (
    (LAST_TIME, UTC_MICROS),
    ("last_event_id", pa.string()),
    ("last_topic", pa.string()),
    ("last_partition", pa.int32()),
    ("last_offset", pa.int64()),
    ("silver_version", pa.int64()),
)
FOLDS = ("latest", "sum", "count", "min", "max", "first_time", "last_time")


@dataclass(frozen=True)
class Fold:
    """One state column: ``name`` folds ``of`` (a silver column) the way ``fold`` says.

    ``when`` keeps only the events whose columns equal the given values (not for ``latest``);
    ``strip_prefix`` removes a prefix from a ``latest`` string.
    """

    name: str
    fold: str
    type: pa.DataType
    of: str | None = None
    when: tuple[tuple[str, str], ...] = ()
    strip_prefix: str | None = None


@dataclass(frozen=True)
class EntitySpec:
    """The entity key and the folds of a stream's state table."""

    key: str
    key_type: pa.DataType
    folds: tuple[Fold, ...]

    @property
    def schema(self) -> pa.Schema:
        """Key, the declared columns in order, then the technical ``last_*`` columns."""
        declared = [(f.name, f.type) for f in self.folds]
        names = {f.name for f in self.folds}
        technical = [(n, t) for n, t in TECHNICAL if n not in names]
        return pa.schema([(self.key, self.key_type), *declared, *technical])

    @property
    def latest(self) -> tuple[Fold, ...]:
        return tuple(f for f in self.folds if f.fold == "latest")


@dataclass
class EntityStateOutcome(FromSilverOutcome):
    """What one run of silver/entity_state did, besides what every table from silver reports.

    Attributes:
        entities_touched: entities with new events; the merge inserted ``entities_inserted``
            state rows and updated ``entities_updated``.
        files_rewritten: state files the merge replaced, copying ``rows_copied`` unchanged rows.
    """

    entities_touched: int = 0
    entities_inserted: int = 0
    entities_updated: int = 0
    files_rewritten: int = 0
    rows_copied: int = 0


def update_entity_state(
    spark: SparkSession,
    spec: EntitySpec,
    events_uri: str,
    state_uri: str,
    storage_options: dict[str, str] | None = None,
    upto: int | None = None,
) -> EntityStateOutcome:
    """Fold the silver events not yet consumed (up to version ``upto``; None: the latest)
    into the state of their entities.

    Raises:
        EosError: silver/events was rewritten or its log is gone, or commits kept conflicting.
    """
    delta_io.ensure_table(
        state_uri,
        spec.schema,
        configuration=delta_io.merged_table_config(),
        storage_options=storage_options,
    )
    table = incremental.Derived(
        "silver/entity_state", state_uri, events_uri, APP, storage_options, upto=upto
    )
    return incremental.run(table, EntityStateOutcome, lambda a, o: _step(spark, spec, a, o))


def _step(
    spark: SparkSession,
    spec: EntitySpec,
    attempt: incremental.Attempt,
    outcome: EntityStateOutcome,
) -> None:
    files = attempt.increment.files
    stored = stored_schema(attempt.upstream)
    # The touched keys' bounds and counts come from the key column, read with Arrow on the
    # driver; Spark then runs one job, the fold of the batch joined with the current rows.
    keys = _keys(files, stored, spec.key)
    rows = spec.schema.empty_table()
    if len(keys):
        outcome.entities_touched, outcome.events = pc.count_distinct(keys).as_py(), len(keys)
        bounds = pc.min_max(keys)
        low, high = (_literal(bounds[k].as_py()) for k in ("min", "max"))
        # Only files whose key range can hold a touched entity are read.
        predicate = f"{spec.key} >= {low} AND {spec.key} <= {high}"
        current_files = delta_io.data_files(attempt.target, predicate)
        current = delta_io.read_spark(spark, [f.uri for f in current_files], spec.schema)
        events = increments.read_files(
            spark, files, delta_io.spark_schema(stored), "silver_version"
        ).where(F.col(spec.key).isNotNull())
        rows = combine(current, entity_states(events, spec), spec).toArrow()
    outcome.seconds["compute"] = time.monotonic() - attempt.started
    faults.crash_point(BEFORE_MERGE)
    began = time.monotonic()
    metrics = delta_io.upsert(
        attempt.target,
        rows,
        keys=[spec.key],
        range_key=spec.key,
        txns=attempt.txns,
        metadata=attempt.metadata("entity_state"),
    )
    faults.crash_point(AFTER_MERGE)
    outcome.entities_inserted = int(metrics.get("num_target_rows_inserted", 0))
    outcome.entities_updated = int(metrics.get("num_target_rows_updated", 0))
    outcome.files_rewritten = int(metrics.get("num_target_files_removed", 0))
    outcome.rows_copied = int(metrics.get("num_target_rows_copied", 0))
    outcome.seconds["merge"] = time.monotonic() - began


def _keys(files: Sequence[increments.AddedFile], stored: pa.Schema, key: str) -> pa.Array:
    """The entity key of every event of the silver ``files`` that has one."""
    if not files:
        return pa.array([], stored.field(key).type)
    column = increments.read_columns(files, pa.schema([stored.field(key)])).column(key)
    return pc.drop_null(column.combine_chunks())


def entity_states(events: DataFrame, spec: EntitySpec) -> DataFrame:
    """The state of each entity over ``events`` alone.

    ``silver_version`` is the latest of the events'.
    """
    latest = F.struct(
        F.col("event_time").alias(LAST_TIME),
        F.col("topic").alias("last_topic"),
        F.col("partition").alias("last_partition"),
        F.col("offset").alias("last_offset"),
        *[_latest_value(f).alias(f.name) for f in spec.latest],
        F.col("event_id").alias("last_event_id"),
    )
    # A declared last_time fold named like the ordering key's time is that column.
    aggregates = [
        _aggregate(f).alias(f.name)
        for f in spec.folds
        if f.fold != "latest" and f.name != LAST_TIME
    ]
    grouped = events.groupBy(spec.key).agg(
        F.max(latest).alias("_latest"),
        *aggregates,
        F.max("silver_version").alias("silver_version"),
    )
    others = [spec.key, *[f.name for f in spec.folds if f.fold != "latest" and f.name != LAST_TIME]]
    return grouped.select("_latest.*", *others, "silver_version").select(*spec.schema.names)


def combine(current: DataFrame, batch: DataFrame, spec: EntitySpec) -> DataFrame:
    """The state of the batch's entities after adding ``batch`` to the ``current`` state."""
    c, b = current.alias("c"), batch.alias("b")
    joined = b.join(c, F.col(f"b.{spec.key}") == F.col(f"c.{spec.key}"), "left")
    struct_fields = [*LATEST_KEY, *[f.name for f in spec.latest], "last_event_id"]

    def latest(side: str) -> Column:
        return F.struct(*[F.col(f"{side}.{n}").alias(n) for n in struct_fields])

    # A missing current row has a null struct; greatest and least skip nulls.
    current_latest = F.when(F.col(f"c.{spec.key}").isNotNull(), latest("c"))
    merged = [_merge(f) for f in spec.folds if f.fold != "latest" and f.name != LAST_TIME]
    return joined.select(
        F.col(f"b.{spec.key}").alias(spec.key),
        F.greatest(latest("b"), current_latest).alias("_latest"),
        *merged,
        F.col("b.silver_version").alias("silver_version"),
    ).select(
        *[
            F.col(f"_latest.{name}").alias(name) if name in struct_fields else F.col(name)
            for name in spec.schema.names
        ]
    )


def _latest_value(fold: Fold) -> Column:
    value = F.col(fold.of or fold.name)
    if fold.strip_prefix:
        prefix = fold.strip_prefix
        value = F.when(
            value.startswith(prefix), value.substr(len(prefix) + 1, 2**31 - 1)
        ).otherwise(value)
    return value


def _aggregate(fold: Fold) -> Column:
    kind = _spark_type(fold.type)
    if fold.fold in ("first_time", "last_time"):
        source = F.col("event_time")
    elif fold.fold == "count":
        source = F.lit(1)
    else:
        source = F.col(fold.of or fold.name)
    if fold.when:
        condition = _all([F.col(name) == F.lit(value) for name, value in fold.when])
        zero = F.lit(0) if fold.fold in ("sum", "count") else F.lit(None)
        source = F.when(condition, source).otherwise(zero)
    if fold.fold in ("sum", "count"):
        return F.sum(source).cast(kind)
    if fold.fold in ("min", "first_time"):
        return F.min(source).cast(kind)
    return F.max(source).cast(kind)


def _merge(fold: Fold) -> Column:
    b, c = F.col(f"b.{fold.name}"), F.col(f"c.{fold.name}")
    if fold.fold in ("sum", "count"):
        # A batch without a value of the field adds nothing: null only while neither has one.
        total = F.coalesce(b, F.lit(0)) + F.coalesce(c, F.lit(0))
        return F.when(b.isNull() & c.isNull(), F.lit(None)).otherwise(total).alias(fold.name)
    if fold.fold in ("min", "first_time"):
        return F.least(b, c).alias(fold.name)
    return F.greatest(b, c).alias(fold.name)


def _all(conditions: Sequence[Column]) -> Column:
    out = conditions[0]
    for condition in conditions[1:]:
        out = out & condition
    return out


def _spark_type(kind: pa.DataType) -> str:
    return {
        pa.string(): "string",
        pa.int64(): "bigint",
        pa.int32(): "int",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        UTC_MICROS: "timestamp",
    }[kind]


def _literal(value: object) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)
