"""A run launched ahead waits for the run before it, on a real Dagster instance."""

import threading
import time

import dagster as dg
import pytest

from eos_assets.defs import run_order
from eos_assets.defs.run_order import holds_the_way, wait_for_release
from eos_assets_tests.support.lag_ticker import materialized_in, started
from eos_assets_tests.support.orders import EVENTS, RAW_EVENTS, ingest_job, stream_job


def test_the_wait_ends_at_the_silver_commit_of_the_run_before() -> None:
    instance = dg.DagsterInstance.ephemeral()
    before = started(instance, stream_job.name)
    materialized_in(instance, before, RAW_EVENTS)
    assert holds_the_way(instance, before, EVENTS)
    timer = threading.Timer(0.6, materialized_in, (instance, before, EVENTS))
    timer.start()
    waited, released = wait_for_release(instance, before.run_id, EVENTS)
    timer.join()
    assert released and 0.5 <= waited < 30
    assert not holds_the_way(instance, before, EVENTS)
    # A plain ingest holds the way until it ends, whatever it commits.
    ingesting = started(instance, ingest_job.name)
    materialized_in(instance, ingesting, EVENTS)
    assert holds_the_way(instance, ingesting, EVENTS)


def test_a_run_that_ended_without_the_commit_ends_the_wait_and_a_stuck_one_times_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    instance = dg.DagsterInstance.ephemeral()
    failed = started(instance, stream_job.name)
    instance.report_run_failed(failed)
    assert wait_for_release(instance, failed.run_id, EVENTS) == (pytest.approx(0, abs=1), True)

    stuck = started(instance, stream_job.name)
    monkeypatch.setattr(run_order, "WAIT_MAX_S", 0.5)
    began = time.monotonic()
    waited, released = wait_for_release(instance, stuck.run_id, EVENTS)
    assert not released and 0.5 <= waited <= time.monotonic() - began
