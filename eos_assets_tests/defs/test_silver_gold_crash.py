"""Crash silver and gold at their named points (SIGKILL), re-run, compare with the oracle.

The crashing run lives in a process of its own (``derived_once``) with ``EOS_FAULT_CRASH_AT``
set; the re-run is an ordinary materialization. Nothing may be lost or counted twice.
"""

import functools
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from deltalake import DeltaTable

from eos_assets.lib import faults
from eos_assets.lib.derived import kpi_tables, silver_events
from eos_assets.lib.derived.window_aggregates import AFTER_LATE_EVENTS
from eos_assets.lib.derived.windows import APP as WINDOWS_APP
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.faults.harness import Run, fault_env, finish, spawn
from eos_assets_tests.support import graph
from eos_assets_tests.support.graph_run import OrdersGraph
from eos_assets_tests.support.oracle import expected
from eos_assets_tests.support.orders import (
    EVENTS,
    KPI_DAILY_DISTINCT,
    KPI_WINDOW,
    KPI_WINDOW_DISTINCT,
    LATE_EVENTS,
    WINDOW_AGGREGATES,
    events,
    raw_events,
    window_aggregates,
)
from eos_assets_tests.support.orders import (
    kpi_tables as kpi_assets,
)

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


def crash_run(lake_root: str, warehouse: Path, point: str, *assets: str) -> Run:
    """Materialize ``assets`` in a new process armed to die at ``point``; what the crashed
    driver left (its Spark JVM) is killed at once."""
    cmd = [sys.executable, "-m", "eos_assets_tests.support.derived_once", "--lake", lake_root]
    cmd += ["--warehouse", str(warehouse), "--window-minutes", str(WINDOW.total_seconds() / 60)]
    cmd += ["--grace-minutes", str(GRACE.total_seconds() / 60)]
    for asset in assets:
        cmd += ["--asset", asset]
    run = finish(spawn(cmd, fault_env(crash_at=point)), timeout=240, grace=0)
    assert run.killed, f"did not crash at {point}: {run.stderr[-2000:]}"
    return run


class Stopped(Exception):
    """Raised at a fault point instead of dying (see the gold test)."""


def _stop_at(point: str, reached: str, pid: int | None = None) -> None:
    if reached == point:
        raise Stopped(point)


def batch(orders_graph: OrdersGraph, number: int, **options: Any) -> list[dict]:
    """The manifest of one run of the producer, the fault mix under ``options``."""
    return orders_graph.send(f"batch-{number}", **{**MIX, **options})


def test_silver_crash_after_files_then_rerun_inserts_each_event_once(
    orders_graph: OrdersGraph,
) -> None:
    lake_root, warehouse = orders_graph.lake_root, orders_graph.warehouse
    config = graph.window_config(1, 1)
    batches = [batch(orders_graph, 0, count=800, seed=5, start_time=START)]
    orders_graph.materialize([raw_events, events], config)
    # A restarted producer: all duplicates.
    batches.append(batch(orders_graph, 1, count=600, seed=5, start_time=START))
    batches.append(
        batch(orders_graph, 2, count=600, seed=6, start_time=START + timedelta(minutes=2))
    )
    orders_graph.materialize([raw_events], config)
    uri = LakeResource(root=lake_root).table_uri(*EVENTS.path)
    before = DeltaTable(uri).version()

    crash_run(lake_root, warehouse, silver_events.AFTER_FILES, "orders/silver/events")

    assert DeltaTable(uri).version() == before, "nothing may be committed before the crash"
    orphans = {p.name for p in Path(uri).rglob("*.parquet")} - {
        Path(u).name for u in DeltaTable(uri).file_uris()
    }
    assert orphans, "the crashed run wrote files (the crash point is after them)"
    result = orders_graph.materialize([events], config)
    (mat,) = result.asset_materializations_for_node("orders__silver__events")
    assert mat.metadata["bronze_versions_consumed"].value == [2, 2]
    # Batches 1 and 2 reached bronze in one version: one batch for the oracle.
    graph.assert_silver(lake_root, expected([*batches[:1], batches[1] + batches[2]], WINDOW, GRACE))


def test_gold_crashes_between_commits_then_rerun_loses_and_doubles_nothing(
    orders_graph: OrdersGraph, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake_root, warehouse = orders_graph.lake_root, orders_graph.warehouse
    config = graph.window_config(WINDOW.total_seconds() / 60, GRACE.total_seconds() / 60)
    batches = [batch(orders_graph, 0, count=800, seed=7, start_time=START)]
    orders_graph.materialize(graph.ALL, config)
    late = {"start_time": START + timedelta(minutes=3), "late_by": timedelta(minutes=5)}
    batches.append(batch(orders_graph, 1, count=800, seed=8, **late))
    orders_graph.materialize([raw_events, events], config)
    lake = LakeResource(root=lake_root)

    # Killed after the late events commit, before the window aggregates do.
    crash_run(lake_root, warehouse, AFTER_LATE_EVENTS, "orders/gold/window_aggregates")
    late = DeltaTable(lake.table_uri(*LATE_EVENTS.path))
    assert late.transaction_version(WINDOWS_APP) == 2
    assert DeltaTable(lake.table_uri(*WINDOW_AGGREGATES.path)).transaction_version(WINDOWS_APP) == 1
    # Then stop right after kpi_window's distinct values commit, before its rows do (in
    # process: an exception at the point leaves the tables as a kill would, at no JVM start).
    stop = functools.partial(_stop_at, kpi_tables.AFTER_DISTINCT)
    monkeypatch.setattr(faults, "crash_point", stop)
    stopped = dg.materialize(
        [window_aggregates, kpi_assets],
        resources=orders_graph.resources,
        run_config=config,
        raise_on_error=False,
    )
    monkeypatch.undo()
    assert not stopped.success
    distinct = DeltaTable(lake.table_uri(*KPI_WINDOW_DISTINCT.path))
    assert distinct.transaction_version(kpi_tables.APP) == 2
    assert DeltaTable(lake.table_uri(*KPI_WINDOW.path)).transaction_version(kpi_tables.APP) == 1
    assert (
        DeltaTable(lake.table_uri(*KPI_DAILY_DISTINCT.path)).transaction_version(kpi_tables.APP)
        == 1
    ), "kpi_daily comes after kpi_window: the stop left it untouched"

    orders_graph.materialize(graph.DERIVED, config)
    want = expected(batches, WINDOW, GRACE)
    assert want.late_events, "the scenario must produce late events"
    graph.assert_matches_oracle(lake_root, want, warehouse)
    before = graph.versions(lake_root)
    orders_graph.materialize(graph.DERIVED, config)
    assert graph.versions(lake_root) == before
