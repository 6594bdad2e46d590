"""``silver/order_state``: the latest state of every order (the KTable pattern).

State is a commutative merge of an order's events, so it needs no event history and arrival
order does not matter:

- ``status`` is the event type (without ``order_``) of the order's *latest* event, latest by
  ``(event_time, topic, partition, offset)``; ``customer_id``, ``currency`` and ``amount`` come
  from that event too, and ``last_*`` keep its ordering key so a later merge can compare;
- ``<kind>_amount`` sums the amounts of the order's ``order_<kind>`` events, ``event_count``
  counts its events, ``first_event_time`` / ``last_event_time`` are the min / max event time.

Merging the state of events A with that of events B gives the state of all of them, whatever
the split, so reprocessing gives the same state and an out-of-order event only updates what it
should (an old event never overwrites ``status``). Events without ``order_id`` have no state.

Each run aggregates the new silver rows per order in Spark, reads the current rows of only the
touched orders (files pruned by ``order_id`` statistics), combines them, and upserts the result
with a delta-rs merge that carries the consumed silver version as its ``txn``.
"""

import time
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_assets.lib import delta_tables, faults, incremental, increments
from eos_assets.lib.contract import EVENT_TYPES
from eos_assets.lib.schema_time import UTC_MICROS
from eos_assets.lib.silver_events import EVENTS_SCHEMA, PARTITION_BY

UPSTREAM = "silver/events"
APP = increments.upstream_app(UPSTREAM)
KINDS = tuple(t.removeprefix("order_") for t in EVENT_TYPES)

BEFORE_MERGE = "order_state_before_merge"
AFTER_MERGE = "order_state_after_merge"
CRASH_POINTS = (BEFORE_MERGE, AFTER_MERGE)

ORDER_STATE_SCHEMA = pa.schema(
    [
        ("order_id", pa.string()),
        ("status", pa.string()),
        ("customer_id", pa.string()),
        ("currency", pa.string()),
        ("amount", pa.float64()),
        *[(f"{kind}_amount", pa.float64()) for kind in KINDS],
        ("event_count", pa.int64()),
        ("first_event_time", UTC_MICROS),
        ("last_event_time", UTC_MICROS),
        ("last_event_id", pa.string()),
        ("last_topic", pa.string()),
        ("last_partition", pa.int32()),
        ("last_offset", pa.int64()),
        ("silver_version", pa.int64()),
    ]
)
_LATEST = ("last_event_time", "last_topic", "last_partition", "last_offset")
_LATEST_VALUES = ("status", "customer_id", "currency", "amount", "last_event_id")


@dataclass
class OrderStateOutcome:
    """What one run did; ``version`` is None when nothing was committed."""

    version: int | None = None
    silver_versions: tuple[int, int] | None = None
    events: int = 0
    orders_touched: int = 0
    orders_inserted: int = 0
    orders_updated: int = 0
    files_rewritten: int = 0
    rows_copied: int = 0
    attempts: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def update_order_state(
    spark: SparkSession,
    events_uri: str,
    state_uri: str,
    storage_options: dict[str, str] | None = None,
) -> OrderStateOutcome:
    """Fold the silver events not yet consumed into the state of their orders.

    Raises:
        EosError: silver/events was rewritten or its log is gone, or commits kept conflicting.
    """
    delta_tables.ensure(
        state_uri,
        ORDER_STATE_SCHEMA,
        configuration=delta_tables.merged_table_config(),
        storage_options=storage_options,
    )
    table = incremental.Derived("silver/order_state", state_uri, events_uri, APP, storage_options)
    return incremental.run(table, OrderStateOutcome, lambda a, o: _step(spark, a, o))


