"""Stop the broker with SIGTERM in the middle of an ingest, start it again on the same data.

The ingest caught mid-run fails with one line and commits nothing; an ingest while the broker
is down fails at once, also with one line; after the restart the next ingest is exact.
"""

import base64
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit import broker
from eos_assets.lib import faults
from eos_assets.lib.errors import BrokerError
from eos_assets.lib.ingest.ingest import ingest_bronze
from eos_assets_tests.faults.harness import FAILED, Ledger, one_line, score
from eos_assets_tests.faults.oracle import bronze_keys, judge, manifest_keys, overlaps
from eos_assets_tests.support.paused_runs import release, start_paused


def test_broker_stopped_mid_run_then_restarted_loses_and_doubles_nothing(
    spark: SparkSession, produced: Callable, table: str, tmp_path: Path, ledger: Ledger
) -> None:
    data = tmp_path / "kafka"
    info = broker.start_broker(data)
    port = int(info.bootstrap.rsplit(":", 1)[1])
    try:
        topic = "orders-restart"
        broker.ensure_topic(info.bootstrap, topic, 2)
        manifest = produced(topic, count=600, seed=41, bootstrap=info.bootstrap)[1]
        first = ingest_bronze(
            spark, table, [topic], {"bootstrap.servers": info.bootstrap}, contract=ORDERS.contract
        )
        assert first.version == 1
        manifest += produced(topic, count=600, seed=42, bootstrap=info.bootstrap)[1]
        before = (DeltaTable(table).version(), bronze_keys(table))

        # Mid-run: the run has planned against the live broker, then the broker goes away.
        gate = tmp_path / "gate"
        gate.mkdir()
        run = start_paused(
            info.bootstrap, topic, table, faults.AFTER_PLAN, gate, 180, read_timeout=6
        )
        broker.stop_broker(info)
        run = release(gate, run)
        assert run.returncode == FAILED and run.outcome, run.tail()
        assert run.outcome["kind"] == "BrokerError", run.outcome
        assert one_line(run.outcome["error"]) and "check the broker" in run.outcome["error"]
        assert (DeltaTable(table).version(), bronze_keys(table)) == before, "nothing committed"

        # While down: fails at once with one line, the table untouched.
        began = time.monotonic()
        try:
            ingest_bronze(
                spark,
                table,
                [topic],
                {"bootstrap.servers": info.bootstrap},
                contract=ORDERS.contract,
            )
        except BrokerError as exc:
            down = str(exc)
        else:
            raise AssertionError("an ingest without a broker must fail")
        assert time.monotonic() - began < 5, "a refused connection must fail fast"
        assert one_line(down) and "EOS_KAFKA_BOOTSTRAP" in down, down
        assert (DeltaTable(table).version(), bronze_keys(table)) == before

        info = broker.start_broker(data, port=port)
        manifest += produced(topic, count=600, seed=43, bootstrap=info.bootstrap)[1]
        after = ingest_bronze(
            spark, table, [topic], {"bootstrap.servers": info.bootstrap}, contract=ORDERS.contract
        )
        assert after.version == 2
    finally:
        broker.stop_broker(info)
    verdict = score(ledger, "broker SIGTERM mid-run, then restart", table, manifest, "run failed")
    ledger.record("ingest while the broker is down", 1, verdict.lost, verdict.doubled)
    assert verdict.exact, f"after a broker restart: {verdict}"
    assert not overlaps(table), overlaps(table)


def test_broker_killed_right_after_commits_then_restarted_loses_and_doubles_nothing(
    spark: SparkSession, produced: Callable, table: str, tmp_path: Path, ledger: Ledger
) -> None:
    """SIGKILL, no controlled shutdown: the restart recovers the logs, the transaction state and
    the group offsets, and every record Kafka then exposes as committed is ingested once."""
    data = tmp_path / "kafka"
    info = broker.start_broker(data)
    port = int(info.bootstrap.rsplit(":", 1)[1])
    config = {"bootstrap.servers": info.bootstrap}
    try:
        topic = "orders-killed"
        broker.ensure_topic(info.bootstrap, topic, 2)
        manifest = produced(topic, count=600, seed=44, bootstrap=info.bootstrap)[1]
        assert ingest_bronze(spark, table, [topic], config, contract=ORDERS.contract).version == 1
        # Killed the moment the producer has its last commit acknowledged.
        manifest += produced(topic, count=600, seed=45, bootstrap=info.bootstrap)[1]
        broker.kill_broker(info)
        info = broker.start_broker(data, port=port)
        manifest += produced(topic, count=300, seed=46, bootstrap=info.bootstrap)[1]
        after = ingest_bronze(spark, table, [topic], config, contract=ORDERS.contract)
        assert after.version == 2 and after.records > 0
        # Once more right after the ingest's commit; the retry of it is a no-op.
        broker.kill_broker(info)
        info = broker.start_broker(data, port=port)
        assert (
            ingest_bronze(spark, table, [topic], config, contract=ORDERS.contract).version is None
        )
        exposed = _committed_in_kafka(info.bootstrap, topic)
    finally:
        broker.stop_broker(info)
    # Bronze holds exactly what Kafka exposes as committed, each record once.
    assert bronze_keys(table) == Counter(exposed)
    # A one-node broker SIGKILLed right after acknowledging a commit may, on restart, abort that
    # transaction instead (seen here in about one run in three, Kafka 4.4: read_committed then
    # skips its records for good). That is Kafka's durability, not the ingest's: such records
    # are judged as aborted, and the ledger says how many there were.
    committed, _ = manifest_keys(manifest)
    dropped = {k for k in committed if k not in exposed}
    as_kafka_decided = [
        {**line, "status": "aborted"} if _key(line) in dropped else line for line in manifest
    ]
    verdict = judge(table, as_kafka_decided)
    note = f"Kafka aborted {len(dropped)} acknowledged records on restart" if dropped else ""
    ledger.record(
        "broker SIGKILL after commits, then restart", 2, verdict.lost, verdict.doubled, note
    )
    assert verdict.exact, f"after a killed broker: {verdict}"
    assert not overlaps(table), overlaps(table)


def _key(line: dict) -> tuple:
    raw = line["value_b64"]
    value = None if raw is None else base64.b64decode(raw)
    return (line["topic"], line["partition"], line["offset"], value)


def _committed_in_kafka(bootstrap: str, topic: str) -> set[tuple]:
    """Every record a read_committed reader gets from ``topic``, as bronze's keys."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"audit-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    records: set[tuple] = set()
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = all(
                tp.offset >= ends[tp.partition]
                for tp in consumer.position([TopicPartition(topic, p) for p in partitions])
            )
            if done:
                break
            for m in consumer.consume(1000, timeout=1):
                if m.error() is None:
                    records.add((topic, m.partition(), m.offset(), m.value()))
    finally:
        consumer.close()
    return records
