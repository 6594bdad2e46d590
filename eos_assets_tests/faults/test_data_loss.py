"""Kafka deletes records before the ingest read them (retention; here ``delete_records``).

The ingest never skips them silently: by default the run stops with one line naming the lost
offsets and commits nothing; a run told to accept the loss records it (``eos.lost``), moves the
position past it and ingests every record after the cut exactly once; the contiguity check and
the audit name the acknowledged loss; a record deleted between plan and read fails the run.
"""

from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.lib import faults
from eos_assets.lib.errors import DataLossError
from eos_assets.lib.ingest.ranges import OffsetRange
from eos_assets.lib.ingest.reader import fetch_range, reader_config
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.faults.harness import FAILED, one_line
from eos_assets_tests.faults.oracle import bronze_keys
from eos_assets_tests.support import orders as checks
from eos_assets_tests.support.bronze_runs import (
    bronze_resources,
    evaluations,
    ingest_history,
    materialized,
    meta,
)
from eos_assets_tests.support.fault_bench import Bench
from eos_assets_tests.support.lag_ticker import Ticker, skip_reason
from eos_assets_tests.support.orders import raw_events
from eos_assets_tests.support.paused_runs import release
from eos_assets_tests.support.records import batch, committed_truth, rows
from eos_assets_tests.support.txn_producer import Sent, send_transaction

ACCEPT = {"ops": {"orders__bronze__raw_events": {"config": {"accept_data_loss": True}}}}


