"""KPI alerts of a stream with the order shape: rules on its final KPI windows
(``lib/revenue/alerts.py``), delivered over HTTP with an idempotency key, every attempt in a
Delta ledger (``lib/outbound/alert_notify.py``)."""

import dagster as dg
from deltalake.exceptions import TableNotFoundError

from eos_assets.defs.automation import check_with_asset
from eos_assets.defs.order_kpis import OrderKpiKeys
from eos_assets.defs.outbound import OUTBOUND_POOL, warn
from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.silver import run_or_fail
from eos_assets.defs.stream import OUTBOUND, Stream
from eos_assets.lib.errors import EosError
from eos_assets.lib.outbound import alert_ledger
from eos_assets.lib.outbound.alert_notify import stuck
from eos_assets.lib.revenue.alerts import notify
from eos_assets.resources.alerts import AlertsResource
from eos_assets.resources.lake import LakeResource

ALERTS_NOT_STUCK = "no_alert_stuck_in_flight"


def alert_assets(stream: Stream) -> tuple[dg.AssetsDefinition, dg.AssetChecksDefinition]:
    """``<stream>/outbound/kpi_alerts`` and its check: alerts on final KPI windows over HTTP."""
    keys = OrderKpiKeys.of(stream)

    @dg.asset(
        key=keys.kpi_alerts,
        deps=[keys.kpi_window, stream.window_aggregates],
        group_name=stream.group(OUTBOUND),
        kinds={"delta"},
        op_tags=AFTER_SERVING,
        pool=OUTBOUND_POOL,
    )
    def kpi_alerts(
        context: dg.AssetExecutionContext, lake: LakeResource, alerts: AlertsResource
    ) -> dg.MaterializeResult:
        """KPI alerts on final windows, delivered to EOS_ALERT_URL with an idempotency key.

        Rules and retries come from ``EOS_ALERT_*`` variables; the table is the delivery ledger
        (PENDING, SENDING, SUCCESS, FAILED, UNKNOWN per attempt). Without EOS_ALERT_URL the alerts
        are recorded as PENDING and nothing is delivered.
        """
        url = alerts.url
        policy = run_or_fail(alerts.policy)
        outcome = run_or_fail(
            lambda: notify(
                lake.table_uri(*keys.kpi_window.path),
                lake.table_uri(*stream.window_aggregates.path),
                lake.table_uri(*keys.kpi_alerts.path),
                url,
                policy,
                lake.storage_options,
            )
        )
        if not policy.rules():
            context.log.info("no alert rule is set (EOS_ALERT_REVENUE_MIN, ...): nothing to raise")
        if url is None:
            context.log.warning(
                "EOS_ALERT_URL is unset: alerts recorded as PENDING, none delivered"
            )
        if outcome.gave_up:
            context.log.warning(f"{len(outcome.gave_up)} alerts FAILED after their last attempt")
        return dg.MaterializeResult(
            metadata={
                "endpoint": url or "unset: nothing delivered",
                "rules": dg.MetadataValue.json([r.version for r in policy.rules()]),
                "alerts_raised": outcome.raised,
                "delivered": outcome.delivered,
                "confirmed_by_status": outcome.confirmed,
                "requests": outcome.requests,
                "rounds": outcome.rounds,
                "gave_up": dg.MetadataValue.json(outcome.gave_up),
                "ledger_states": dg.MetadataValue.json(outcome.states),
                "seconds": round(outcome.seconds, 3),
            }
        )

    @check_with_asset(
        keys.kpi_alerts,
        ALERTS_NOT_STUCK,
        "No alert has been SENDING or UNKNOWN for longer than EOS_ALERT_STUCK_AFTER_S (warns); "
        "alerts FAILED for good are counted.",
        op_tags=AFTER_SERVING,
    )
    def no_alert_stuck_in_flight(lake: LakeResource, alerts: AlertsResource) -> dg.AssetCheckResult:
        """Warn when deliveries stay unresolved: the endpoint cannot confirm them."""
        uri = lake.table_uri(*keys.kpi_alerts.path)
        try:
            policy = alerts.policy()
            states = alert_ledger.read_states(uri, lake.storage_options)
        except (EosError, OSError, TableNotFoundError) as exc:
            return warn(False, f"cannot read the alert ledger at {uri}: {exc}", {})
        late = stuck(states, policy.stuck_after_s)
        failed = sorted(a for a, s in states.items() if s.state == alert_ledger.FAILED)
        return warn(
            not late,
            f"{len(late)} alerts SENDING or UNKNOWN for over {policy.stuck_after_s:g}s; "
            f"{len(failed)} FAILED",
            {
                "stuck": dg.MetadataValue.json(sorted(s.alert_id for s in late)[:50]),
                "failed": dg.MetadataValue.json(failed[:50]),
                "alerts": len(states),
            },
        )

    return kpi_alerts, no_alert_stuck_in_flight
