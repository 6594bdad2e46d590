"""Faults of runs that use the local Spark Connect server: Dagster runs killed mid-ingest and
mid-derived step, the server killed under a run, two runs at once on one server.

Every run is the product's own: ``dagster job execute`` of ``eos_assets.definitions`` in a
process of its own, with ``EOS_SPARK_CONNECT=local`` and the product's local instance
(``deploy/dagster.local.yaml``), against the session's one real server (``eos-assets spark up``)
and the session's broker. Bronze is judged against the producer's manifest (``oracle.judge``),
silver, gold and DuckDB against the derived-table oracle (``eos_assets_tests.support.oracle``).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from deltalake import DeltaTable

from eos_assets import cli
from eos_assets.lib import faults
from eos_assets.lib.derived import kpi_tables, silver_events
from eos_assets.lib.spark import spark_server
from eos_assets_tests.faults.harness import (
    STARTED,
    Ledger,
    Run,
    fault_env,
    one_line,
    reap_group,
    wait_for_files,
)
from eos_assets_tests.faults.oracle import judge, overlaps
from eos_assets_tests.support import graph
from eos_assets_tests.support.oracle import expected

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")
INSTANCE_YAML = REPO / "deploy" / "dagster.local.yaml"
STREAM_JOB = "ingest_and_refresh"  # what the lag sensor launches
INGEST_JOB = "ingest_kafka_to_bronze"
START = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
WINDOW = GRACE = timedelta(minutes=1)
MIX: dict[str, Any] = {"duplicate_ratio": 0.05, "late_ratio": 0.05, "start_time": START}
RUN_TIMEOUT_S = 240.0


@pytest.fixture
def server(spark_server_state: Path) -> Path:
    """State folder of the session's Spark Connect server (2 task slots), running."""
    return spark_server_state


@dataclass
class DagsterRun(Run):
    """A run's process, with the file its Dagster log goes to."""

    log: Path = Path()

    def tail(self, chars: int = 3000) -> str:
        """The end of the run's Dagster log, for assertion messages."""
        return f"rc={self.returncode}: " + self.log.read_text(errors="replace")[-chars:]


@dataclass
class Deployment:
    """The environment of the runs of one test: its topic, lake, warehouse and instance."""

    env: dict[str, str]
    home: Path
    lake: str
    warehouse: Path
    config: Path
    logs: Path

    def start(self, job: str, **fault: str) -> DagsterRun:
        """Start one run of ``job`` in a process group of its own; ``fault`` is
        ``crash_at=...`` or ``pause_at=..., pause_dir=...``."""
        command = [DAGSTER, "job", "execute", "-m", "eos_assets.definitions", "-j", job]
        if job == STREAM_JOB:
            command += ["-c", str(self.config)]
        return self.launch(command, **fault)

    def launch(self, command: list[str], **fault: str) -> DagsterRun:
        """Start ``command`` (a ``dagster job execute``) in this deployment's environment, in a
        process group of its own, its output to a new log file; ``fault`` as for ``start``."""
        log = self.logs / f"run-{len(list(self.logs.iterdir()))}.log"
        # A file, not a pipe: a paused run must not block on a full pipe of Dagster's log.
        with log.open("w") as out:
            proc = subprocess.Popen(
                command, cwd=REPO, env=fault_env(**fault, base=self.env),
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,
            )  # fmt: skip
        run = DagsterRun(proc, log=log)
        STARTED.append(run)
        return run

    def run(self, job: str, **fault: str) -> DagsterRun:
        """Start one run and wait for its process to end."""
        return finish(self.start(job, **fault))


