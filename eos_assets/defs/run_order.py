"""The order of a stream's ingest runs: the hold between one run and the next, on both sides.

A stream's ``ingest_and_refresh`` run holds the way for the next one until it has committed the
stream's silver/events. The lag sensor launches the next run once that commit is there, or,
under a steady flow, ahead of it: the new run carries ``AFTER_TAG`` naming the run in progress,
and its ingest waits for that commit before it plans its offsets. Its process start (about 4 s
of Python, Dagster and the definitions) then overlaps the previous run's work instead of
following it. Every table's commit protocol lets two writers race safely (the later one
re-plans from the other's commit); the hold only keeps two runs from doing the same work.
"""

import time

import dagster as dg

from eos_assets.defs.jobs import STREAM_JOB

# Tag of a run launched ahead: the run whose silver/events commit its ingest waits for.
AFTER_TAG = "eos/after"
# How often a waiting ingest looks at the run it follows, and how long it waits at most before
# it goes on anyway (the commits stay safe; only work may be repeated).
WAIT_POLL_S = 0.2
WAIT_MAX_S = 300.0


def committed(instance: dg.DagsterInstance, run_id: str, key: dg.AssetKey) -> bool:
    """Whether run ``run_id`` has materialized ``key`` (its own events, not the latest ones)."""
    materialized = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
    ).records
    return any(
        (event := r.event_log_entry.dagster_event) is not None and event.asset_key == key
        for r in materialized
    )


def holds_the_way(
    instance: dg.DagsterInstance, run: dg.DagsterRun, released_by: dg.AssetKey
) -> bool:
    """Whether an active ingest run keeps the next one from planning its offsets.

    An ``ingest_and_refresh`` run stops holding the way once it has committed ``released_by``
    (the stream's silver/events); any other ingest run holds it until it ends.
    """
    return run.job_name != STREAM_JOB or not committed(instance, run.run_id, released_by)


def wait_for_release(
    instance: dg.DagsterInstance, run_id: str, released_by: dg.AssetKey
) -> tuple[float, bool]:
    """Wait until run ``run_id`` has committed ``released_by`` or is no longer active.

    Returns:
        The seconds waited, and whether the wait ended before ``WAIT_MAX_S``.
    """
    began = time.monotonic()
    while (waited := time.monotonic() - began) < WAIT_MAX_S:
        run = instance.get_run_by_id(run_id)
        if run is None or run.is_finished or committed(instance, run_id, released_by):
            return waited, True
        time.sleep(WAIT_POLL_S)
    return waited, False
