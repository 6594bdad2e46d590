"""The outbound assets through Dagster, and their checks passing and failing for real."""

import shutil
import uuid
from pathlib import Path

import dagster as dg
import pytest

from eos_assets.lib.outbound import alert_ledger, alert_notify
from eos_assets.resources.alerts import AlertsResource
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.outbound.conftest import ENV, GoldLakes, run_outbound
from eos_assets_tests.outbound.endpoint import Endpoint
from eos_assets_tests.support.orders import (
    agg_out,
    caught_up_with_window_aggregates,
    kpi_alerts,
    no_alert_stuck_in_flight,
)


def materialize(asset: dg.AssetsDefinition, lake: Path, **resources: object) -> dict:
    result = dg.materialize(
        [asset],
        resources={"lake": LakeResource(root=str(lake)), **resources},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    (event,) = result.asset_materializations_for_node(asset.op.name)
    return {k: v.value for k, v in event.metadata.items()}


def check(definition: dg.AssetChecksDefinition, **resources: object) -> dg.AssetCheckResult:
    """Evaluate a check directly with real resources."""
    result = definition(**resources)
    assert isinstance(result, dg.AssetCheckResult)
    return result


def test_agg_out_check_fails_while_versions_wait_and_passes_once_published(
    gold_lakes: GoldLakes, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = gold_lakes.copy("early", tmp_path / "lake")
    monkeypatch.setenv("EOS_AGG_OUT_MAX_BEHIND", "0")
    kafka = KafkaResource(
        bootstrap_servers=kafka_bootstrap,
        topics=["orders"],
        agg_out_topic=f"agg-out-check-{uuid.uuid4().hex[:6]}-{{stream}}",
    )
    resources = {"lake": LakeResource(root=str(lake)), "kafka": kafka}
    never = check(caught_up_with_window_aggregates, **resources)
    assert not never.passed and never.severity == dg.AssetCheckSeverity.WARN
    # Overlapping runs take turns: a second publisher would fence the first.
    assert agg_out.op.pool == kpi_alerts.op.pool == "eos_outbound"
    first = materialize(agg_out, lake, kafka=kafka)
    assert first["records"] > 0 and first["topic"].endswith("-orders")
    assert check(caught_up_with_window_aggregates, **resources).passed
    gold_lakes.copy("final", lake)  # new versions, not published yet
    behind = check(caught_up_with_window_aggregates, **resources)
    assert not behind.passed and behind.metadata["versions_behind"].value
    monkeypatch.setenv("EOS_AGG_OUT_MAX_BEHIND", "5")
    assert check(caught_up_with_window_aggregates, **resources).passed
    monkeypatch.setenv("EOS_AGG_OUT_MAX_BEHIND", "0")
    second = materialize(agg_out, lake, kafka=kafka)
    assert second["versions_published"] and second["records"] > 0
    assert "OPTIMIZE" in second["versions_without_data_change"].values()
    assert check(caught_up_with_window_aggregates, **resources).passed


def test_alert_check_warns_about_a_delivery_left_in_flight_until_it_is_resolved(
    kpi_lake: Path,
    endpoint: Endpoint,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lake = shutil.copytree(kpi_lake, tmp_path / "lake")
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    recorded = materialize(kpi_alerts, lake, alerts=AlertsResource())
    assert recorded["endpoint"] == "unset: nothing delivered" and recorded["delivered"] == 0
    assert recorded["ledger_states"] == {"PENDING": recorded["alerts_raised"]} != {}
    resource = LakeResource(root=str(lake))
    unset = AlertsResource()
    assert check(no_alert_stuck_in_flight, lake=resource, alerts=unset).passed
    ledger = resource.table_uri("orders", "outbound", "kpi_alerts")
    args = ["notify", "--kpi", resource.table_uri("orders", "gold", "kpi_window")]
    args += ["--ledger", ledger, "--url", endpoint.url]
    killed = run_outbound(*args, crash_at=alert_notify.AFTER_SEND, env=ENV)
    assert killed.killed, killed.tail()
    monkeypatch.setenv("EOS_ALERT_STUCK_AFTER_S", "0.001")
    stuck = check(no_alert_stuck_in_flight, lake=resource, alerts=unset)
    assert not stuck.passed and stuck.severity == dg.AssetCheckSeverity.WARN
    assert stuck.metadata["stuck"].value == sorted(alert_ledger.read_states(ledger))
    delivered = materialize(kpi_alerts, lake, alerts=AlertsResource(url=endpoint.url))
    assert delivered["confirmed_by_status"] == 1
    assert delivered["ledger_states"] == {"SUCCESS": recorded["alerts_raised"]}
    assert check(no_alert_stuck_in_flight, lake=resource, alerts=unset).passed
    assert len(endpoint.applied) == recorded["alerts_raised"]
