"""A stream declared to start later than earliest: what its first run passes over is recorded.

A topic holds records before the stream's first run. Declared ``latest``, the first run ingests
none of them, records the offsets it passed over (``eos.skipped``, reason "declared start") and
pins every partition's position, an idle one included; later records land exactly once; the
contiguity check and the Kafka audit pass and report the skipped offsets. Declared at a time,
only the records whose timestamps are at or after it land. The lag sensor measures a never-read
partition from its declared start and launches the run that pins it.
"""

import dataclasses
import uuid
from collections.abc import Callable

import dagster as dg
from confluent_kafka import KafkaError, Message, Producer
from dagster_pyspark import LazyPySparkResource
from deltalake import DeltaTable

from eos_assets.defs import bronze, sensors
from eos_assets.defs.stream import ORDERS, Stream
from eos_assets.lib.spark.spark_env import spark_config
from eos_assets.resources import build_resources
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets.settings import Settings
from eos_assets_tests.support import orders as checks
from eos_assets_tests.support.bronze_runs import evaluations, ingest_history, materialized, meta
from eos_assets_tests.support.lag_ticker import definitions, observed, skip_reason
from eos_assets_tests.support.records import batch, committed_truth, event, rows
from eos_assets_tests.support.txn_producer import send_transaction

NODE = "orders__bronze__raw_events"


def materialize(stream: Stream, bootstrap: str, topic: str, lake_root: str):
    """The stream's bronze asset with the contiguity check and the Kafka audit, in one run."""
    resources = {
        "kafka": KafkaResource(bootstrap_servers=bootstrap, topics=[topic]),
        "lake": LakeResource(root=lake_root),
        "pyspark": LazyPySparkResource(spark_config=spark_config("local[2]")),
    }
    result = dg.materialize(
        [bronze.raw_events_asset(stream), checks.offsets_contiguous, checks.matches_kafka_log],
        resources=resources,
    )
    assert result.success
    return result


def checks_pass(result: dg.ExecuteInProcessResult) -> tuple[dict, dict]:
    found = evaluations(result)
    contiguity, audit = found[checks.OFFSETS_CONTIGUOUS], found[checks.KAFKA_AUDIT]
    assert contiguity.passed, contiguity.description
    assert audit.passed, audit.description
    assert meta(contiguity)["holes"] == [] and meta(audit)["missing"] == 0
    return meta(contiguity), meta(audit)


