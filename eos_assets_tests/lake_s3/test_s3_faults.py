"""Exactly-once on object storage: two ingests committing one table at once, an ingest killed
after its files were uploaded and before its commit, and the S3 server stopped under a run
(before its Spark tasks upload the files, and before its commit).

Each ingest runs in a process of its own (``faults.ingest_once``) on the session's Spark
Connect server, with the lake's variables in its environment; bronze is judged against the
producer's manifest (``faults.oracle.judge``).
"""

from pathlib import Path

import pytest
from deltalake import DeltaTable

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit import s3server
from eos_assets.lib import faults
from eos_assets.lib.contract.schema import bronze_schema
from eos_assets.lib.delta import delta_io
from eos_assets.lib.delta.maintenance import remove_orphans
from eos_assets_tests.faults.harness import FAILED, one_line
from eos_assets_tests.faults.oracle import judge, overlaps
from eos_assets_tests.support.fault_bench import Bench
from eos_assets_tests.support.paused_runs import one_commit_wins, release, writers_at_the_gate
from eos_assets_tests.support.s3 import objects, restart, stop


def parquet(table: str) -> set[str]:
    """The data files in the table's folder on the store, committed or not."""
    return {o.rsplit("/", 1)[1] for o in objects(table) if o.endswith(".parquet")}


def test_two_writers_on_s3_commit_each_version_once(s3_bench: Bench, tmp_path: Path) -> None:
    table = s3_bench.table
    topic, summary, manifest = s3_bench.topic_with(partitions=2, count=800, seed=51)
    delta_io.ensure_table(table, bronze_schema(ORDERS.contract))
    runs = writers_at_the_gate(
        s3_bench.bootstrap, topic, table, tmp_path, (None, None), 240, remote=s3_bench.remote
    )
    one_commit_wins(tmp_path, runs, table)
    verdict = s3_bench.score("2 writers on S3 released together", manifest)
    assert verdict.exact, verdict
    assert not overlaps(table), overlaps(table)
    assert summary.committed == verdict.found


def test_an_ingest_killed_before_its_commit_on_s3_leaves_only_invisible_files(
    s3_bench: Bench,
) -> None:
    table = s3_bench.table
    topic, _, manifest = s3_bench.topic_with(partitions=2, count=600, seed=52)
    s3_bench.crash(topic, faults.BEFORE_COMMIT)
    uploaded = parquet(table)
    assert len(uploaded) == 2, f"one uploaded file per range: {uploaded}"
    dt = DeltaTable(table)
    assert dt.version() == 0 and not dt.file_uris(), "the uploaded files are never visible"

    rerun = s3_bench.run(topic)
    assert rerun.outcome and rerun.outcome["version"] == 1, rerun.tail()
    verdict = s3_bench.score("ingest killed on S3 before its commit", manifest)
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
    point: str, s3_server: s3server.S3Info, s3_bench: Bench, tmp_path: Path
) -> None:
    table = s3_bench.table
    topic, _, manifest = s3_bench.topic_with(partitions=2, count=600, seed=53)
    delta_io.ensure_table(table, bronze_schema(ORDERS.contract))
    run = s3_bench.start_paused(topic, point, tmp_path, 240)
    # After the plan the Spark tasks' uploads (pyarrow) meet the stopped server; before the
    # commit, delta-rs's commit does.
    stop(s3_server)
    try:
        failed = release(tmp_path, run)
    finally:
        restart(s3_server)
    assert failed.returncode == FAILED and failed.outcome, failed.tail()
    message = failed.outcome["error"]
    assert one_line(message) and s3_server.endpoint in message, message
    assert "AWS_ENDPOINT_URL" in message, message
    assert DeltaTable(table).version() == 0

    rerun = s3_bench.run(topic)
    assert rerun.outcome and rerun.outcome["version"] == 1, rerun.tail()
    verdict = s3_bench.score("S3 server stopped before a commit", manifest)
    assert verdict.exact, verdict
