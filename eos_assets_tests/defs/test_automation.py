"""Declarative automation: silver and gold follow bronze only once its blocking check passed."""

import dagster as dg
import pytest

from eos_assets.definitions import defs
from eos_assets_tests.support.instance_runs import materialized_in, started_run
from eos_assets_tests.support.orders import (
    EVENT_ID_UNIQUE_KEY,
    EVENTS,
    OFFSETS_CONTIGUOUS,
    ORDER_STATE,
    RAW_EVENTS,
    SERVING_KPI,
    SERVING_RECONCILE_KEY,
    WINDOW_AGGREGATES,
    WINDOWS_RECONCILE_KEY,
    stream_job,
)

# Dagster's own condition tester uses a beta parameter internally; nothing here asks for it.
pytestmark = pytest.mark.filterwarnings("ignore:Parameter `include_sources`")


def requested(result: dg.EvaluateAutomationConditionsResult) -> set:
    return {r.key for r in result.results if r.true_subset.size}


def test_downstream_waits_for_the_blocking_check_of_bronze() -> None:
    instance = dg.DagsterInstance.ephemeral()
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert result.total_requested == 0  # bronze was never materialized

    def evaluate() -> set:
        nonlocal result
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=result.cursor
        )
        return requested(result)

    def check(passed: bool) -> None:
        instance.report_runless_asset_event(
            dg.AssetCheckEvaluation(
                asset_key=RAW_EVENTS, check_name=OFFSETS_CONTIGUOUS, passed=passed
            )
        )

    instance.report_runless_asset_event(dg.AssetMaterialization(RAW_EVENTS))
    assert evaluate() == set()  # the blocking check has not run for it yet
    check(passed=False)
    assert evaluate() == set()  # ... and failed: nothing downstream
    check(passed=True)
    # Everything downstream, in one run, with the checks of the derived tables; gold only
    # materializes if event_id_unique (blocking) passes within that run.
    want = {EVENTS, ORDER_STATE, WINDOW_AGGREGATES, SERVING_KPI}
    got = evaluate()
    assert want <= got
    assert {EVENT_ID_UNIQUE_KEY, WINDOWS_RECONCILE_KEY, SERVING_RECONCILE_KEY} <= got
    assert RAW_EVENTS not in got  # bronze is the lag sensor's
    assert evaluate() == set()  # requested once, not at every tick


def test_the_downstream_sensor_targets_silver_and_gold_only() -> None:
    sensor = defs.resolve_sensor_def("follow_bronze_downstream")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert (
        defs.resolve_sensor_def("orders_ingest_on_kafka_lag").default_status
        == dg.DefaultSensorStatus.RUNNING
    )
    blocking = {
        key.name
        for key in defs.resolve_asset_graph().asset_check_keys
        if defs.resolve_asset_graph().get_check_spec(key).blocking
    }
    assert blocking == {OFFSETS_CONTIGUOUS, EVENT_ID_UNIQUE_KEY.name}


def test_a_run_that_materialized_everything_with_its_checks_leaves_nothing_to_request() -> None:
    """What ``ingest_and_refresh`` (launched by the lag sensor) does: no second run follows."""
    instance = dg.DagsterInstance.ephemeral()
    graph = defs.resolve_asset_graph()
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance)

    def evaluate() -> set:
        nonlocal result
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=result.cursor
        )
        return requested(result)

    def materialize(key: dg.AssetKey, with_checks: bool) -> None:
        instance.report_runless_asset_event(dg.AssetMaterialization(key))
        for check in graph.asset_check_keys:
            if with_checks and check.asset_key == key:
                instance.report_runless_asset_event(
                    dg.AssetCheckEvaluation(asset_key=key, check_name=check.name, passed=True)
                )

    for key in graph.toposorted_asset_keys:
        materialize(key, with_checks=True)
    assert evaluate() == set()
    assert evaluate() == set()
    # An update made without its checks (a run of a job that left them out) gets them.
    materialize(EVENTS, with_checks=False)
    got = evaluate()
    assert EVENT_ID_UNIQUE_KEY in got and ORDER_STATE in got


@pytest.mark.parametrize("named", [True, False])
def test_a_tick_inside_a_lag_sensor_run_requests_no_check_that_run_will_evaluate(
    named: bool,
) -> None:
    """The lag sensor names the run's assets and checks, so a tick that falls between an update
    and its check in that run leaves the check to the run (without names, it would not)."""
    instance = dg.DagsterInstance.ephemeral()
    graph = defs.resolve_asset_graph()
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    selection = stream_job.selection
    assets, checks = selection.resolve(graph), selection.resolve_checks(graph)
    run = started_run(instance, "ingest_and_refresh", assets, checks if named else None)
    materialized_in(instance, run, RAW_EVENTS)
    instance.report_runless_asset_event(
        dg.AssetCheckEvaluation(asset_key=RAW_EVENTS, check_name=OFFSETS_CONTIGUOUS, passed=True)
    )
    materialized_in(instance, run, EVENTS)  # its check event_id_unique comes next in the run
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=result.cursor)
    if named:
        assert requested(result) == set()
    else:
        assert EVENT_ID_UNIQUE_KEY in requested(result)
