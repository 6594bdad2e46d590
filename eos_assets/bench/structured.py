"""Spark Structured Streaming, the way from Kafka to Delta on Spark that users would pick
instead: Spark's Kafka source (``spark-sql-kafka-0-10``, from ``.jars/spark-kafka``), a Delta
sink written by delta-spark with a checkpoint, ``trigger(availableNow=True)``.

Two queries: an ingest (every committed record, raw value kept and JSON parsed, as bronze) and
silver + windows (dedup by ``event_id`` under a watermark, then 5-minute windows with a
10-minute grace, appended when final). The windows query also runs on a live stream
(``start_windows_live``), for its event -> table latency.
"""

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.query import StreamingQuery

from eos_assets.bench.compare import WindowKey
from eos_assets.bench.report import Throughput
from eos_assets.devkit.events import EVENT_TYPES
from eos_assets.lib.spark import jars

# The contract's fields, parsed by Spark's JSON reader (a field of the wrong kind is null).
PAYLOAD = T.StructType(
    [
        T.StructField("event_id", T.StringType()),
        T.StructField("event_type", T.StringType()),
        T.StructField("order_id", T.StringType()),
        T.StructField("customer_id", T.StringType()),
        T.StructField("amount", T.DoubleType()),
        T.StructField("currency", T.StringType()),
        T.StructField("event_time", T.TimestampType()),
        T.StructField("schema_version", T.IntegerType()),
    ]
)
# Records per micro-batch of the windows query: a backlog read as a stream of batches, so the
# watermark moves as it would on a live stream (one batch of everything would drop nothing).
WINDOW_BATCH = 100_000
GRACE = "10 minutes"


def kafka_jars() -> list[str]:
    """The jars of Spark's Kafka source, for ``spark.jars`` (installed by ``make install``).

    Raises:
        ConfigError: the jars were never installed (one line with the fix).
    """
    return [str(p) for p in jars.jar_files("spark-kafka")]


@dataclass(frozen=True)
class StreamRun(Throughput):
    """One ``availableNow`` query: Kafka records read, wall seconds (query start to stop),
    batches."""

    records: int
    seconds: float
    batches: int


def _source(
    spark: SparkSession, client: Mapping[str, str], topic: str, per_batch: int | None = None
) -> DataFrame:
    reader = (
        spark.readStream.format("kafka")
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
    )
    for key, value in client.items():  # bootstrap.servers and any EOS_KAFKA_* property
        reader = reader.option(f"kafka.{key}", value)
    if per_batch is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(per_batch))
    raw = reader.load()
    parsed = F.from_json(F.col("value").cast("string"), PAYLOAD)
    return raw.select(
        "topic", "partition", "offset", F.col("timestamp").alias("kafka_timestamp"),
        "key", "value", parsed.alias("p"),
    ).select("*", "p.*").drop("p")  # fmt: skip


def _run(frame: DataFrame, table: Path, mode: str = "append") -> StreamRun:
    began = time.monotonic()
    query = (
        frame.writeStream.format("delta")
        .outputMode(mode)
        .option("checkpointLocation", str(table.with_name(table.name + "-checkpoint")))
        .trigger(availableNow=True)
        .start(str(table))
    )
    query.awaitTermination()
    seconds = time.monotonic() - began
    progress = query.recentProgress
    records = sum(int(p["numInputRows"]) for p in progress)
    return StreamRun(records, seconds, len(progress))


def ingest(spark: SparkSession, client: Mapping[str, str], topic: str, table: Path) -> StreamRun:
    """Every committed record of ``topic`` into a fresh Delta table: raw key and value, Kafka
    coordinates, and the contract's fields parsed from the JSON value."""
    return _run(_source(spark, client, topic), table)


def _valid() -> Column:
    """The contract's validity rules as far as Spark's JSON reader sees them."""
    return (
        (F.length("event_id") > 0)
        & F.col("event_type").isin(*EVENT_TYPES)
        & F.col("event_time").isNotNull()
        & F.col("amount").isNotNull()
    )


def _windows_frame(
    spark: SparkSession, client: Mapping[str, str], topic: str, per_batch: int | None
) -> DataFrame:
    events = _source(spark, client, topic, per_batch).where(_valid())
    deduped = events.withWatermark("event_time", GRACE).dropDuplicatesWithinWatermark(["event_id"])
    counts = deduped.groupBy(
        F.window("event_time", "5 minutes").alias("window"),
        "event_type",
        F.coalesce("currency", F.lit("")).alias("currency"),
    ).agg(F.count("*").alias("event_count"), F.sum("amount").alias("amount_sum"))
    return counts.select(
        F.col("window.start").alias("window_start"), "event_type", "currency",
        "event_count", "amount_sum",
    )  # fmt: skip


def windows(spark: SparkSession, client: Mapping[str, str], topic: str, table: Path) -> StreamRun:
    """Kafka to final 5-minute windows per event type and currency, end to end.

    Valid events, deduplicated by ``event_id`` within the watermark (event time minus the
    grace), counted in tumbling windows appended once the watermark passes their end: events
    later than the watermark are dropped, and windows still open at the end are not written.
    """
    return _run(_windows_frame(spark, client, topic, WINDOW_BATCH), table)


def start_windows_live(
    spark: SparkSession, client: Mapping[str, str], topic: str, table: Path
) -> StreamingQuery:
    """The windows query on a live stream: a micro-batch as soon as the last one ends
    (``processingTime`` 0, Spark's default trigger), no cap on records per batch."""
    return (
        _windows_frame(spark, client, topic, None)
        .writeStream.format("delta")
        .outputMode("append")
        .option("checkpointLocation", str(table.with_name(table.name + "-checkpoint")))
        .trigger(processingTime="0 seconds")
        .start(str(table))
    )


def consumed(query: StreamingQuery) -> int:
    """Kafka offsets the query's last finished batch reached, summed over partitions (0 before
    its first batch)."""
    progress = query.lastProgress
    if not progress or not progress.get("sources"):
        return 0
    end = progress["sources"][0].get("endOffset")
    offsets = json.loads(end) if isinstance(end, str) else end or {}
    return sum(int(o) for parts in offsets.values() for o in parts.values())


def window_counts(spark: SparkSession, table: Path) -> dict[WindowKey, int]:
    """Event count per window of the windows query's table."""
    rows = (
        spark.read.format("delta")
        .load(str(table))
        .select(F.unix_micros("window_start").alias("us"), "event_type", "currency", "event_count")
        .collect()
    )
    return {(r["us"], r["event_type"], r["currency"]): r["event_count"] for r in rows}
