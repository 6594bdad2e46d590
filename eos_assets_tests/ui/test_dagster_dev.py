"""``dagster dev`` end to end: the lag sensor launches an ingest by itself and it succeeds."""

from eos_assets.lib.delta import delta_io
from eos_assets_tests.support.dagster_dev import SENSOR, ticks
from eos_assets_tests.ui.conftest import DagsterDev, SensorRun

CHECKS = """
query Checks($runId: ID!) {
  runOrError(runId: $runId) {
    ... on Run {
      stepStats { stepKey status startTime endTime }
      assetCheckEvaluations: eventConnection(afterCursor: null) {
        events { __typename ... on AssetCheckEvaluationEvent { evaluation { checkName success } } }
      }
    }
  }
}
"""

OBSERVATIONS = """
{
  assetOrError(assetKey: {path: ["orders", "bronze", "raw_events"]}) {
    ... on Asset {
      assetObservations(limit: 50) {
        metadataEntries { label ... on IntMetadataEntry { intValue } }
      }
    }
  }
}
"""


def test_the_lag_sensor_launches_an_ingest_run_that_succeeds(
    dagster_dev: DagsterDev, sensor_run: SensorRun
) -> None:
    assert (sensor_run.job_name, sensor_run.status) == ("ingest_and_refresh", "SUCCESS")
    assert sensor_run.tags["dagster/sensor_name"] == SENSOR
    assert sensor_run.tags["dagster/run_key"].startswith("ingest-")
    assert sensor_run.tags["eos/trigger"] == "lag"

    run = dagster_dev.graphql(CHECKS, {"runId": sensor_run.run_id})["runOrError"]
    steps = {s["stepKey"]: s["status"] for s in run["stepStats"]}
    # One run from Kafka to the served KPIs: bronze, its two per-run checks, then every
    # asset downstream, all in the same run.
    assert {k: v for k, v in steps.items() if k.startswith("orders__bronze__")} == {
        "orders__bronze__raw_events": "SUCCESS",
        "orders__bronze__raw_events_offsets_contiguous": "SUCCESS",
        "orders__bronze__raw_events_malformed_rate_below_threshold": "SUCCESS",
    }
    silver_gold = {
        "orders__silver__events",
        "orders__silver__entity_state",
        "orders__gold__window_aggregates",
        "orders__gold__kpis",
    }
    assert silver_gold | {"orders__serving__kpis", "orders__outbound__agg_out"} <= steps.keys()
    assert set(steps.values()) == {"SUCCESS"}
    # The path to the served KPIs runs first; the rest of the graph yields to it.
    times = {s["stepKey"]: (s["startTime"], s["endTime"]) for s in run["stepStats"]}
    served = times["orders__serving__kpis"][1]
    for later in (
        "orders__bronze__raw_events_malformed_rate_below_threshold",
        "orders__silver__entity_state",
        "orders__gold__window_aggregates",
        "orders__outbound__agg_out",
    ):
        assert times[later][0] >= served, (later, times)
    checks = {
        e["evaluation"]["checkName"]: e["evaluation"]["success"]
        for e in run["assetCheckEvaluations"]["events"]
        if e["__typename"] == "AssetCheckEvaluationEvent"
    }
    assert checks["offsets_contiguous"] and checks["malformed_rate_below_threshold"]
    assert checks["event_id_unique"] and all(checks.values()), checks

    table = delta_io.read_arrow(str(dagster_dev.lake_root / "orders" / "bronze" / "raw_events"))
    sent = {(p, o) for batch in dagster_dev.sent for p, o, _, _ in batch.records}
    got = set(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))
    assert got == sent and table.num_rows == 40

    asset = dagster_dev.graphql(OBSERVATIONS)["assetOrError"]
    totals = [
        e.get("intValue")
        for obs in asset["assetObservations"]
        for e in obs["metadataEntries"]
        if e["label"] == "lag_total"
    ]
    assert 42 in totals  # 40 records + one commit marker per partition, seen by a sensor tick


def test_before_the_topic_exists_the_lag_sensor_skips_with_the_reason_then_runs(
    dagster_dev: DagsterDev, sensor_run: SensorRun
) -> None:
    # Between `make ui` and the first produce: every tick skipped with the reason, none failed.
    waiting = f"waiting for topic {dagster_dev.topic!r} to be created"
    assert dagster_dev.waiting_ticks, "no tick before the topic was created"
    for tick in dagster_dev.waiting_ticks:
        assert tick["status"] == "SKIPPED" and tick["error"] is None, tick
        assert (tick["skipReason"] or "").startswith(waiting), tick
    # Then the topic appeared: the same sensor, never restarted, launched the ingest.
    assert sensor_run.status == "SUCCESS"
    assert "FAILURE" not in {t["status"] for t in ticks(dagster_dev)}
