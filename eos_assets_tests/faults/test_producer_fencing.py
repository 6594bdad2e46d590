"""Producer side: a producer dies or hangs mid-transaction; its successor, started with the
same ``transactional.id``, fences it and aborts what it left open; bronze never shows it.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from pyspark.sql import SparkSession

from eos_assets.devkit.producer import read_manifest
from eos_assets.lib.kafka.lag import measure_lag
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.faults.oracle import bronze_keys, overlaps
from eos_assets_tests.support.committed import open_records
from eos_assets_tests.support.fault_bench import Bench
from eos_assets_tests.support.lag_ticker import Ticker, observed, skip_reason

EOS_ASSETS = str(Path(sys.executable).parent / "eos-assets")


def everything_in_the_log(bootstrap: str, topic: str, partitions: int) -> set[tuple[int, int]]:
    """(partition, offset) of every data record, aborted ones included (read_uncommitted)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"audit-{uuid.uuid4().hex}",
            "isolation.level": "read_uncommitted",
            "enable.partition.eof": True,
        }
    )
    seen: set[tuple[int, int]] = set()
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        pending, deadline = set(range(partitions)), time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                elif err is None:
                    seen.add((msg.partition() or 0, msg.offset() or 0))
        assert not pending, f"partitions {pending} not read to the end"
    finally:
        consumer.close()
    return seen


def kill_mid_transaction(
    bootstrap: str, topic: str, tid: str, manifest: Path, env_dir: Path, *extra: str
) -> None:
    """Run ``eos-assets produce`` and SIGKILL it early inside a transaction: 3 done, 4th open."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOS_")}
    env.update(EOS_KAFKA_BOOTSTRAP=bootstrap, EOS_STATE_DIR=str(env_dir / "state"))
    cmd = [EOS_ASSETS, "produce", "--topic", topic, "--count", "100000", "--rate", "400"]
    cmd += ["--transaction-size", "400", "--transactional-id", tid, "--seed", "51"]
    cmd += ["--manifest", str(manifest), *extra]
    zombie = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Never near its commit: the open transaction holds 20-200 records.
        deadline = time.monotonic() + 60
        while not (
            manifest.exists()
            and len(manifest.read_text().splitlines()) >= 1200
            and 20 <= open_records(bootstrap, topic) < 200
        ):
            assert zombie.poll() is None, zombie.communicate()
            assert time.monotonic() < deadline, "the producer never got going"
            time.sleep(0.02)
        zombie.send_signal(signal.SIGKILL)
    finally:
        zombie.kill()
        zombie.communicate()


def unknown_and_landed(
    bench: Bench, topic: str, manifest: list[dict[str, Any]]
) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """(partition, offset) of the records in the log that ``manifest`` does not name (a dead
    producer's), and of every record in bronze."""
    known = {(line["partition"], line["offset"]) for line in manifest}
    unknown = everything_in_the_log(bench.bootstrap, topic, 2) - known
    return unknown, {(p, o) for _, p, o, _ in bronze_keys(bench.table)}


def test_killed_producer_is_fenced_by_its_restart_and_its_open_records_never_land(
    spark: SparkSession, bench: Bench, tmp_path: Path
) -> None:
    kafka_bootstrap, table = bench.bootstrap, bench.table
    topic = bench.topic(partitions=2)
    tid = f"fencing-{uuid.uuid4().hex[:8]}"
    first = tmp_path / "first.jsonl"
    kill_mid_transaction(kafka_bootstrap, topic, tid, first, tmp_path)
    stuck = open_records(kafka_bootstrap, topic)
    assert stuck > 0, "the killed producer must have left a transaction open"
    time.sleep(0.5)
    # Its timeout is a minute (the default): only the restart below can end it sooner.
    assert open_records(kafka_bootstrap, topic) == stuck, "the transaction is still open"

    manifest = read_manifest(first)
    held_back = bench.ingest(spark, topic)
    assert held_back.records == len(manifest), "readers stop at the open transaction"

    # The successor: same transactional.id; its init_transactions fences and aborts.
    manifest += bench.produce(
        topic, count=800, seed=52, transactional_id=tid, abort_ratio=0.0, transaction_size=200
    )[1]
    assert open_records(kafka_bootstrap, topic) == 0, "the zombie's transaction is aborted"
    bench.ingest(spark, topic)

    zombie_records, landed = unknown_and_landed(bench, topic, manifest)
    verdict = bench.score(
        "producer SIGKILL mid-transaction, restart same id",
        manifest,
        f"{len(zombie_records)} open records fenced, 0 in bronze",
    )
    assert len(zombie_records) >= stuck, "the open transaction's records are in the log"
    assert not zombie_records & landed, "a fenced transaction's record reached bronze"
    assert verdict.exact, f"after the producer's restart: {verdict}"
    assert not overlaps(table), overlaps(table)


def test_a_live_zombie_cannot_commit_after_it_is_fenced(spark: SparkSession, bench: Bench) -> None:
    topic = bench.topic(partitions=2)
    tid = f"zombie-{uuid.uuid4().hex[:8]}"
    zombie = Producer(
        {"bootstrap.servers": bench.bootstrap, "transactional.id": tid, "enable.idempotence": True}
    )
    sent: list[tuple[int, int]] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        assert err is None, err
        sent.append((msg.partition() or 0, msg.offset() or 0))

    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(40):
        zombie.produce(topic, value=b'{"zombie": %d}' % i, key=b"z", on_delivery=delivered)
    assert zombie.flush(30) == 0 and len(sent) == 40

    manifest = bench.produce(topic, count=500, seed=61, transactional_id=tid, abort_ratio=0.0)[1]
    with pytest.raises(KafkaException) as refused:
        zombie.commit_transaction(30)
    error = refused.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)

    bench.ingest(spark, topic)
    landed = {(p, o) for _, p, o, _ in bronze_keys(bench.table)}
    verdict = bench.score("live zombie producer fenced", manifest, "its commit refused")
    assert not set(sent) & landed, "the zombie's records reached bronze"
    assert verdict.exact, f"after fencing a live zombie: {verdict}"


