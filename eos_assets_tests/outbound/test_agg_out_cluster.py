"""The agg-out publisher on the session's 3-node cluster: the broker coordinating its
transactions dies while one is open, and each window revision still reaches the topic once; on
the secured listener it runs with README's ACLs, names a missing one, and its password never
reaches Dagster's records."""

import uuid
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from eos_assets.defs.outbound import agg_out_assets
from eos_assets.defs.stream import ORDERS
from eos_assets.lib import faults
from eos_assets.lib.errors import BrokerError
from eos_assets.lib.outbound import outbound_position, outbound_publish
from eos_assets.resources import build_resources
from eos_assets.settings import Settings
from eos_assets_tests.faults.harness import Ledger, one_line, wait_for_files
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


def _grant_agg_out(
    kafka_cluster: LiveCluster, user: str, topic: str, table: str, without: str = ""
) -> None:
    """README's ACLs of the publisher of ``table`` into ``topic``, all but ``without``."""
    tid = outbound_publish.publisher_id(topic, table)
    position = ("READ", "DESCRIBE", "CREATE", *(() if without == "position" else ("WRITE",)))
    for kind, name, *operations in (
        ("TOPIC", topic, "DESCRIBE", "CREATE", *(() if without == "write" else ("WRITE",))),
        ("TOPIC", outbound_position.position_topic(topic), *position),
        *(() if without == "txn" else [("TRANSACTIONAL_ID", tid, "WRITE", "DESCRIBE")]),
    ):
        kafka_cluster.grant(user, kind, name, *operations)


def test_agg_out_runs_with_the_readme_acls_and_its_password_stays_out_of_dagster(
    gold_lakes: GoldLakes,
    kafka_cluster: LiveCluster,
    monkeypatch: pytest.MonkeyPatch,
    outbound_ledger: Ledger,
) -> None:
    """The asset and its check, run by Dagster over SASL_SSL as the product runs them (settings
    from ``EOS_KAFKA_*``): each revision once; the password in no event, run config or job
    snapshot (what the UI shows) of the instance."""
    table = windows_uri(gold_lakes.final)
    topic = f"agg-out-secured-{uuid.uuid4().hex[:6]}"
    _grant_agg_out(kafka_cluster, "eos-agg-out", topic, table)
    client = kafka_cluster.client("eos-agg-out")
    for key, value in client.items():
        name = "BOOTSTRAP" if key == "bootstrap.servers" else key.upper().replace(".", "_")
        monkeypatch.setenv(f"EOS_KAFKA_{name}", value)
    monkeypatch.setenv("EOS_AGG_OUT_TOPIC", topic)
    monkeypatch.setenv("EOS_LAKE_ROOT", str(gold_lakes.final))
    product = build_resources(Settings.from_env())
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        list(agg_out_assets(ORDERS)),
        resources={"kafka": product["kafka"], "lake": product["lake"]},
        instance=instance,
    )
    assert result.success
    (check,) = result.get_asset_check_evaluations()
    assert check.passed, check.description
    admin = {"bootstrap.servers": kafka_cluster.bootstrap}
    records = published(lambda t: read_committed_records(admin, t), topic)
    want = history(table)
    doubled, skipped, invented = score(records, want)
    outbound_ledger.record("agg-out: SASL_SSL with README's ACLs", 1, skipped, doubled)
    assert (doubled, skipped, invented) == (0, 0, 0) and len(records) == len(want)
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and run.job_snapshot_id is not None
    snapshot = dg.serialize_value(instance.get_job_snapshot(run.job_snapshot_id))
    assert "EOS_KAFKA_SASL_PASSWORD" in snapshot  # the resource's config, as the UI shows it
    shown = [dg.serialize_value(e) for e in instance.all_logs(result.run_id)]
    shown += [dg.serialize_value(run), snapshot]
    assert not [text for text in shown if client["sasl.password"] in text]


@pytest.mark.parametrize(
    ("missing", "named"),
    [
        ("txn", "WRITE and DESCRIBE on transactional id eos-out."),
        ("write", "WRITE and DESCRIBE on topic {topic} ("),
        ("position", "WRITE and DESCRIBE on topic {topic}.position ("),
    ],
    ids=["transactional-id", "topic-write", "position-write"],
)
def test_a_missing_agg_out_acl_is_named_and_nothing_is_committed(
    missing: str, named: str, gold_lakes: GoldLakes, kafka_cluster: LiveCluster
) -> None:
    table = windows_uri(gold_lakes.final)
    topic = f"agg-out-no-{missing}-{uuid.uuid4().hex[:6]}"
    user = f"eos-agg-out-no-{missing}"
    _grant_agg_out(kafka_cluster, user, topic, table, without=missing)
    config = kafka_cluster.client(user)
    with pytest.raises(BrokerError) as failed:
        outbound_publish.publish_windows(ORDERS.windows, table, config, topic, 3, 10_000)
    message = str(failed.value)
    assert one_line(message) and config["sasl.password"] not in message, message
    assert f"User:{user} {named.format(topic=topic)}" in message, message
    admin = {"bootstrap.servers": kafka_cluster.bootstrap}
    assert read_committed_records(admin, topic) == []
    log = outbound_position.read_log(admin, outbound_position.position_topic(topic), True)
    assert log == []
