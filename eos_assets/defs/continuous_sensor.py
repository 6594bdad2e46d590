"""Keep exactly one continuous run of a stream alive, and say when it stalls.

The keeper sensor ``<stream>_keep_continuous_run`` starts a run of ``<stream>_continuous_kpis``
when none of the stream's is active, never a second one. A run killed with SIGKILL stays
STARTED in the instance (nobody is left to report its end): the keeper tells it from a live
one by its process (the ``eos/pid`` it tagged, gone or a zombie on this host) or, on another
host, by a heartbeat older than ``DEAD_AFTER_S`` (the loop beats between batches, so there a
batch longer than that is taken for a dead run); it marks such a run failed and starts the
next one in the same tick.

The lag sensor of a continuous stream launches no ingest; it still measures and records the
lag and its Burrow status, names a live continuous run with no batch for ``STALL_AFTER_S``
while records are pending as the stall's cause (``stall_cause``), and launches the assets off
the KPI path in ordinary runs (``rest_request``).
"""

import logging
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from eos_assets.defs.checks import OFFSETS_CONTIGUOUS
from eos_assets.defs.continuous import CONTINUOUS_JOB, HEARTBEAT, HOST, LAST_BATCH, PID
from eos_assets.defs.derived_checks import EVENT_ID_UNIQUE
from eos_assets.defs.jobs import STREAM_TAG, stream_selection
from eos_assets.defs.stream import Stream

KEEPER = "keep_continuous_run"
# A run with no heartbeat (or, before its first, no start) for this long is dead.
DEAD_AFTER_S = 180.0
# After a continuous run failed (not found dead), the next one starts this much later: a
# blocking check that keeps failing does not start a run per tick.
RETRY_AFTER_S = 30.0
DEAD = "eos/dead"  # tag of a run the keeper found dead and marked failed
# A live run with no batch for this long while records are pending is the stall's cause.
STALL_AFTER_S = 60.0
# Statuses of a run that is queued or running.
ACTIVE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


@dataclass(frozen=True)
class Continuous:
    """An active continuous run of a stream, as the instance has it."""

    run: dg.DagsterRun
    created: float

    def tag(self, name: str) -> float | None:
        value = self.run.tags.get(name)
        return float(value) if value else None

    def dead(self, now: float) -> str | None:
        """Why this run is dead (its process gone, no heartbeat), or None: it is alive."""
        pid, host = self.run.tags.get(PID), self.run.tags.get(HOST)
        if pid and host == socket.gethostname():
            # Its process says it all: a batch may take longer than any heartbeat period.
            return None if _process_alive(int(pid)) else f"its process {pid} is gone"
        since = self.tag(HEARTBEAT) or self.created
        if now - since > DEAD_AFTER_S:
            return f"no heartbeat for {now - since:.0f} s"
        return None

    def describe(self, now: float) -> str:
        last = self.tag(LAST_BATCH)
        batch = "no batch yet" if last is None else f"last batch {now - last:.1f} s ago"
        return f"continuous run {self.run.run_id[:8]} is {self.run.status.value} ({batch})"


def active_runs(instance: dg.DagsterInstance, stream: Stream) -> list[Continuous]:
    """The stream's continuous runs the instance holds as active, oldest first."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(job_name=stream.named(CONTINUOUS_JOB), statuses=ACTIVE)
    )
    found = [Continuous(r.dagster_run, r.create_timestamp.timestamp()) for r in records]
    return sorted(found, key=lambda c: c.created)


def live_runs(
    instance: dg.DagsterInstance, stream: Stream, now: float, log: logging.Logger | None
) -> list[Continuous]:
    """The stream's live continuous runs; the dead ones are marked failed on the way."""
    alive = []
    for found in active_runs(instance, stream):
        why = found.dead(now)
        if why is None:
            alive.append(found)
            continue
        instance.add_run_tags(found.run.run_id, {DEAD: why})
        instance.report_run_failed(found.run)
        if log is not None:
            log.warning(f"continuous run {found.run.run_id[:8]} marked failed: {why}")
    return alive