def tick(stream: Stream, bootstrap: str, topic: str, lake_root: str) -> dg.SensorResult:
    """One tick of the stream's lag sensor, as the daemon evaluates it."""
    sensor = sensors.lag_sensor(stream)
    resources = {
        "kafka": KafkaResource(bootstrap_servers=bootstrap, topics=[topic]),
        "lake": LakeResource(root=lake_root),
        "pyspark": build_resources(Settings.from_env())["pyspark"],
    }
    context = dg.build_sensor_context(
        instance=dg.DagsterInstance.ephemeral(),
        sensor_name=sensor.name,
        resources=resources,
        repository_def=definitions().get_repository_def(),
    )
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def send_at(bootstrap: str, topic: str, stamps_ms: list[int], first: int) -> list[int]:
    """One committed transaction to partition 0, one record per timestamp; their offsets."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"test-{uuid.uuid4().hex}",
            "enable.idempotence": True,
        }
    )
    offsets: list[int] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        assert err is None, err
        offsets.append(msg.offset() or 0)

    producer.init_transactions(30)
    producer.begin_transaction()
    for i, stamp in enumerate(stamps_ms, start=first):
        value = event(i)
        producer.produce(topic, value, b"k", partition=0, timestamp=stamp, on_delivery=delivered)
    producer.flush(30)
    producer.commit_transaction(30)
    return sorted(offsets)


def test_latest_passes_over_the_old_records_records_them_and_pins_every_partition(
    kafka_bootstrap: str, make_topic: Callable[..., str], lake_root: str, table: str
) -> None:
    topic = make_topic(partitions=3)
    # Partitions 0 and 1 hold records before the first run; partition 2 is empty.
    old = send_transaction(kafka_bootstrap, topic, batch(20, 2))
    stream = dataclasses.replace(ORDERS, topics=(topic,), start="latest")

    # The sensor sees no lag (not the whole retained log) yet launches the run that pins.
    before = tick(stream, kafka_bootstrap, topic, lake_root)
    assert observed(before)["lag_total"] == 0
    assert len(before.run_requests or []) == 1
    assert "3 partition(s) never read" in observed(before)["decision"]

    first = materialize(stream, kafka_bootstrap, topic, lake_root)
    m = materialized(first)
    assert (m["records"], m["delta_version"], m["skipped_offsets"]) == (0, 1, 22)
    assert not DeltaTable(table).file_uris()
    skipped = [
        {**r, "reason": "declared start", "declared": "latest"}
        for r in (
            {"topic": topic, "partition": 0, "start": 0, "end": 11},  # 10 records, 1 marker
            {"topic": topic, "partition": 1, "start": 0, "end": 11},
        )
    ]
    (commit,) = ingest_history(table)
    assert commit["eos.skipped"] == skipped and commit["eos.ranges"] == []
    assert m["skipped_ranges"] == [
        {k: r[k] for k in ("topic", "partition", "start", "end")} for r in skipped
    ]
    dt = DeltaTable(table)
    assert [dt.transaction_version(f"eos:{topic}:{p}") for p in range(3)] == [11, 11, 0]
    contiguity, audit = checks_pass(first)
    assert contiguity["declared_skipped_offsets"] == audit["skipped_offsets"] == 22
    assert contiguity["declared_skips"][0] == (
        f"{topic}[0] offsets [0, 11) skipped by version 1 (declared start latest)"
    )
    assert audit["kafka_records"] == 0
    assert "22 offset(s) before the stream's declared start were skipped" in (
        evaluations(first)[checks.KAFKA_AUDIT].description or ""
    )
    # Pinned: the sensor sees nothing to do, where before it would have re-decided the start.
    assert skip_reason(tick(stream, kafka_bootstrap, topic, lake_root)).startswith("nothing to do")

    # Later records, the idle partition's included, land once; the old ones never.
    new = send_transaction(kafka_bootstrap, topic, batch(15, 3, first=20))
    later = materialize(stream, kafka_bootstrap, topic, lake_root)
    assert materialized(later)["records"] == 15
    got = rows(table)
    assert len(got) == len(set(got)) and set(got) == committed_truth([new])
    assert not set(got) & committed_truth([old])
    contiguity, audit = checks_pass(later)
    assert (contiguity["declared_skipped_offsets"], audit["skipped_offsets"]) == (22, 22)
    assert audit["kafka_records"] == 15
    assert ingest_history(table)[-1]["eos.skipped"] == []


def test_a_time_start_ingests_only_the_records_at_or_after_it(
    kafka_bootstrap: str, make_topic: Callable[..., str], lake_root: str, table: str
) -> None:
    topic = make_topic(partitions=1)
    at = 1_790_000_000_000  # 2026-09-21T14:13:20Z
    early = send_at(kafka_bootstrap, topic, [at - 60_000 + i for i in range(4)], first=0)
    late = send_at(kafka_bootstrap, topic, [at, at + 1, at + 60_000], first=4)
    stream = dataclasses.replace(ORDERS, topics=(topic,), start="2026-09-21T16:13:20+02:00")

    # The first offset stamped at or after the time is the early transaction's commit marker
    # (the broker stamps it when it commits, now): the start, a gap before the late records.
    start = early[-1] + 1
    assert late[0] == start + 1
    lag = observed(tick(stream, kafka_bootstrap, topic, lake_root))
    assert lag["lag_total"] == 5  # from the start: the marker, 3 records and their marker

    first = materialize(stream, kafka_bootstrap, topic, lake_root)
    assert materialized(first)["records"] == 3
    assert sorted(o for _, o, _ in rows(table)) == late
    (commit,) = ingest_history(table)
    skipped = {"topic": topic, "partition": 0, "start": 0, "end": start}
    assert commit["eos.skipped"] == [
        {**skipped, "reason": "declared start", "declared": stream.start}
    ]
    contiguity, audit = checks_pass(first)
    assert contiguity["declared_skipped_offsets"] == audit["skipped_offsets"] == start
    assert audit["kafka_records"] == 3
