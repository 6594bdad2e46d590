"""Exactly-once on object storage: two ingests committing one table at once, an ingest killed
after its files were uploaded and before its commit, and the S3 server stopped under a run
(before its Spark tasks upload the files, and before its commit).

Each ingest runs in a process of its own (``faults.ingest_once``) on the session's Spark
Connect server, with the lake's variables in its environment; bronze is judged against the
producer's manifest (``faults.oracle.judge``).
"""

from collections.abc import Callable
from pathlib import Path

import pytest
from deltalake import DeltaTable

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit import s3server
from eos_assets.lib import faults
from eos_assets.lib.contract.schema import bronze_schema
from eos_assets.lib.delta import delta_io
from eos_assets.lib.delta.maintenance import remove_orphans
from eos_assets.settings import Settings
from eos_assets_tests.faults.harness import (
    FAILED,
    Ledger,
    finish,
    one_line,
    run_ingest,
    start_ingest,
    wait_for_files,
)
from eos_assets_tests.faults.oracle import judge, overlaps
from eos_assets_tests.support.s3 import objects, restart, stop

READY = f"{faults.BEFORE_COMMIT}-{{pid}}.ready"


def bronze(lake: str) -> str:
    return Settings(lake_root=lake).table_uri("orders", "bronze", "raw_events")


def parquet(table: str) -> set[str]:
    """The data files in the table's folder on the store, committed or not."""
    return {o.rsplit("/", 1)[1] for o in objects(table) if o.endswith(".parquet")}


def test_two_writers_on_s3_commit_each_version_once(
    s3_lake: str,
    s3_spark: str,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produced: Callable,
    tmp_path: Path,
    ledger: Ledger,
) -> None:
    topic = make_topic(partitions=2)
    summary, manifest = produced(topic, count=800, seed=51)
    table = bronze(s3_lake)
    delta_io.ensure_table(table, bronze_schema(ORDERS.contract))
    runs = [
        start_ingest(
            kafka_bootstrap,
            topic,
            table,
            pause_at=faults.BEFORE_COMMIT,
            pause_dir=tmp_path,
            remote=s3_spark,
        )
        for _ in range(2)
    ]
    wait_for_files(tmp_path, READY.format(pid="*"), 2, 240, *runs)
    assert DeltaTable(table).version() == 0, "nobody may commit before the gate opens"
    (tmp_path / faults.RELEASE).touch()
    outcomes = []
    for run in map(finish, runs):
        assert run.returncode == 0 and run.outcome and run.outcome["ok"], run.tail()
        outcomes.append(run.outcome)

    winners = [o for o in outcomes if o["version"] is not None]
    assert len(winners) == 1 and winners[0]["attempts"] == 1, f"one commit wins: {outcomes}"
    loser = next(o for o in outcomes if o is not winners[0])
    assert loser["attempts"] > 1, f"the loser must fail its commit and re-plan: {loser}"
    assert DeltaTable(table).version() == 1
    verdict = judge(table, manifest)
    ledger.record("2 writers on S3 released together", 1, verdict.lost, verdict.doubled, "")
    assert verdict.exact, verdict
    assert not overlaps(table), overlaps(table)
    assert summary.committed == verdict.found


def test_an_ingest_killed_before_its_commit_on_s3_leaves_only_invisible_files(
    s3_lake: str,
    s3_spark: str,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produced: Callable,
    ledger: Ledger,
) -> None:
    topic = make_topic(partitions=2)
    _, manifest = produced(topic, count=600, seed=52)
    table = bronze(s3_lake)
    crashed = run_ingest(
        kafka_bootstrap, topic, table, crash_at=faults.BEFORE_COMMIT, remote=s3_spark
    )
    assert crashed.killed, crashed.tail()
    uploaded = parquet(table)
    assert len(uploaded) == 2, f"one uploaded file per range: {uploaded}"
    dt = DeltaTable(table)
    assert dt.version() == 0 and not dt.file_uris(), "the uploaded files are never visible"

    rerun = run_ingest(kafka_bootstrap, topic, table, remote=s3_spark)
    assert rerun.outcome and rerun.outcome["version"] == 1, rerun.tail()
    verdict = judge(table, manifest)
    ledger.record("ingest killed on S3 before its commit", 1, verdict.lost, verdict.doubled, "")
    assert verdict.exact, f"the crash's files leaked into bronze: {verdict}"
    committed = {u.rsplit("/", 1)[1] for u in DeltaTable(table).file_uris()}
    assert committed and not committed & uploaded

    assert remove_orphans(table, older_than_hours=1) == [], "younger than the retention: kept"
    removed = remove_orphans(table, older_than_hours=0, force=True)
    assert {r.rsplit("/", 1)[-1] for r in removed} == uploaded
    assert parquet(table) == committed
    assert judge(table, manifest).exact


@pytest.mark.parametrize("point", [faults.AFTER_PLAN, faults.BEFORE_COMMIT])
def test_the_s3_server_stopped_under_a_run_fails_it_with_one_line_and_the_rerun_is_exact(
    point: str,
    s3_server: s3server.S3Info,
    s3_lake: str,
    s3_spark: str,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produced: Callable,
    tmp_path: Path,
    ledger: Ledger,
) -> None:
    topic = make_topic(partitions=2)
    _, manifest = produced(topic, count=600, seed=53)
    table = bronze(s3_lake)
    delta_io.ensure_table(table, bronze_schema(ORDERS.contract))
    run = start_ingest(
        kafka_bootstrap, topic, table, pause_at=point, pause_dir=tmp_path, remote=s3_spark
    )
    wait_for_files(tmp_path, f"{point}-*.ready", 1, 240, run)
    # After the plan the Spark tasks' uploads (pyarrow) meet the stopped server; before the
    # commit, delta-rs's commit does.
    stop(s3_server)
    try:
        (tmp_path / faults.RELEASE).touch()
        failed = finish(run)
    finally:
        restart(s3_server)
    assert failed.returncode == FAILED and failed.outcome, failed.tail()
    message = failed.outcome["error"]
    assert one_line(message) and s3_server.endpoint in message, message
    assert "AWS_ENDPOINT_URL" in message, message
    assert DeltaTable(table).version() == 0

    rerun = run_ingest(kafka_bootstrap, topic, table, remote=s3_spark)
    assert rerun.outcome and rerun.outcome["version"] == 1, rerun.tail()
    verdict = judge(table, manifest)
    ledger.record("S3 server stopped before a commit", 1, verdict.lost, verdict.doubled, "")
    assert verdict.exact, verdict