def test_killed_producer_is_aborted_by_its_transaction_timeout(
    spark: SparkSession, bench: Bench, tmp_path: Path
) -> None:
    """Nobody restarts it: the broker aborts its transaction after ``transaction.timeout.ms``.

    Until then every committed record behind the open one is held back from read_committed
    readers (lag shows the stall and why); then the last stable offset moves on and the
    ingest takes every committed record, and none of the dead producer's open ones.
    """
    kafka_bootstrap, table = bench.bootstrap, bench.table
    topic = bench.topic(partitions=2)
    first = tmp_path / "first.jsonl"
    timeout_ms = 20_000
    kill_mid_transaction(
        kafka_bootstrap, topic, f"timeout-{uuid.uuid4().hex[:8]}", first, tmp_path,
        "--transaction-timeout-ms", str(timeout_ms),
    )  # fmt: skip
    killed_at = time.monotonic()
    manifest = read_manifest(first)
    config = {"bootstrap.servers": kafka_bootstrap}
    stalled = [lg for lg in measure_lag(config, [topic], table, with_age=False) if lg.held_back]
    early = bench.ingest(spark, topic)
    lake = LakeResource(root=str(Path(table).parents[1]))
    tick = Ticker(KafkaResource(bootstrap_servers=kafka_bootstrap, topics=[topic]), lake).tick()
    in_time = time.monotonic() - killed_at < timeout_ms / 1000
    if in_time:  # the broker has not aborted it yet
        assert stalled, "an open transaction holds the last stable offset back"
        assert all("open transaction" in lg.stall_reason() for lg in stalled), stalled
        # The sensor has nothing to launch (bronze is at the last stable offset) and says why.
        assert "an open transaction holds" in skip_reason(tick), skip_reason(tick)
        assert observed(tick)["held_back_total"] > 0
    # Another producer commits after the open transaction: held back behind it for now.
    manifest += bench.produce(topic, count=200, seed=71, abort_ratio=0.0, transaction_size=100)[1]

    deadline = time.monotonic() + 60
    while open_records(kafka_bootstrap, topic):
        assert time.monotonic() < deadline, "the broker never aborted the dead transaction"
        time.sleep(0.2)
    assert not [lg for lg in measure_lag(config, [topic], table, with_age=False) if lg.held_back]
    bench.ingest(spark, topic)

    zombie_records, landed = unknown_and_landed(bench, topic, manifest)
    verdict = bench.score(
        "producer SIGKILL mid-transaction, no restart",
        manifest,
        f"aborted by its timeout; {early.records} ingested during the stall"
        + ("; the sensor named it" if in_time else "; stall not checked (slow machine)"),
    )
    assert zombie_records, "the open transaction's records are in the log"
    assert not zombie_records & landed, "an aborted transaction's record reached bronze"
    assert verdict.exact, f"after the transaction timeout: {verdict}"
    assert not overlaps(table), overlaps(table)