def delete_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """Delete the log of one partition below ``offset``, as retention would."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.delete_records([TopicPartition(topic, partition, offset)]).values()
    assert future.result(30).low_watermark == offset


def offsets_of(sent: Sent, partition: int) -> list[int]:
    return sorted(o for p, o, _, _ in sent.records if p == partition)


def kept(sent: list[Sent], lost: OffsetRange) -> set[tuple[int, int, bytes | None]]:
    """What was committed, less the records of the ``lost`` offsets."""
    return {
        (p, o, v)
        for p, o, v in committed_truth(sent)
        if p != lost.partition or not lost.start <= o < lost.end
    }


def materialize(
    bootstrap: str, topic: str, lake_root: str, run_config: dict | None = None
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [raw_events, checks.offsets_contiguous, checks.matches_kafka_log],
        resources=bronze_resources(bootstrap, [topic], lake_root),
        run_config=run_config or {},
        raise_on_error=False,
    )


def failure(result: dg.ExecuteInProcessResult) -> str:
    (event,) = [e for e in result.all_node_events if e.is_step_failure]
    data = event.step_failure_data
    assert data.user_failure_data is not None, data.error
    return data.user_failure_data.description or ""


def test_loss_stops_the_run_until_accepted_then_every_later_record_lands_once(
    spark: SparkSession, bench: Bench, lake_root: str
) -> None:
    kafka_bootstrap, table = bench.bootstrap, bench.table
    topic = bench.topic(partitions=2)
    sent = [send_transaction(kafka_bootstrap, topic, batch(20, 2))]
    assert bench.ingest(spark, topic).version
    dt = DeltaTable(table)
    position = dt.transaction_version(f"eos:{topic}:0")
    assert position is not None
    sent.append(send_transaction(kafka_bootstrap, topic, batch(40, 2, first=20)))
    pending = offsets_of(sent[-1], 0)
    assert pending[0] == position
    cut = pending[len(pending) // 2]  # the middle of a batch produced but not ingested
    delete_before(kafka_bootstrap, topic, 0, cut)
    before = (dt.version(), bronze_keys(table))

    # Default: one line naming the lost offsets and the way out; nothing committed anywhere.
    stopped = materialize(kafka_bootstrap, topic, lake_root)
    assert not stopped.success
    line = failure(stopped)
    assert one_line(line), line
    assert f"{topic}[0] offsets [{position}, {cut})" in line, line
    assert (
        "materialize orders/bronze/raw_events once with run config accept_data_loss: true" in line
    )
    assert "nothing was committed" in line, line
    assert (DeltaTable(table).version(), bronze_keys(table)) == before
    with pytest.raises(DataLossError, match=rf"\[{position}, {cut}\)"):
        bench.ingest(spark, topic)
    # The lag sensor launches no run that would stop at the loss; it says why and what to do.
    lake = LakeResource(root=lake_root)
    tick = Ticker(KafkaResource(bootstrap_servers=kafka_bootstrap, topics=[topic]), lake).tick()
    assert f"Kafka deleted {topic}[0] offsets [{position}, {cut})" in skip_reason(tick)
    assert "materialize orders/bronze/raw_events once with" in skip_reason(tick)
    # The audit sees the loss nobody accepted yet, and fails on it.
    audit = checks.matches_kafka_log(
        lake=LakeResource(root=lake_root),
        kafka=KafkaResource(bootstrap_servers=kafka_bootstrap, topics=[topic]),
    )
    assert isinstance(audit, dg.AssetCheckResult)
    assert not audit.passed and audit.severity == dg.AssetCheckSeverity.ERROR
    assert f"{cut - position} offset(s) deleted by Kafka before they were ingested, not " in (
        audit.description or ""
    )

    # Accepted: the loss is recorded, every record after the cut lands once.
    accepted = materialize(kafka_bootstrap, topic, lake_root, ACCEPT)
    assert accepted.success
    m = materialized(accepted)
    lost = {"topic": topic, "partition": 0, "start": position, "end": cut}
    assert (m["lost_offsets"], m["lost_ranges"]) == (cut - position, [lost])
    assert m["records"] == 20 + len([o for o in pending if o >= cut])
    got = rows(table)
    want = kept(sent, OffsetRange(topic, 0, position, cut))
    assert len(got) == len(set(got)) and set(got) == want
    commit = ingest_history(table)[-1]
    assert commit["eos.lost"] == [lost]
    assert {r["partition"]: r["start"] for r in commit["eos.ranges"]}[0] == cut
    assert DeltaTable(table).transaction_version(f"eos:{topic}:0") == pending[-1] + 2

    found = evaluations(accepted)
    contiguity = found[checks.OFFSETS_CONTIGUOUS]
    assert contiguity.passed, contiguity.description
    assert meta(contiguity)["holes"] == []
    assert meta(contiguity)["acknowledged_lost_offsets"] == cut - position
    version = DeltaTable(table).version()
    assert meta(contiguity)["acknowledged_losses"] == [
        f"{topic}[0] offsets [{position}, {cut}) skipped by version {version}"
    ]
    assert "acknowledged as lost" in (contiguity.description or "")
    audited = found[checks.KAFKA_AUDIT]
    assert audited.passed, audited.description
    assert meta(audited)["acknowledged_lost_offsets"] == cut - position
    assert meta(audited)["missing"] == 0
    assert f"{cut - position} offset(s) Kafka deleted before they were ingested were ack" in (
        audited.description or ""
    )

    # A later run without the setting continues normally.
    sent.append(send_transaction(kafka_bootstrap, topic, batch(10, 2, first=60)))
    later = materialize(kafka_bootstrap, topic, lake_root)
    assert later.success
    assert (materialized(later)["records"], materialized(later)["lost_offsets"]) == (10, 0)
    assert evaluations(later)[checks.OFFSETS_CONTIGUOUS].passed
    got = rows(table)
    want = kept(sent, OffsetRange(topic, 0, position, cut))
    lost_records = len(committed_truth(sent)) - len(want)
    doubled = len(got) - len(set(got))
    bench.ledger.record("records deleted before ingest, default run", 1, 0, 0, "run stopped")
    bench.ledger.record(
        "records deleted before ingest, accepted",
        1,
        len(want - set(got)),
        doubled,
        f"{lost_records} acknowledged as lost",
    )
    assert doubled == 0 and set(got) == want


def test_accepted_loss_with_nothing_after_it_still_moves_the_position(
    spark: SparkSession, bench: Bench, lake_root: str
) -> None:
    topic = bench.topic(partitions=1)
    send_transaction(bench.bootstrap, topic, batch(5, 1))
    assert bench.ingest(spark, topic).version == 1
    position = DeltaTable(bench.table).transaction_version(f"eos:{topic}:0")
    assert position is not None
    sent = send_transaction(bench.bootstrap, topic, batch(8, 1, first=5))
    end = offsets_of(sent, 0)[-1] + 2  # past the commit marker: the whole partition
    delete_before(bench.bootstrap, topic, 0, end)

    accepted = materialize(bench.bootstrap, topic, lake_root, ACCEPT)
    assert accepted.success
    m = materialized(accepted)
    assert (m["records"], m["lost_offsets"], m["delta_version"]) == (0, end - position, 2)
    assert DeltaTable(bench.table).transaction_version(f"eos:{topic}:0") == end
    assert ingest_history(bench.table)[-1]["eos.lost"] == [
        {"topic": topic, "partition": 0, "start": position, "end": end}
    ]
    assert evaluations(accepted)[checks.OFFSETS_CONTIGUOUS].passed
    assert evaluations(accepted)[checks.KAFKA_AUDIT].passed
    # The loss is behind the table now: the next run has nothing to do and does not fail.
    assert bench.ingest(spark, topic).version is None
    assert len(rows(bench.table)) == 5


def test_a_range_deleted_while_it_is_read_fails_the_reader(
    kafka_bootstrap: str, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=1)
    sent = send_transaction(kafka_bootstrap, topic, batch(10, 1))
    delete_before(kafka_bootstrap, topic, 0, 4)
    config = reader_config({"bootstrap.servers": kafka_bootstrap})
    r = OffsetRange(topic, 0, 0, offsets_of(sent, 0)[-1] + 1)
    with pytest.raises(DataLossError) as caught:
        fetch_range(r, ORDERS.contract, config, timeout_s=30)
    assert one_line(str(caught.value))
    assert f"{topic}[0] offsets [0, 4) while this run was reading [0, {r.end})" in str(caught.value)


def test_records_deleted_between_plan_and_read_fail_the_run_and_commit_nothing(
    spark: SparkSession, bench: Bench, tmp_path: Path
) -> None:
    kafka_bootstrap, table = bench.bootstrap, bench.table
    topic = bench.topic(partitions=1)
    send_transaction(kafka_bootstrap, topic, batch(10, 1))
    assert bench.ingest(spark, topic).version
    position = DeltaTable(table).transaction_version(f"eos:{topic}:0")
    sent = send_transaction(kafka_bootstrap, topic, batch(20, 1, first=10))
    cut = offsets_of(sent, 0)[10]
    before = (DeltaTable(table).version(), bronze_keys(table))

    gate = tmp_path / "gate"
    gate.mkdir()
    run = bench.start_paused(topic, faults.AFTER_PLAN, gate, 180)
    delete_before(kafka_bootstrap, topic, 0, cut)
    run = release(gate, run)
    assert run.returncode == FAILED and run.outcome, run.tail()
    assert run.outcome["kind"] == "DataLossError", run.outcome
    error = run.outcome["error"]
    assert one_line(error) and f"{topic}[0] offsets [{position}, {cut})" in error, error
    assert (DeltaTable(table).version(), bronze_keys(table)) == before, "nothing committed"
    bench.ledger.record("records deleted between plan and read", 1, 0, 0, "run failed, 0 committed")
