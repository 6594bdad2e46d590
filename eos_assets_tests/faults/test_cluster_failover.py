"""A broker of three SIGKILLed while a bronze ingest runs costs a retry, never the run.

On the session's 3-node cluster (RF 3, min ISR 2, unclean election off) the leader of the
partitions being read dies during the plan, during the read in Spark tasks and during the
commit; each run succeeds, and bronze holds every committed record once (the oracle).
"""

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit import broker
from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets.lib import faults
from eos_assets.lib.ingest.ingest import ingest_bronze
from eos_assets_tests.faults.harness import Ledger, score, wait_for_files
from eos_assets_tests.faults.oracle import overlaps
from eos_assets_tests.support.cluster import Background, LiveCluster
from eos_assets_tests.support.committed import read_committed_records
from eos_assets_tests.support.paused_runs import release, start_paused

Producer = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def produce_to(kafka_cluster: LiveCluster, tmp_path: Path) -> Producer:
    """Factory: ``produce_to(topic, count, seed)`` runs the product producer on the cluster,
    aborted transactions and malformed records in the mix; returns its manifest lines."""
    runs = iter(range(1_000))

    def make(topic: str, count: int, seed: int, **options: Any) -> list[dict[str, Any]]:
        mix = {"abort_ratio": 0.2, "malformed_ratio": 0.05, "transaction_size": 200}
        opts = ProduceOptions(topic=topic, count=count, seed=seed, **{**mix, **options})
        path = tmp_path / f"{topic}-{next(runs)}.jsonl"
        produce(kafka_cluster.bootstrap, opts, path)
        return read_manifest(path)

    return make


def _topic(kafka_cluster: LiveCluster, partitions: int) -> str:
    name = f"orders-failover-{uuid.uuid4().hex[:8]}"
    broker.ensure_topic(kafka_cluster.bootstrap, name, partitions)
    return name


def test_product_topics_get_three_replicas(kafka_cluster: LiveCluster) -> None:
    topic = _topic(kafka_cluster, 3)
    assert all(len(r) == 3 for r in kafka_cluster.replicas(topic).values())
    assert all(len(r) == 3 for r in kafka_cluster.replicas("__transaction_state").values())
    assert all(len(r) == 3 for r in kafka_cluster.replicas("__consumer_offsets").values())


def test_leader_killed_during_plan_costs_a_retry(
    spark: SparkSession,
    kafka_cluster: LiveCluster,
    produce_to: Producer,
    table: str,
    ledger: Ledger,
) -> None:
    topic = _topic(kafka_cluster, 3)
    manifest = produce_to(topic, 900, seed=71)
    config = {"bootstrap.servers": kafka_cluster.bootstrap}
    # Killed just before the plan: the clients still see it as leader until the controller
    # fences it, so the plan's offset reads hit a dead broker first.
    kafka_cluster.kill(kafka_cluster.leader(topic, 0))
    try:
        outcome = ingest_bronze(spark, table, [topic], config, contract=ORDERS.contract)
        assert outcome.version == 1 and outcome.attempts == 1
        manifest += produce_to(topic, 300, seed=72)  # two of three nodes take writes
        assert ingest_bronze(spark, table, [topic], config, contract=ORDERS.contract).version == 2
    finally:
        kafka_cluster.revive()
    verdict = score(ledger, "3 nodes: partition leader SIGKILL during plan", table, manifest)
    assert verdict.exact, verdict
    assert not overlaps(table), overlaps(table)


