"""A continuous stream's run through a real Dagster instance: micro-batches logged as
materializations and blocking check evaluations, its bounded end, and the next run going on
where the tables say; the tables of its path (silver, the KPI tables and DuckDB's copy, the
entity state, the windows and the SQL KPIs) equal the oracle's."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from eos_assets.declaration import read_declaration
from eos_assets.defs.continuous import (
    BATCHES,
    CONTINUOUS_JOB,
    HEARTBEAT,
    LAST_BATCH,
    PID,
    continuous_job,
)
from eos_assets.defs.stream import ORDERS, Stream
from eos_assets.demo_continuous import run_continuous_demo
from eos_assets.demo_options import DemoOptions
from eos_assets.devkit.manifest import read_manifest
from eos_assets.streams import declaration
from eos_assets_tests.support.continuous import assert_followed, assert_kpi_path
from eos_assets_tests.support.graph_run import OrdersGraph
from eos_assets_tests.support.oracle import expected
from eos_assets_tests.support.orders import (
    EVENT_ID_UNIQUE_KEY,
    EVENTS,
    KPI_DAILY,
    KPI_WINDOW,
    LATE_EVENTS,
    OFFSETS_CONTIGUOUS_KEY,
    ORDER_STATE,
    RAW_EVENTS,
    REVENUE_BY_HOUR,
    SERVING_KPI,
    SERVING_RECONCILE_KEY,
    SQL_SERVING,
    WINDOW_AGGREGATES,
    WINDOWS_RECONCILE_KEY,
)

START = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
# The loop keeps the windows at the declared size and grace.
WINDOW, GRACE = ORDERS.window.size, ORDERS.window.grace
MIX: dict[str, Any] = {
    "duplicate_ratio": 0.05, "late_ratio": 0.05, "abort_ratio": 0.2, "malformed_ratio": 0.05,
    "transaction_size": 100, "start_time": START, "partitions": 3,
}  # fmt: skip
JOB = f"orders_{CONTINUOUS_JOB}"


def continuous_defs(res: dict[str, Any]) -> dg.Definitions:
    """The shipped orders stream declared ``mode: continuous``, with real resources."""
    model = read_declaration(declaration("orders")).model_copy(update={"mode": "continuous"})
    job = continuous_job(Stream.of(model))
    return dg.Definitions(jobs=[job], resources=res, executor=dg.in_process_executor)


def run_config(**loop: Any) -> dict[str, Any]:
    config = {"poll_s": 0.2, "follow_every_s": 0.5, "checks_every_s": 0.0, **loop}
    return {"ops": {"orders_kpi_batches": {"config": config}}}


def events_of(
    instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType
) -> list[dg.EventLogEntry]:
    return list(instance.all_logs(run_id, of_type=kind))


def test_a_continuous_run_loops_batches_logs_them_and_ends_by_itself(
    orders_graph: OrdersGraph,
) -> None:
    lake_root, warehouse = orders_graph.lake_root, orders_graph.warehouse
    manifests = [orders_graph.send("first", count=600, seed=7, **MIX)]
    defs = continuous_defs(orders_graph.resources)
    job = defs.resolve_job_def(JOB)
    with dg.instance_for_test() as instance:
        # Bounded by batches: two of at most 450 offsets each (about 620 are pending).
        first = job.execute_in_process(
            run_config=run_config(max_offsets_per_batch=450, max_batches=2),
            instance=instance,
        )
        assert first.success
        assert first.output_for_node("orders_kpi_batches") == 2
        run_id = first.run_id
        done = events_of(instance, run_id, dg.DagsterEventType.ASSET_MATERIALIZATION)
        keys = [e.asset_materialization.asset_key for e in done if e.asset_materialization]
        for key in (RAW_EVENTS, EVENTS, KPI_WINDOW, KPI_DAILY, SERVING_KPI):
            assert keys.count(key) == 2, (key, keys)
        # The follow steps: at least once, at most once a batch.
        for key in (ORDER_STATE, WINDOW_AGGREGATES, LATE_EVENTS, REVENUE_BY_HOUR, SQL_SERVING):
            assert 1 <= keys.count(key) <= 2, (key, keys)
        bronze = [
            e.asset_materialization.metadata
            for e in done
            if e.asset_materialization and e.asset_materialization.asset_key == RAW_EVENTS
        ]
        versions = [int(m["delta_version"].value) for m in bronze]  # type: ignore[arg-type]
        assert versions == sorted(versions) and len(set(versions)) == 2
        assert all(m["ranges"].value for m in bronze)
        checks = events_of(instance, run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        evaluations = [e.dagster_event.event_specific_data for e in checks if e.dagster_event]
        named = [(v.asset_key, v.check_name, v.passed) for v in evaluations]  # type: ignore[union-attr]
        for key in (OFFSETS_CONTIGUOUS_KEY, EVENT_ID_UNIQUE_KEY):
            assert named.count((key.asset_key, key.name, True)) == 2, named
        # The checks that block nothing, evaluated by the follow steps once the KPIs are served
        sql_served = dg.AssetCheckKey(SQL_SERVING, SERVING_RECONCILE_KEY.name)
        for key in (WINDOWS_RECONCILE_KEY, SERVING_RECONCILE_KEY, sql_served):
            assert (key.asset_key, key.name, True) in named, named
            assert (key.asset_key, key.name, False) not in named, named
        # The check's page keeps one execution per run: the run's latest evaluation.
        history = instance.event_log_storage.get_asset_check_execution_history(
            OFFSETS_CONTIGUOUS_KEY, limit=10
        )
        assert [(h.run_id, h.status.value) for h in history] == [(run_id, "SUCCEEDED")]
        tags = instance.get_run_by_id(run_id).tags  # type: ignore[union-attr]
        assert tags[BATCHES] == "2" and tags[PID] and tags[HEARTBEAT] and tags[LAST_BATCH]
        assert_kpi_path(lake_root, expected(manifests, WINDOW, GRACE), warehouse)
        assert_followed(lake_root, expected(manifests, WINDOW, GRACE), warehouse)

        # Bounded by time: the next run takes what is pending, then idles until its end.
        manifests.append(orders_graph.send("second", count=100, seed=8, **MIX))
        second = job.execute_in_process(run_config=run_config(max_seconds=4.0), instance=instance)
        assert second.success
        assert second.output_for_node("orders_kpi_batches") == 1
        assert_kpi_path(lake_root, expected(manifests, WINDOW, GRACE), warehouse)
        assert_followed(lake_root, expected(manifests, WINDOW, GRACE), warehouse)


def test_the_continuous_demo_loops_beside_a_paced_producer_and_serves_every_event(
    spark: SparkSession,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``eos-assets demo --continuous``: the run ends by its bound, its batches are listed, and
    silver, the KPI tables and DuckDB hold what the producer committed."""
    topic = make_topic(partitions=3)
    home, lake, warehouse = tmp_path / "home", tmp_path / "lake", tmp_path / "serving.duckdb"
    home.mkdir()
    monkeypatch.delenv("EOS_SPARK_CONNECT", raising=False)  # the tests' session, in-process
    for name, value in {
        "DAGSTER_HOME": home, "EOS_KAFKA_BOOTSTRAP": kafka_bootstrap, "EOS_TOPICS": topic,
        "EOS_LAKE_ROOT": lake, "EOS_WAREHOUSE": warehouse, "EOS_STATE_DIR": tmp_path / "state",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, str(value))
    options = DemoOptions(count=0, partitions=3, seed=11, rate=300.0)
    summary = run_continuous_demo(options, seconds=2.0, drain_s=20.0)
    assert "of orders_continuous_kpis" in summary and "batch 1: " in summary, summary
    assert ", kpis " in summary and ", entity_state " in summary, summary
    (manifest,) = (tmp_path / "state" / "manifests").glob("demo-continuous-*.jsonl")
    size = timedelta(minutes=5)  # the loop's default window
    assert_kpi_path(str(lake), expected([read_manifest(manifest)], size, size), warehouse)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        assert run.job_name == JOB and run.status == dg.DagsterRunStatus.SUCCESS
        done = events_of(instance, run.run_id, dg.DagsterEventType.ASSET_MATERIALIZATION)
        assert {e.asset_materialization.asset_key for e in done if e.asset_materialization} >= {
            RAW_EVENTS, EVENTS, KPI_WINDOW, KPI_DAILY, SERVING_KPI,
        }  # fmt: skip