def stall_cause(instance: dg.DagsterInstance, stream: Stream, now: float) -> str | None:
    """The live continuous run that made no batch for ``STALL_AFTER_S`` (None: none is)."""
    for found in active_runs(instance, stream):
        if found.dead(now) is not None or found.run.status != dg.DagsterRunStatus.STARTED:
            continue
        since = found.tag(LAST_BATCH) or found.created
        if now - since > STALL_AFTER_S:
            return (
                f"{found.describe(now)} but records are pending: it is stuck; its run log "
                "says in which step"
            )
    return None


def keeper_sensor(stream: Stream, job: dg.JobDefinition) -> dg.SensorDefinition:
    """``<stream>_keep_continuous_run``: exactly one continuous run of the stream alive."""

    @dg.sensor(
        name=stream.named(KEEPER),
        job=job,
        minimum_interval_seconds=1,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Keeps exactly one run of {job.name} alive: starts one when none of "
        "the stream's is active, marks a run whose process died failed and replaces it.",
    )
    def keep_continuous_run(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        now = time.time()
        alive = live_runs(context.instance, stream, now, context.log)
        if alive:
            reason = alive[0].describe(now)
            if len(alive) > 1:
                reason += f"; {len(alive) - 1} more started by hand"
            return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=context.cursor)
        failed = _failed_recently(context.instance, stream, now)
        if failed is not None:
            return dg.SensorResult(skip_reason=dg.SkipReason(failed), cursor=context.cursor)
        launched = int(context.cursor or 0) + 1
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=f"{stream.name}-continuous-{launched}-{now:.0f}",
                    tags={STREAM_TAG: stream.name, "eos/trigger": "keeper"},
                )
            ],
            cursor=str(launched),
        )

    return keep_continuous_run


def _failed_recently(instance: dg.DagsterInstance, stream: Stream, now: float) -> str | None:
    """Why the next run waits: the stream's last continuous run failed (not found dead) less
    than ``RETRY_AFTER_S`` ago; None: start it now."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(job_name=stream.named(CONTINUOUS_JOB)), limit=1
    )
    if not records:
        return None
    last = records[0]
    if last.dagster_run.status != dg.DagsterRunStatus.FAILURE or DEAD in last.dagster_run.tags:
        return None
    ended = last.end_time or last.create_timestamp.timestamp()
    if now - ended >= RETRY_AFTER_S:
        return None
    return (
        f"continuous run {last.dagster_run.run_id[:8]} failed {now - ended:.0f} s ago (its log "
        f"says why): the next one starts {RETRY_AFTER_S:.0f} s after it"
    )


def rest_request(context: dg.SensorEvaluationContext, stream: Stream) -> dg.RunRequest | None:
    """A run of the stream's assets the continuous run does not materialize (the publishers),
    once per silver/events materialization (its time is the run key); None when silver has
    none yet, the graph lacks them, or a blocking check of the path did not pass its latest
    evaluation (what follows would read the table it failed on, as
    ``all_deps_blocking_checks_passed`` keeps it from in sensor mode)."""
    repository = context.repository_def
    latest = context.instance.get_latest_materialization_event(stream.events)
    if repository is None or latest is None or not blocking_checks_passed(context.instance, stream):
        return None
    graph = repository.asset_graph
    rest = stream_selection(stream) - dg.AssetSelection.assets(*stream.loop_keys)
    assets = sorted(rest.resolve(graph))
    if not assets:
        return None
    return dg.RunRequest(
        run_key=f"{stream.name}-rest-{latest.timestamp:.6f}",
        tags={STREAM_TAG: stream.name, "eos/trigger": "continuous", "eos/path": "rest"},
        asset_selection=assets,
        asset_check_keys=sorted(rest.resolve_checks(graph)),
    )


def blocking_checks_passed(instance: dg.DagsterInstance, stream: Stream) -> bool:
    """Whether the latest evaluations of the continuous path's blocking checks both passed."""
    keys = (
        dg.AssetCheckKey(stream.raw_events, OFFSETS_CONTIGUOUS),
        dg.AssetCheckKey(stream.events, EVENT_ID_UNIQUE),
    )
    for key in keys:
        records = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
        if not records or records[0].status.value != "SUCCEEDED":
            return False
    return True


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a zombie, killed and not reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
