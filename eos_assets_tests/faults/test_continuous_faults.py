"""Faults of a continuous run, against the oracle: the run SIGKILLed between its steps
(after bronze's commit, while silver/events writes its files, between the late
events' and the windows' commits, before the entity state's merge), then replaced; the Spark
server SIGKILLed under a run's KPI step; the broker restarted under a run; two continuous runs
started at once by hand.

Every run is the product's continuous job (``continuous_defs.py``: a shipped stream declared
``mode: continuous``) executed by ``dagster job execute`` in a process of its own, over the
module's Spark Connect server, with the product's local instance. Every stream's continuous run
is the same code, built from its declaration: the faults run on the page_views example (its
KPI table per hour and page, its sessions, windows and SQL KPIs), two runs at once on orders.
After a kill the instance still holds the run as STARTED: the keeper's ``live_runs`` must see
it dead and mark it failed, and the replacing run must go on where the tables say.
"""

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from eos_assets import cli, examples
from eos_assets.declaration import read_declaration
from eos_assets.defs.continuous import AFTER_BATCH, CONTINUOUS_JOB
from eos_assets.defs.continuous_sensor import live_runs
from eos_assets.defs.stream import Stream
from eos_assets.devkit import broker
from eos_assets.lib import faults
from eos_assets.lib.derived import entity_state, kpi_tables, silver_events, window_aggregates
from eos_assets_tests.faults import test_spark_server_faults as on_server
from eos_assets_tests.faults.continuous_defs import STREAM_ENV
from eos_assets_tests.faults.harness import Ledger, wait_for_files
from eos_assets_tests.faults.oracle import judge, overlaps
from eos_assets_tests.faults.test_spark_server_faults import (
    DAGSTER,
    GRACE,
    MIX,
    RUN_TIMEOUT_S,
    WINDOW,
    DagsterRun,
    Deployment,
    finish,
)
from eos_assets_tests.support import page_views_oracle
from eos_assets_tests.support.continuous import assert_kpi_path, assert_page_views_exact
from eos_assets_tests.support.oracle import expected

# The fixtures of the runs over the Spark server: the session's one server.
server = on_server.server
deployment = on_server.deployment
MODULE = "eos_assets_tests.faults.continuous_defs"
VIEWS = "page_views"
# The page_views runs send views, with late and re-sent ones, from the loop's windows' start.
VIEWS_MIX = {**MIX, "stream": VIEWS}


def start(d: Deployment, loop: dict[str, Any], **fault: str) -> DagsterRun:
    """Start one continuous run of the deployment's stream with ``loop`` as its config; ``fault``
    arms a crash point (``crash_at``) or a pause (``pause_at``, ``pause_dir``)."""
    stream = _stream(d).name
    config = {"poll_s": 0.2, "follow_every_s": 2.0, **loop}
    path = d.logs.parent / f"continuous-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"ops": {f"{stream}_kpi_batches": {"config": config}}}))
    job = f"{stream}_{CONTINUOUS_JOB}"
    return d.launch([DAGSTER, "job", "execute", "-m", MODULE, "-j", job, "-c", str(path)], **fault)


def _stream(d: Deployment) -> Stream:
    """The stream the deployment's runs loop (``continuous_defs.py``)."""
    return Stream.of(read_declaration(examples.shipped(d.env.get(STREAM_ENV, "orders"))))


def views(deployment: tuple[Deployment, str]) -> tuple[Deployment, str]:
    """The deployment, its runs looping the page_views example."""
    d, topic = deployment
    d.env[STREAM_ENV] = VIEWS
    return d, topic


def assert_exact(d: Deployment, manifest: list[dict[str, Any]]) -> tuple[int, int]:
    """Bronze holds the manifest's committed records once; every table after it (for orders:
    silver, the KPIs and DuckDB) is the oracle's. Return bronze's (lost, doubled)."""
    stream = _stream(d).name
    bronze = f"{d.lake}/{stream}/bronze/raw_events"
    verdict = judge(bronze, manifest)
    assert verdict.exact, f"bronze: {verdict}"
    assert not overlaps(bronze), overlaps(bronze)
    if stream == VIEWS:
        want = page_views_oracle.expected(page_views_oracle.committed(manifest))
        assert_page_views_exact(d.lake, want, d.warehouse)
    else:
        assert_kpi_path(d.lake, expected([manifest], WINDOW, GRACE), d.warehouse)
    return verdict.lost, verdict.doubled


@pytest.mark.parametrize(
    "point",
    [
        faults.AFTER_COMMIT,
        silver_events.AFTER_FILES,
        window_aggregates.AFTER_LATE_EVENTS,
        entity_state.BEFORE_MERGE,
    ],
)
def test_a_continuous_run_killed_mid_batch_is_replaced_and_the_tables_are_exact(
    deployment: tuple[Deployment, str], produced: Callable, ledger: Ledger, point: str
) -> None:
    d, topic = views(deployment)
    _, manifest = produced(topic, count=900, seed=61, **VIEWS_MIX)
    killed = finish(start(d, {"max_batches": 5}, crash_at=point))
    assert killed.killed, f"the run did not die at {point}: {killed.tail()}"
    with dg.DagsterInstance.from_config(str(d.home)) as instance:
        (held,) = instance.get_runs()
        assert held.status == dg.DagsterRunStatus.STARTED  # nobody reported its end
        assert live_runs(instance, _stream(d), time.time(), None) == []  # the keeper: dead
        dead = instance.get_run_by_id(held.run_id)
        assert dead is not None and dead.status == dg.DagsterRunStatus.FAILURE

    the_next_run_is_exact(
        d, manifest, ledger, f"continuous page_views run killed at {point}",
        "replaced; every table and DuckDB match the oracle",
    )  # fmt: skip


