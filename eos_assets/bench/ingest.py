"""Ingest speed: a plain consume loop (the ceiling), the exactly-once ingest, and an
at-least-once variant of it that exists only here, to price the exactly-once protocol.

All three read the same records of the same partitions with the same parallelism (the Spark
session's task slots) and the same consumer settings (``read_committed``).
"""

import functools
import multiprocessing
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition
from deltalake.transaction import AddAction, RemoveAction
from pyspark.sql import SparkSession

from eos_assets.bench.report import Throughput
from eos_assets.defs.stream import ORDERS
from eos_assets.lib.contract.schema import bronze_schema
from eos_assets.lib.delta import delta_io
from eos_assets.lib.ingest.ingest import IngestOptions, ingest_bronze
from eos_assets.lib.ingest.ranges import OffsetRange, plan_ranges, split_for_slots, start_offsets
from eos_assets.lib.ingest.reader import CONSUME_WAIT_S, read_range_to_file, reader_config
from eos_assets.lib.kafka import kafka_tools
from eos_assets.lib.kafka.kafka_offsets import partition_bounds


@dataclass(frozen=True)
class Pass(Throughput):
    """One read of the whole topic: records and seconds."""

    kind: str
    records: int
    seconds: float


def topic_ranges(client: Mapping[str, str], topic: str, slots: int) -> list[OffsetRange]:
    """Every committed offset of ``topic``, in the pieces the ingest would give its tasks."""
    plans = start_offsets({}, partition_bounds(client, [topic]))
    return split_for_slots(plan_ranges(plans), slots, IngestOptions().min_split)


def ceiling(client: Mapping[str, str], topic: str, slots: int) -> Pass:
    """A plain ``read_committed`` consume loop in ``slots`` processes, doing nothing else.

    The processes are started and connected before the clock starts, as Spark's Python
    workers are; each takes the next range when it finishes one, as task slots do.
    """
    ranges = topic_ranges(client, topic, slots)
    config = reader_config(client)
    with multiprocessing.get_context("spawn").Pool(slots) as pool:
        pool.map(_warm, [dict(config)] * slots, chunksize=1)
        began = time.monotonic()
        counts = pool.map(functools.partial(_consume, config=dict(config)), ranges, chunksize=1)
        seconds = time.monotonic() - began
    return Pass("ceiling", sum(counts), seconds)


def kafka_perf(client: Mapping[str, str], topic: str, records: int) -> Pass:
    """Kafka's own ``kafka-consumer-perf-test`` reading ``records`` committed records of
    ``topic`` from the start, with ``read_committed``, in a consumer group of its own.

    Its rate is over the fetch time only (``fetch.nMsg.sec``): the group join before the first
    record is left out, as the ceiling's process start is.
    """
    settings = {k: v for k, v in client.items() if k != "bootstrap.servers"}
    settings |= {"isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as props:
        props.write("".join(f"{k}={v}\n" for k, v in settings.items()))
    try:
        out = kafka_tools.run_tool(
            kafka_tools.CONSUMER_PERF,
            [
                "--bootstrap-server", client["bootstrap.servers"], "--topic", topic,
                "--num-records", str(records), "--command-config", props.name,
                "--group", f"bench-perf-{uuid.uuid4().hex[:8]}", "--timeout", "30000",
            ],
        )  # fmt: skip
    finally:
        Path(props.name).unlink(missing_ok=True)
    lines = [line for line in out.splitlines() if line.count(",") >= 9]
    header, row = (
        [c.strip() for c in lines[0].split(",")],
        [c.strip() for c in lines[-1].split(",")],
    )
    stats = dict(zip(header, row, strict=False))
    consumed = int(float(stats["data.consumed.in.nMsg"]))
    seconds = float(stats["fetch.time.ms"]) / 1000
    return Pass("kafka-consumer-perf-test", consumed, seconds)


def _warm(config: dict[str, str]) -> None:
    Consumer(config).close()


def _consume(r: OffsetRange, config: dict[str, str]) -> int:
    """Count the committed records of ``[r.start, r.end)``; done as ``reader.fetch_range`` is."""
    consumer = Consumer(config)
    count = 0
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
        done = r.start >= r.end
        while not done:
            for msg in consumer.consume(10_000, CONSUME_WAIT_S):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(err.str())
                    done = done or (msg.offset() or 0) >= r.end
                    continue
                offset = msg.offset() or 0
                if offset >= r.end:
                    done = True
                    break
                count += 1
                done = done or offset >= r.end - 1
            if not done:
                done = consumer.position([TopicPartition(r.topic, r.partition)])[0].offset >= r.end
    finally:
        consumer.close()
    return count


def exactly_once(spark: SparkSession, client: Mapping[str, str], topic: str, table: Path) -> Pass:
    """The product's ingest (``lib.ingest.ingest_bronze``, what the bronze asset runs)."""
    began = time.monotonic()
    outcome = ingest_bronze(
        spark, str(table), [topic], client, IngestOptions(), contract=ORDERS.contract
    )
    return Pass("eos", outcome.records, time.monotonic() - began)


def at_least_once(spark: SparkSession, client: Mapping[str, str], topic: str, table: Path) -> Pass:
    """The same read and the same files, committed without the exactly-once parts.

    No positions are read from the table (it plans from the low watermark), no ``txn``
    actions or range metadata are committed, no replay check, no advisory commit: what an
    at-least-once ingest would do. Kept in the bench only, to measure what those parts cost.
    """
    began = time.monotonic()
    uri = str(table)
    ranges = topic_ranges(client, topic, spark.sparkContext.defaultParallelism)
    schema = bronze_schema(ORDERS.contract)
    dt = delta_io.ensure_table(uri, schema)
    task = functools.partial(
        read_range_to_file,
        contract=ORDERS.contract,
        config=reader_config(client),
        table_uri=uri,
        timeout_s=300.0,
    )
    files = spark.sparkContext.parallelize(ranges, len(ranges)).map(task).collect()
    actions: list[AddAction | RemoveAction] = [
        delta_io.add_action(f.path, f.size, f.stats) for f in files
    ]
    dt.create_write_transaction(actions, mode="append", schema=schema)
    return Pass("alo", sum(f.records for f in files), time.monotonic() - began)


def alternate(
    spark: SparkSession, client: Mapping[str, str], topic: str, work: Path, repeats: int
) -> list[Pass]:
    """Exactly-once and at-least-once passes in ABBA order, each into a fresh table."""
    order: Sequence[str] = []
    for i in range(repeats):
        order = [*order, *(("eos", "alo") if i % 2 == 0 else ("alo", "eos"))]
    passes = []
    for i, kind in enumerate(order):
        table = work / f"{kind}-{i}"
        run = exactly_once if kind == "eos" else at_least_once
        passes.append(run(spark, client, topic, table))
    return passes