@pytest.fixture
def deployment(
    server: Path, kafka_bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> tuple[Deployment, str]:
    """The product deployed on the module's server, and the topic of this test."""
    topic = make_topic(partitions=3)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(INSTANCE_YAML, home / "dagster.yaml")
    # Created once here, as the daemon or the UI would: two runs that start together on a new
    # SQLite instance would both stamp its schema.
    dg.DagsterInstance.from_config(str(home)).dispose()
    logs = tmp_path / "logs"
    logs.mkdir()
    config = tmp_path / "run_config.json"
    config.write_text(json.dumps(graph.window_config(WINDOW.seconds / 60, GRACE.seconds / 60)))
    lake, warehouse = tmp_path / "lake", tmp_path / "serving.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_FAULT_", "DAGSTER_"))}
    env.update(
        DAGSTER_HOME=str(home),
        EOS_KAFKA_BOOTSTRAP=kafka_bootstrap,
        EOS_TOPICS=topic,
        EOS_LAKE_ROOT=str(lake),
        EOS_WAREHOUSE=str(warehouse),
        EOS_STATE_DIR=str(server),
        EOS_SPARK_CONNECT="local",
        EOS_SPARK_MASTER="local[2]",
        EOS_AGG_OUT_TOPIC=f"{topic}-out",
        EOS_MALFORMED_MAX_RATE="0.2",  # the fault mix has 5 % malformed records on purpose
    )
    return Deployment(env, home, str(lake), warehouse, config, logs), topic


def finish(run: DagsterRun, timeout: float = RUN_TIMEOUT_S) -> DagsterRun:
    """Wait for the run's process; make sure its group is gone."""
    try:
        run.returncode = run.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.returncode = run.proc.wait()
    reap_group(run.proc.pid)
    return run


@dataclass(frozen=True)
class Outcome:
    """How a Dagster run ended, from the instance: status, times and its step failures."""

    status: dg.DagsterRunStatus
    started: float
    ended: float
    failures: dict[str, str]  # step key -> the message Dagster shows for it

    @property
    def one_line_failures(self) -> bool:
        """Every failed step says why in one line (a ``dg.Failure``), none with a traceback."""
        return all(one_line(m) and "Traceback" not in m for m in self.failures.values())


def outcomes(home: Path) -> list[Outcome]:
    """Every run of the instance at ``home``, oldest first."""
    found = []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for record in sorted(instance.get_run_records(), key=lambda r: r.create_timestamp):
            run_id = record.dagster_run.run_id
            failures = {}
            for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
                event = entry.dagster_event
                assert event is not None and event.step_key is not None
                data = event.step_failure_data
                user = data.user_failure_data if data is not None else None
                if user is not None and user.description:
                    failures[event.step_key] = user.description
                else:
                    error = data.error if data is not None else None
                    failures[event.step_key] = error.to_string() if error else entry.message
            found.append(
                Outcome(
                    record.dagster_run.status,
                    record.start_time or 0.0,
                    record.end_time or 0.0,
                    failures,
                )
            )
    return found


def assert_exact(d: Deployment, topic: str, manifest: list[dict[str, Any]]) -> tuple[int, int]:
    """Bronze, silver, gold and DuckDB hold the manifest's committed records exactly once;
    return bronze's (lost, doubled)."""
    bronze = f"{d.lake}/orders/bronze/raw_events"
    verdict = judge(bronze, manifest)
    assert verdict.exact, f"bronze: {verdict}"
    assert not overlaps(bronze), overlaps(bronze)
    # Everything was produced before the first run: gold consumed silver in one run.
    graph.assert_matches_oracle(d.lake, expected([manifest], WINDOW, GRACE), d.warehouse)
    return verdict.lost, verdict.doubled


def fail_dead_runs(home: Path) -> list[str]:
    """Do what Dagster's run monitoring does for a run whose process died: mark it failed and
    free the pool slots it held (``free_slots_after_run_end_seconds``); return their ids.

    A SIGKILLed run holds its ``eos_ingest`` slot: without this, the next run's bronze step
    waits for that slot for good.
    """
    busy = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        dead = instance.get_runs(filters=dg.RunsFilter(statuses=busy))
        for run in dead:
            instance.report_run_failed(run)
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    return [run.run_id for run in dead]