def test_two_continuous_runs_started_at_once_leave_exact_tables(
    deployment: tuple[Deployment, str], produced: Callable, ledger: Ledger
) -> None:
    """Both loop over the same pending records at once; each ends by itself or fails in one
    line, and after them (and one more batch) every table is exact."""
    d, topic = deployment
    _, manifest = produced(topic, count=900, seed=62, **MIX)
    loop = {"max_offsets_per_batch": 300, "max_seconds": 12.0, "max_batches": 2}
    runs = [start(d, loop), start(d, loop)]
    for run in runs:
        finish(run, timeout=2 * RUN_TIMEOUT_S)  # two runs share the server and two cores
    first, second = on_server.overlapped_and_ended_well(runs, d.home)
    ok = [o.status == dg.DagsterRunStatus.SUCCESS for o in (first, second)]
    last = finish(start(d, {"max_batches": 1}))
    assert last.returncode == 0, last.tail()
    lost, doubled = assert_exact(d, manifest)
    ledger.record(
        "2 continuous runs at once", 1, lost, doubled, f"{sum(ok)} of 2 ended by themselves"
    )


def test_the_spark_server_killed_under_a_continuous_run_fails_it_in_one_line_then_exact(
    deployment: tuple[Deployment, str],
    server: Path,
    produced: Callable,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ledger: Ledger,
) -> None:
    """The server dies while the run's KPI step is inside gold/views_by_hour, between its two
    commits (its distinct values committed, its rows not), and records arrive: the run fails
    with the server's one line; after ``eos-assets spark up`` the next run makes every table
    exact. (The KPI step's last commits need no server, so the records sent while the run
    waits are what make a Spark call certain after the kill.)"""
    d, topic = views(deployment)
    _, manifest = produced(topic, count=900, seed=63, **VIEWS_MIX)
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    run = start(d, {"max_batches": 5}, pause_at=kpi_tables.AFTER_DISTINCT, pause_dir=str(pauses))

    def send_more() -> None:
        manifest.extend(produced(topic, count=300, seed=65, **VIEWS_MIX)[1])

    on_server.kill_server_under(run, server, pauses, d.home, before_release=send_more)
    monkeypatch.setenv("EOS_STATE_DIR", str(server))
    monkeypatch.setenv("EOS_SPARK_MASTER", "local[2]")
    assert cli.main(["spark", "up"]) == 0
    the_next_run_is_exact(
        d, manifest, ledger,
        f"Spark server SIGKILLed at {kpi_tables.AFTER_DISTINCT} (continuous page_views run)",
        "failed in one line; spark up + the next run exact",
    )  # fmt: skip


def test_the_broker_restarted_under_a_continuous_run_costs_a_retry_not_the_run(
    deployment: tuple[Deployment, str], produced: Callable, tmp_path: Path, ledger: Ledger
) -> None:
    """A one-node broker of the test's own, stopped (SIGTERM) after the run's first batch and
    started again once the loop has found it gone: the run rides over it, takes the records
    sent after the restart, ends by its bound, and every table is exact."""
    d, _ = views(deployment)
    data = tmp_path / "kafka"
    info = broker.start_broker(data)
    port = int(info.bootstrap.rsplit(":", 1)[1])
    topic = "page-views-restarted"
    d.env.update(EOS_KAFKA_BOOTSTRAP=info.bootstrap, EOS_TOPICS=topic)
    try:
        broker.ensure_topic(info.bootstrap, topic, 2)
        _, manifest = produced(topic, count=600, seed=64, bootstrap=info.bootstrap, **VIEWS_MIX)
        pauses = tmp_path / "pauses"
        pauses.mkdir()
        run = start(d, {"max_batches": 2}, pause_at=AFTER_BATCH, pause_dir=str(pauses))
        wait_for_files(pauses, f"{AFTER_BATCH}-*.ready", 1, RUN_TIMEOUT_S, run)
        broker.stop_broker(info)  # no poll is in flight: the loop waits at its pause
        (pauses / faults.RELEASE).touch()
        wait_for_line(run, f"Kafka at {info.bootstrap} is unreachable")
        info = broker.start_broker(data, port=port)
        # One transaction: the second batch takes all of it, and the run ends by its bound.
        one = {**VIEWS_MIX, "transaction_size": 600, "abort_ratio": 0.0}
        manifest += produced(topic, count=600, seed=65, bootstrap=info.bootstrap, **one)[1]
        finish(run)
        assert run.returncode == 0, run.tail()
        assert "Kafka answers again after" in run.log.read_text(errors="replace"), run.tail()
        lost, doubled = assert_exact(d, manifest)
    finally:
        broker.stop_broker(info)
    ledger.record(
        "broker SIGTERM + restart under a continuous page_views run", 1, lost, doubled,
        "the run retried, then went on",
    )  # fmt: skip


def wait_for_line(run: DagsterRun, line: str) -> None:
    """Wait until the run's log holds ``line``."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while line not in run.log.read_text(errors="replace"):
        assert run.proc.poll() is None, run.tail()
        assert time.monotonic() < deadline, f"no {line!r} in the run's log: {run.tail()}"
        time.sleep(0.2)


def the_next_run_is_exact(
    d: Deployment, manifest: list[dict[str, Any]], ledger: Ledger, fault: str, note: str
) -> None:
    """One more run of one batch succeeds and leaves every table exact; into the ledger."""
    replaced = finish(start(d, {"max_batches": 1}))
    assert replaced.returncode == 0, replaced.tail()
    lost, doubled = assert_exact(d, manifest)
    ledger.record(fault, 1, lost, doubled, note)