def _step(spark: SparkSession, attempt: incremental.Attempt, outcome: OrderStateOutcome) -> None:
    outcome.silver_versions = attempt.versions
    events = increments.read_files(
        spark,
        attempt.increment.files,
        delta_tables.spark_schema(delta_tables.data_schema(EVENTS_SCHEMA, PARTITION_BY)),
        "silver_version",
    ).where(F.col("order_id").isNotNull())
    batch = order_states(events).cache()
    try:
        bounds = batch.agg(
            F.count(F.lit(1)).alias("n"),
            F.min("order_id").alias("low"),
            F.max("order_id").alias("high"),
            F.sum("event_count").alias("events"),
        ).first()
        rows = ORDER_STATE_SCHEMA.empty_table()
        if bounds is not None and bounds["n"]:
            outcome.orders_touched, outcome.events = int(bounds["n"]), int(bounds["events"])
            # Only files whose order_id range can hold a touched order are read.
            predicate = (
                f"order_id >= {_quote(bounds['low'])} AND order_id <= {_quote(bounds['high'])}"
            )
            files = delta_tables.data_files(attempt.target, predicate)
            current = delta_tables.read_spark(spark, [f.uri for f in files], ORDER_STATE_SCHEMA)
            rows = combine(current, batch).toArrow()
    finally:
        batch.unpersist()
    outcome.seconds["compute"] = time.monotonic() - attempt.started
    faults.crash_point(BEFORE_MERGE)
    began = time.monotonic()
    metrics = delta_tables.upsert(
        attempt.target,
        rows,
        keys=["order_id"],
        range_key="order_id",
        txns=attempt.txns,
        metadata=attempt.metadata("order_state"),
    )
    faults.crash_point(AFTER_MERGE)
    outcome.orders_inserted = int(metrics.get("num_target_rows_inserted", 0))
    outcome.orders_updated = int(metrics.get("num_target_rows_updated", 0))
    outcome.files_rewritten = int(metrics.get("num_target_files_removed", 0))
    outcome.rows_copied = int(metrics.get("num_target_rows_copied", 0))
    outcome.seconds["merge"] = time.monotonic() - began


def order_states(events: DataFrame) -> DataFrame:
    """The state of each order over ``events`` alone (``silver_version``: their latest)."""
    latest = F.struct(
        F.col("event_time").alias("last_event_time"),
        F.col("topic").alias("last_topic"),
        F.col("partition").alias("last_partition"),
        F.col("offset").alias("last_offset"),
        F.regexp_replace("event_type", "^order_", "").alias("status"),
        F.col("customer_id"),
        F.col("currency"),
        F.col("amount"),
        F.col("event_id").alias("last_event_id"),
    )
    sums = [
        F.sum(F.when(F.col("event_type") == f"order_{kind}", F.col("amount")).otherwise(0.0))
        .cast("double")
        .alias(f"{kind}_amount")
        for kind in KINDS
    ]
    grouped = events.groupBy("order_id").agg(
        F.max(latest).alias("latest"),
        *sums,
        F.count(F.lit(1)).alias("event_count"),
        F.min("event_time").alias("first_event_time"),
        F.max("silver_version").alias("silver_version"),
    )
    return grouped.select(
        "order_id", "latest.*", *[c for c in grouped.columns if c not in ("order_id", "latest")]
    )


def combine(current: DataFrame, batch: DataFrame) -> DataFrame:
    """The state of the batch's orders after adding ``batch`` to the ``current`` state."""
    c, b = current.alias("c"), batch.alias("b")
    joined = b.join(c, F.col("b.order_id") == F.col("c.order_id"), "left")

    def latest(side: str) -> Column:
        fields = [*_LATEST, *_LATEST_VALUES]
        return F.struct(*[F.col(f"{side}.{f}").alias(f) for f in fields])

    def summed(name: str) -> Column:
        return (F.col(f"b.{name}") + F.coalesce(F.col(f"c.{name}"), F.lit(0))).alias(name)

    # A missing current row has a null struct; greatest skips nulls.
    current_latest = F.when(F.col("c.order_id").isNotNull(), latest("c"))
    return joined.select(
        F.col("b.order_id").alias("order_id"),
        F.greatest(latest("b"), current_latest).alias("latest"),
        *[summed(f"{kind}_amount") for kind in KINDS],
        summed("event_count"),
        F.least("b.first_event_time", "c.first_event_time").alias("first_event_time"),
        F.col("b.silver_version").alias("silver_version"),
    ).select(
        "order_id",
        "latest.*",
        *[f"{k}_amount" for k in KINDS],
        "event_count",
        "first_event_time",
        "silver_version",
    )


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
