"""The agg-out publisher on the session's 3-node cluster: the broker coordinating its
transactions dies while one is open, and each window revision still reaches the topic once."""

import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable

from eos_assets.defs.stream import ORDERS
from eos_assets.lib import faults
from eos_assets.lib.outbound import outbound_position, outbound_publish
from eos_assets_tests.faults.harness import Ledger, wait_for_files
from eos_assets_tests.outbound.conftest import GoldLakes, history, windows_uri
from eos_assets_tests.support.agg_out import published, score
from eos_assets_tests.support.cluster import Background, LiveCluster
from eos_assets_tests.support.committed import read_committed_records


def test_transaction_coordinator_killed_inside_a_publishing_transaction_costs_a_retry(
    gold_lakes: GoldLakes,
    kafka_cluster: LiveCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    outbound_ledger: Ledger,
) -> None:
    """Paused with its first transaction's records and position sent, the publisher loses the
    broker coordinating its transactional id; it commits through the next coordinator and
    publishes the rest, each revision once."""
    table = windows_uri(gold_lakes.final)
    topic = f"agg-out-failover-{uuid.uuid4().hex[:6]}"
    config = {"bootstrap.servers": kafka_cluster.bootstrap}
    monkeypatch.setenv(faults.PAUSE_ENV, outbound_publish.AFTER_SEND)
    monkeypatch.setenv(faults.PAUSE_DIR_ENV, str(tmp_path))
    run = Background(
        lambda: outbound_publish.publish_windows(ORDERS.windows, table, config, topic, 3, 25)
    )
    try:
        wait_for_files(tmp_path, f"{outbound_publish.AFTER_SEND}-*.ready", 1, 120)
        tid = outbound_publish.publisher_id(topic, table)
        kafka_cluster.kill(kafka_cluster.transaction_coordinator(tid))
        (tmp_path / faults.RELEASE).touch()
        run.join(240)
    finally:
        kafka_cluster.revive()
    outcome = run.result()
    want = history(table)
    records = published(lambda t: read_committed_records(config, t), topic)
    doubled, skipped, invented = score(records, want)
    outbound_ledger.record("agg-out: 3 nodes, txn coordinator SIGKILL", 1, skipped, doubled)
    assert (doubled, skipped, invented) == (0, 0, 0)
    assert outcome.records == len(want)
    log = outbound_position.read_log(config, outbound_position.position_topic(topic), True)
    position = outbound_position.scan(log, outbound_publish.publisher_id(topic, table))
    assert position.version == DeltaTable(table).version()
