"""The keeper of a continuous stream's run and the stall it names, against a real instance:
one run started when none is active, never a second, a SIGKILLed run (still STARTED in the
instance) marked failed and replaced in the same tick."""

import os
import socket
import subprocess
import time
from collections.abc import Iterator

import dagster as dg
import pytest

from eos_assets.defs.checks import OFFSETS_CONTIGUOUS
from eos_assets.defs.continuous import HEARTBEAT, HOST, LAST_BATCH, PID, continuous_job
from eos_assets.defs.continuous_sensor import (
    STALL_AFTER_S,
    blocking_checks_passed,
    keeper_sensor,
    live_runs,
    stall_cause,
)
from eos_assets.defs.derived_checks import EVENT_ID_UNIQUE
from eos_assets.defs.stream import ORDERS

STREAM = ORDERS
JOB = continuous_job(STREAM)
KEEPER = keeper_sensor(STREAM, JOB)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as instance:
        yield instance


def tick(instance: dg.DagsterInstance, cursor: str | None = None) -> dg.SensorResult:
    result = KEEPER(dg.build_sensor_context(instance=instance, cursor=cursor))
    assert isinstance(result, dg.SensorResult)
    return result


def skipped(result: dg.SensorResult) -> str:
    assert result.skip_reason is not None
    return result.skip_reason.skip_message or ""


def started(instance: dg.DagsterInstance, pid: int, **tags: str) -> dg.DagsterRun:
    """A continuous run the instance holds as STARTED, whose process is ``pid`` on this host."""

    run = instance.create_run_for_job(
        JOB,
        status=dg.DagsterRunStatus.STARTED,
        tags={PID: str(pid), HOST: socket.gethostname(), **tags},
    )
    return run


def dead_pid() -> int:
    """The pid of a process that ran and is gone."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_starts_one_run_when_none_is_active_and_never_a_second(
    instance: dg.DagsterInstance,
) -> None:
    first = tick(instance)
    (request,) = first.run_requests or []
    assert request.tags["eos/stream"] == STREAM.name
    # The daemon creates the requested run; the next tick sees it active and starts no other.
    instance.create_run_for_job(JOB, status=dg.DagsterRunStatus.NOT_STARTED, tags=request.tags)
    again = tick(instance, first.cursor)
    assert not again.run_requests
    assert "is NOT_STARTED (no batch yet)" in skipped(again)


def test_a_live_run_holds_a_dead_one_is_marked_failed_and_replaced_in_the_same_tick(
    instance: dg.DagsterInstance,
) -> None:
    alive = started(instance, pid=os.getpid())
    held = tick(instance)
    assert not held.run_requests
    assert alive.run_id[:8] in skipped(held)
    instance.report_run_failed(alive)
    # The next one is killed by SIGKILL: nobody reports its end, the instance says STARTED.
    killed = started(instance, pid=dead_pid())
    replaced = tick(instance, held.cursor)
    assert len(replaced.run_requests or []) == 1
    run = instance.get_run_by_id(killed.run_id)
    assert run is not None and run.status == dg.DagsterRunStatus.FAILURE


def test_two_runs_started_by_hand_are_both_kept_and_named(instance: dg.DagsterInstance) -> None:

    first = started(instance, pid=os.getpid())
    started(instance, pid=os.getpid())
    result = tick(instance)
    assert not result.run_requests
    message = skipped(result)
    assert first.run_id[:8] in message and "1 more started by hand" in message
    assert len(live_runs(instance, STREAM, time.time(), None)) == 2


def test_a_live_run_without_a_batch_for_too_long_is_the_stall_cause(
    instance: dg.DagsterInstance,
) -> None:

    now = time.time()
    run = started(instance, pid=os.getpid(), **{LAST_BATCH: f"{now - 5:.3f}"})
    assert stall_cause(instance, STREAM, now) is None
    cause = stall_cause(instance, STREAM, now + STALL_AFTER_S + 1)
    assert cause and run.run_id[:8] in cause and "stuck" in cause
    # A dead run is no stall's cause: the keeper replaces it.
    instance.report_run_failed(run)
    started(instance, pid=dead_pid(), **{LAST_BATCH: f"{now - 600:.3f}"})
    assert stall_cause(instance, STREAM, now) is None


def test_after_a_failed_run_the_next_waits_but_a_dead_one_is_replaced_at_once(
    instance: dg.DagsterInstance,
) -> None:
    failed = started(instance, pid=os.getpid())
    instance.report_run_failed(failed)  # its blocking check failed: it ended by itself
    waiting = tick(instance)
    assert not waiting.run_requests
    assert failed.run_id[:8] in skipped(waiting) and "failed" in skipped(waiting)
    started(instance, pid=dead_pid())  # killed: found dead, replaced in the same tick
    assert len(tick(instance).run_requests or []) == 1


def test_a_live_process_in_a_long_batch_is_alive_whatever_its_heartbeat(
    instance: dg.DagsterInstance,
) -> None:
    old = f"{time.time() - 3600:.3f}"
    run = started(instance, pid=os.getpid(), **{HEARTBEAT: old, LAST_BATCH: old})
    result = tick(instance)
    assert not result.run_requests and run.run_id[:8] in skipped(result)


def evaluated(instance: dg.DagsterInstance, key: dg.AssetKey, name: str, passed: bool) -> None:
    instance.report_runless_asset_event(
        dg.AssetCheckEvaluation(asset_key=key, check_name=name, passed=passed)
    )


def test_the_rest_of_the_graph_follows_only_while_the_blocking_checks_pass(
    instance: dg.DagsterInstance,
) -> None:
    assert not blocking_checks_passed(instance, STREAM)
    evaluated(instance, STREAM.raw_events, OFFSETS_CONTIGUOUS, True)
    evaluated(instance, STREAM.events, EVENT_ID_UNIQUE, True)
    assert blocking_checks_passed(instance, STREAM)
    evaluated(instance, STREAM.events, EVENT_ID_UNIQUE, False)
    assert not blocking_checks_passed(instance, STREAM)
    evaluated(instance, STREAM.events, EVENT_ID_UNIQUE, True)
    evaluated(instance, STREAM.raw_events, OFFSETS_CONTIGUOUS, False)
    assert not blocking_checks_passed(instance, STREAM)