def orphans(uri: str) -> set[str]:
    """Parquet files in the table folder that the latest snapshot does not reference."""
    referenced = {Path(f.removeprefix("file://")).name for f in DeltaTable(uri).file_uris()}
    return {p.name for p in Path(uri).rglob("*.parquet")} - referenced


def test_a_run_killed_mid_ingest_then_the_next_run_is_exact(
    deployment: tuple[Deployment, str], produced: Callable, tmp_path: Path, ledger: Ledger
) -> None:
    """The run's process dies while the server reads its ranges; the server finishes the
    orphaned tasks, and nothing of them is ever committed."""
    d, topic = deployment
    summary, manifest = produced(topic, count=1500, seed=41, **MIX)
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    killed = d.start(INGEST_JOB, pause_at=faults.MID_READ, pause_dir=str(pauses))
    # The ingest's tasks stop inside the server's Python workers, mid-read.
    wait_for_files(pauses, f"{faults.MID_READ}-*.ready", 1, RUN_TIMEOUT_S, killed)
    os.killpg(killed.proc.pid, signal.SIGKILL)
    finish(killed)
    (pauses / faults.RELEASE).touch()  # the server goes on with tasks nobody waits for
    bronze = f"{d.lake}/orders/bronze/raw_events"
    assert DeltaTable(bronze).version() == 0 and not DeltaTable(bronze).file_uris()
    assert len(fail_dead_runs(d.home)) == 1

    rerun = d.run(INGEST_JOB)
    assert rerun.returncode == 0, rerun.tail()
    verdict = judge(bronze, manifest)
    ledger.record(
        "run killed mid-ingest (Spark server)", 1, verdict.lost, verdict.doubled, "Dagster rerun"
    )
    assert verdict.exact, f"after a kill mid-ingest over the server: {verdict}"
    assert not overlaps(bronze), overlaps(bronze)
    assert summary.committed == verdict.found
    assert [o.status for o in outcomes(d.home)] == [
        dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.SUCCESS
    ]  # fmt: skip


def test_a_run_killed_mid_derived_step_then_the_next_run_is_exact(
    deployment: tuple[Deployment, str], produced: Callable, ledger: Ledger
) -> None:
    """The run dies in silver/events after the server's tasks wrote its files, before its
    commit; the next run of the stream job brings every table to exactly the oracle's."""
    d, topic = deployment
    _, manifest = produced(topic, count=1500, seed=42, **MIX)
    crashed = d.run(STREAM_JOB, crash_at=silver_events.AFTER_FILES)
    assert crashed.killed, f"the run did not die at {silver_events.AFTER_FILES}: {crashed.tail()}"
    silver = f"{d.lake}/orders/silver/events"
    assert DeltaTable(silver).version() == 0 and orphans(silver), "files written, none committed"
    assert len(fail_dead_runs(d.home)) == 1

    rerun = d.run(STREAM_JOB)
    assert rerun.returncode == 0, rerun.tail()
    lost, doubled = assert_exact(d, topic, manifest)
    ledger.record(
        f"run killed at {silver_events.AFTER_FILES} (Spark server)", 1, lost, doubled,
        "Dagster rerun; silver, gold, DuckDB match the oracle",
    )  # fmt: skip


def test_two_runs_at_once_on_one_server_leave_exact_tables(
    deployment: tuple[Deployment, str], produced: Callable, ledger: Ledger
) -> None:
    """Two stream runs started together share the server; each succeeds or fails in one line,
    and after them (and one more run if one failed) every table is exact."""
    d, topic = deployment
    _, manifest = produced(topic, count=1500, seed=43, **MIX)
    runs = [d.start(STREAM_JOB), d.start(STREAM_JOB)]
    for run in runs:
        finish(run)
    first, second = overlapped_and_ended_well(runs, d.home)
    ok = [o.status == dg.DagsterRunStatus.SUCCESS for o in (first, second)]
    assert any(ok), f"neither run finished: {first.failures} {second.failures}"
    if not all(ok):
        assert d.run(STREAM_JOB).returncode == 0
    lost, doubled = assert_exact(d, topic, manifest)
    ledger.record(
        "2 stream runs at once on one Spark server", 1, lost, doubled,
        f"{sum(ok)} of 2 succeeded" + ("" if all(ok) else ", the other failed in one line"),
    )  # fmt: skip


