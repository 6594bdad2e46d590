"""Crash silver and gold at their named points (SIGKILL), re-run, compare with the oracle.

The crashing run lives in a process of its own (``derived_once``) with ``EOS_FAULT_CRASH_AT``
set; the re-run is an ordinary materialization. Nothing may be lost or counted twice.
"""

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets.lib import faults
from eos_assets.lib.derived import silver_events
from eos_assets.lib.derived.window_aggregates import AFTER_LATE_EVENTS
from eos_assets.lib.derived.windows import APP as WINDOWS_APP
from eos_assets.lib.revenue import kpi
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.support import graph
from eos_assets_tests.support.oracle import expected
from eos_assets_tests.support.orders import (
    EVENTS,
    KPI_DAILY,
    KPI_DAILY_CUSTOMERS,
    LATE_EVENTS,
    WINDOW_AGGREGATES,
    events,
    kpi_daily,
    kpi_window,
    raw_events,
    window_aggregates,
)

REPO = Path(__file__).resolve().parents[2]
START = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
WINDOW, GRACE = timedelta(minutes=1), timedelta(minutes=1)
MIX: dict[str, Any] = {
    "duplicate_ratio": 0.05,
    "late_ratio": 0.05,
    "abort_ratio": 0.15,
    "malformed_ratio": 0.03,
    "transaction_size": 100,
    "partitions": 3,
}


def crash_run(lake_root: str, warehouse: Path, point: str, *assets: str) -> int:
    """Materialize ``assets`` in a new process armed to die at ``point``; its return code."""
    cmd = [sys.executable, "-m", "eos_assets_tests.support.derived_once", "--lake", lake_root]
    cmd += ["--warehouse", str(warehouse), "--window-minutes", str(WINDOW.total_seconds() / 60)]
    cmd += ["--grace-minutes", str(GRACE.total_seconds() / 60)]
    for asset in assets:
        cmd += ["--asset", asset]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOS_FAULT_")}
    env[faults.CRASH_ENV] = point
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=240)
    finally:
        _reap(proc.pid)
    assert proc.returncode == -signal.SIGKILL, f"did not crash at {point}: {err[-2000:]}"
    return proc.returncode


def _reap(group: int) -> None:
    """SIGKILL what the crashed driver left (its Spark JVM) and wait until it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


class Stopped(Exception):
    """Raised at a fault point instead of dying (see the gold test)."""


def _stop_at(point: str, reached: str, pid: int | None = None) -> None:
    if reached == point:
        raise Stopped(point)


def batch(kafka_bootstrap: str, tmp_path: Path, number: int, **options: Any) -> list[dict]:
    path = tmp_path / f"batch-{number}.jsonl"
    produce(kafka_bootstrap, ProduceOptions(**{**MIX, **options}), path)
    return read_manifest(path)


def test_silver_crash_after_files_then_rerun_inserts_each_event_once(
    spark: SparkSession,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    lake_root: str,
    tmp_path: Path,
) -> None:
    topic = make_topic(partitions=3)
    warehouse = tmp_path / "serving.duckdb"
    res = graph.resources(kafka_bootstrap, topic, lake_root, warehouse)
    config = graph.window_config(1, 1)
    batches = [
        batch(kafka_bootstrap, tmp_path, 0, topic=topic, count=800, seed=5, start_time=START)
    ]
    graph.materialize([raw_events, events], res, config)
    batches.append(
        batch(kafka_bootstrap, tmp_path, 1, topic=topic, count=600, seed=5, start_time=START)
    )  # a restarted producer: all duplicates
    batches.append(
        batch(
            kafka_bootstrap,
            tmp_path,
            2,
            topic=topic,
            count=600,
            seed=6,
            start_time=START + timedelta(minutes=2),
        )
    )
    graph.materialize([raw_events], res, config)
    uri = LakeResource(root=lake_root).table_uri(*EVENTS.path)
    before = DeltaTable(uri).version()

    crash_run(lake_root, warehouse, silver_events.AFTER_FILES, "orders/silver/events")

    assert DeltaTable(uri).version() == before, "nothing may be committed before the crash"
    orphans = {p.name for p in Path(uri).rglob("*.parquet")} - {
        Path(u).name for u in DeltaTable(uri).file_uris()
    }
    assert orphans, "the crashed run wrote files (the crash point is after them)"
    result = graph.materialize([events], res, config)
    (mat,) = result.asset_materializations_for_node("orders__silver__events")
    assert mat.metadata["bronze_versions_consumed"].value == [2, 2]
    # Batches 1 and 2 reached bronze in one version: one batch for the oracle.
    graph.assert_silver(lake_root, expected([*batches[:1], batches[1] + batches[2]], WINDOW, GRACE))


def test_gold_crashes_between_commits_then_rerun_loses_and_doubles_nothing(
    spark: SparkSession,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    lake_root: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = make_topic(partitions=3)
    warehouse = tmp_path / "serving.duckdb"
    res = graph.resources(kafka_bootstrap, topic, lake_root, warehouse)
    config = graph.window_config(WINDOW.total_seconds() / 60, GRACE.total_seconds() / 60)
    batches = [
        batch(kafka_bootstrap, tmp_path, 0, topic=topic, count=800, seed=7, start_time=START)
    ]
    graph.materialize(graph.ALL, res, config)
    batches.append(
        batch(
            kafka_bootstrap,
            tmp_path,
            1,
            topic=topic,
            count=800,
            seed=8,
            start_time=START + timedelta(minutes=3),
            late_by=timedelta(minutes=5),
        )
    )
    graph.materialize([raw_events, events], res, config)
    lake = LakeResource(root=lake_root)

    # Killed after the late events commit, before the window aggregates do.
    crash_run(lake_root, warehouse, AFTER_LATE_EVENTS, "orders/gold/window_aggregates")
    late = DeltaTable(lake.table_uri(*LATE_EVENTS.path))
    assert late.transaction_version(WINDOWS_APP) == 2
    assert DeltaTable(lake.table_uri(*WINDOW_AGGREGATES.path)).transaction_version(WINDOWS_APP) == 1
    # Then stop right after the customer set commits, before the daily KPIs do (in process:
    # an exception at the point leaves the tables as a kill would, at no JVM start).
    monkeypatch.setattr(faults, "crash_point", functools.partial(_stop_at, kpi.AFTER_CUSTOMERS))
    stopped = dg.materialize(
        [window_aggregates, kpi_window, kpi_daily],
        resources=res,
        run_config=config,
        raise_on_error=False,
    )
    monkeypatch.undo()
    assert not stopped.success
    customers = DeltaTable(lake.table_uri(*KPI_DAILY_CUSTOMERS.path))
    assert customers.transaction_version(kpi.APP) == 2
    assert DeltaTable(lake.table_uri(*KPI_DAILY.path)).transaction_version(kpi.APP) == 1

    graph.materialize(graph.DERIVED, res, config)
    want = expected(batches, WINDOW, GRACE)
    assert want.late_events, "the scenario must produce late events"
    graph.assert_matches_oracle(lake_root, want, warehouse)
    before = graph.versions(lake_root)
    graph.materialize(graph.DERIVED, res, config)
    assert graph.versions(lake_root) == before