def test_leader_killed_during_read_in_spark_tasks_costs_a_retry(
    kafka_cluster: LiveCluster,
    produce_to: Producer,
    table: str,
    tmp_path: Path,
    ledger: Ledger,
) -> None:
    # One partition, enough records that a Spark task reads them in several fetches: it pauses
    # halfway, its leader dies, and it goes on reading from the new leader.
    topic = _topic(kafka_cluster, 1)
    manifest = produce_to(topic, 12_000, seed=73, malformed_ratio=0.01, transaction_size=1000)
    gate = tmp_path / "gate"
    gate.mkdir()
    run = start_paused(kafka_cluster.bootstrap, topic, table, faults.MID_READ, gate, 240)
    try:
        kafka_cluster.kill(kafka_cluster.leader(topic, 0))
        run = release(gate, run)
    finally:
        kafka_cluster.revive()
    assert run.returncode == 0 and run.outcome and run.outcome["ok"], run.tail()
    verdict = score(ledger, "3 nodes: partition leader SIGKILL mid-read", table, manifest)
    assert verdict.exact, verdict


def test_group_coordinator_killed_during_commit_costs_a_retry(
    spark: SparkSession,
    kafka_cluster: LiveCluster,
    produce_to: Producer,
    table: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ledger: Ledger,
) -> None:
    """Paused before its Delta commit, the run loses the coordinator of the group it then
    commits its positions to; it commits, and the advisory commit reaches the new one."""
    topic = _topic(kafka_cluster, 1)
    manifest = produce_to(topic, 900, seed=74)
    monkeypatch.setenv(faults.PAUSE_ENV, faults.BEFORE_COMMIT)
    monkeypatch.setenv(faults.PAUSE_DIR_ENV, str(tmp_path))
    config = {"bootstrap.servers": kafka_cluster.bootstrap}
    run = Background(lambda: ingest_bronze(spark, table, [topic], config, contract=ORDERS.contract))
    try:
        wait_for_files(tmp_path, f"{faults.BEFORE_COMMIT}-*.ready", 1, 120)
        kafka_cluster.kill(kafka_cluster.coordinator("eos-assets"))
        (tmp_path / faults.RELEASE).touch()
        run.join(180)
    finally:
        kafka_cluster.revive()
    outcome = run.result()
    assert outcome.version == 1 and outcome.advisory_committed
    verdict = score(ledger, "3 nodes: group coordinator SIGKILL at commit", table, manifest)
    assert verdict.exact, verdict


def test_transaction_coordinator_killed_inside_produce_costs_a_retry(
    kafka_cluster: LiveCluster, tmp_path: Path, ledger: Ledger
) -> None:
    """``eos-assets produce`` (its function) loses the broker coordinating its transactions
    while one is open; it finishes, and Kafka exposes every record it reported committed.

    When the dead broker also led a partition with records in flight, the open transaction
    can only be aborted; it is sent again, and the ledger's note counts those."""
    topic = _topic(kafka_cluster, 2)
    options = ProduceOptions(
        topic=topic, count=3000, seed=75, rate=300, transaction_size=100, abort_ratio=0.2
    )
    coordinator = kafka_cluster.transaction_coordinator(options.identity())
    path = tmp_path / "manifest.jsonl"
    run = Background(lambda: produce(kafka_cluster.bootstrap, options, path))
    try:
        time.sleep(3)  # about 900 records in: a transaction is open nearly all the time
        kafka_cluster.kill(coordinator)
        run.join(240)
    finally:
        kafka_cluster.revive()
    summary = run.result()
    manifest = read_manifest(path)
    committed = {(m["partition"], m["offset"]) for m in manifest if m["status"] == "committed"}
    exposed = _committed_offsets(kafka_cluster.bootstrap, topic)
    lost, foreign = len(committed - exposed), len(exposed - committed)
    again = summary.transactions_sent_again
    note = f"{again} transaction(s) aborted and sent again" if again else ""
    ledger.record("3 nodes: txn coordinator SIGKILL inside produce", 1, lost, 0, note)
    assert len(manifest) == options.count and not lost and not foreign, (lost, foreign)


def _committed_offsets(bootstrap: str, topic: str) -> set[tuple[int, int]]:
    records = read_committed_records({"bootstrap.servers": bootstrap}, topic, timeout=60)
    return {(partition, offset) for partition, offset, _, _ in records}