def overlapped_and_ended_well(runs: list[DagsterRun], home: Path) -> tuple[Outcome, Outcome]:
    """The outcomes of the two ``runs`` of the instance at ``home``: they overlapped, and each
    succeeded or failed in one line."""
    first, second = outcomes(home)
    assert first.started < second.ended and second.started < first.ended, "the runs overlapped"
    for run, outcome in zip(runs, (first, second), strict=True):
        assert outcome.status == dg.DagsterRunStatus.SUCCESS or outcome.one_line_failures, (
            f"{outcome.failures}\n{run.tail()}"
        )
    return first, second


def kill_server_under(
    run: DagsterRun,
    server: Path,
    pauses: Path,
    home: Path,
    before_release: Callable[[], object] | None = None,
) -> tuple[spark_server.ServerInfo, Outcome]:
    """SIGKILL the server once ``run`` waits at its pause, call ``before_release`` (if any),
    release the run, and check that it failed with the lost server's one line only; the
    server's info and the run's outcome."""
    wait_for_files(pauses, "*.ready", 1, RUN_TIMEOUT_S, run)
    info = spark_server.server_status(server)
    assert info is not None
    os.killpg(info.pid, signal.SIGKILL)  # the JVM and its Python workers
    if before_release is not None:
        before_release()
    (pauses / faults.RELEASE).touch()
    finish(run)
    (outcome,) = outcomes(home)
    assert outcome.status == dg.DagsterRunStatus.FAILURE, run.tail()
    message = (
        f"the Spark Connect server at {info.url} stopped answering: run `eos-assets spark up` "
        "(or check EOS_SPARK_CONNECT) and rerun"
    )
    assert outcome.failures and set(outcome.failures.values()) == {message}, outcome.failures
    return info, outcome


def test_the_server_killed_mid_run_fails_it_in_one_line_then_after_spark_up_it_is_exact(
    deployment: tuple[Deployment, str],
    server: Path,
    produced: Callable,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    ledger: Ledger,
) -> None:
    """The server dies while the run is in the KPI tables' step, between gold/kpi_window's two
    commits (its distinct values committed, its rows not), with silver/entity_state and the
    windows still to compute: the run fails, each failed step in one line, and once
    ``eos-assets spark up`` has started the server again, the next run makes every table
    exact."""
    d, topic = deployment
    _, manifest = produced(topic, count=1500, seed=44, **MIX)
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    run = d.start(STREAM_JOB, pause_at=kpi_tables.AFTER_DISTINCT, pause_dir=str(pauses))
    info, outcome = kill_server_under(run, server, pauses, d.home)

    monkeypatch.setenv("EOS_STATE_DIR", str(server))
    monkeypatch.setenv("EOS_SPARK_MASTER", "local[2]")
    began = time.monotonic()
    assert cli.main(["spark", "up"]) == 0
    assert capsys.readouterr().out.strip() == info.url, "the same port: run config still fits"
    rerun = d.run(STREAM_JOB)
    assert rerun.returncode == 0, rerun.tail()
    lost, doubled = assert_exact(d, topic, manifest)
    ledger.record(
        f"Spark server SIGKILLed at {kpi_tables.AFTER_DISTINCT}", 1, lost, doubled,
        f"failed steps {sorted(outcome.failures)} in one line; spark up + rerun "
        f"{time.monotonic() - began:.0f}s",
    )  # fmt: skip
