"""Outbound paths: window revisions to Kafka exactly once, KPI alerts over HTTP at least once.

``outbound/agg_out`` publishes every new revision of ``gold/window_aggregates`` to the topic
``EOS_AGG_OUT_TOPIC`` in Kafka transactions that also carry the publisher's position
(``eos_assets/lib/outbound_publish.py``). ``outbound/kpi_alerts`` raises alerts on final KPI
windows and delivers them to ``EOS_ALERT_URL`` with an idempotency key, recording every attempt
in its Delta ledger (``eos_assets/lib/alert_notify.py``).
"""

import dagster as dg
from deltalake.exceptions import TableNotFoundError
from pydantic import Field

from eos_assets.defs.automation import CHECK_WITH_ASSET
from eos_assets.defs.gold import KPI_WINDOW, WINDOW_AGGREGATES
from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.silver import run_or_fail
from eos_assets.lib import alert_ledger, outbound_publish
from eos_assets.lib.alert_notify import notify, stuck
from eos_assets.lib.errors import EosError
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets.settings import Settings, read_agg_out_max_behind, read_alert_policy

AGG_OUT = dg.AssetKey(["outbound", "agg_out"])
KPI_ALERTS = dg.AssetKey(["outbound", "kpi_alerts"])
# One publisher at a time: runs may overlap (the lag sensor launches the next ingest once a
# run has served its KPIs), and a second agg_out run would fence the first one (both have the
# same transactional.id), failing it.
OUTBOUND_POOL = "eos_outbound"
AGG_OUT_CAUGHT_UP = "caught_up_with_window_aggregates"
ALERTS_NOT_STUCK = "no_alert_stuck_in_flight"
AGG_OUT_CAUGHT_UP_KEY = dg.AssetCheckKey(AGG_OUT, AGG_OUT_CAUGHT_UP)
ALERTS_NOT_STUCK_KEY = dg.AssetCheckKey(KPI_ALERTS, ALERTS_NOT_STUCK)


class AggOutConfig(dg.Config):
    """Publication of window revisions."""

    partitions: int = Field(default=3, ge=1, description="Partitions of a topic it creates.")
    max_records_per_transaction: int = Field(
        default=10_000, ge=1, description="Records per Kafka transaction (whole versions)."
    )


@dg.asset(
    key=AGG_OUT,
    deps=[WINDOW_AGGREGATES],
    group_name="outbound",
    kinds={"kafka", "delta"},
    op_tags=AFTER_SERVING,
    pool=OUTBOUND_POOL,
)
def agg_out(config: AggOutConfig, lake: LakeResource, kafka: KafkaResource) -> dg.MaterializeResult:
    """Every new window revision of gold/window_aggregates in Kafka (EOS_AGG_OUT_TOPIC), once.

    Records and the publisher's position (last Delta version published, in the topic
    ``<topic>.position``) are committed in one Kafka transaction under one stable
    transactional.id per table and topic, so a new run fences a crashed or hung one; read with
    read_committed.
    """
    topic = Settings.from_env().agg_out_topic
    outcome = run_or_fail(
        lambda: outbound_publish.publish_windows(
            lake.table_uri(*WINDOW_AGGREGATES.path),
            kafka.client_config(),
            topic,
            config.partitions,
            config.max_records_per_transaction,
            lake.storage_options,
        )
    )
    return dg.MaterializeResult(
        metadata={
            "topic": topic,
            "table_version": outcome.table_version,
            "versions_published": dg.MetadataValue.json(
                [outcome.first_version, outcome.last_version] if outcome.records else []
            ),
            "records": outcome.records,
            "transactions": outcome.transactions,
            "versions_without_data_change": dg.MetadataValue.json(
                {str(k): v for k, v in outcome.skipped_versions.items()}
            ),
            "transactional_id": outcome.transactional_id,
            "seconds": round(outcome.seconds, 3),
        }
    )


@dg.asset(
    key=KPI_ALERTS,
    deps=[KPI_WINDOW, WINDOW_AGGREGATES],
    group_name="outbound",
    kinds={"delta"},
    op_tags=AFTER_SERVING,
    pool=OUTBOUND_POOL,
)
def kpi_alerts(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """KPI alerts on final windows, delivered to EOS_ALERT_URL with an idempotency key.

    Rules and retries come from ``EOS_ALERT_*`` variables; the table is the delivery ledger
    (PENDING, SENDING, SUCCESS, FAILED, UNKNOWN per attempt). Without EOS_ALERT_URL the alerts
    are recorded as PENDING and nothing is delivered.
    """
    url = Settings.from_env().alert_url
    policy = run_or_fail(read_alert_policy)
    outcome = run_or_fail(
        lambda: notify(
            lake.table_uri(*KPI_WINDOW.path),
            lake.table_uri(*WINDOW_AGGREGATES.path),
            lake.table_uri(*KPI_ALERTS.path),
            url,
            policy,
            lake.storage_options,
        )
    )
    if not policy.rules():
        context.log.info("no alert rule is set (EOS_ALERT_REVENUE_MIN, ...): nothing to raise")
    if url is None:
        context.log.warning("EOS_ALERT_URL is unset: alerts recorded as PENDING, none delivered")
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


@dg.asset_check(
    asset=AGG_OUT,
    op_tags=AFTER_SERVING,
    name=AGG_OUT_CAUGHT_UP,
    automation_condition=CHECK_WITH_ASSET,
    description="The committed position of the agg-out publisher is at most "
    "EOS_AGG_OUT_MAX_BEHIND data-changing versions behind gold/window_aggregates (warns).",
)
def caught_up_with_window_aggregates(
    lake: LakeResource, kafka: KafkaResource
) -> dg.AssetCheckResult:
    """Warn when window revisions wait too long to reach Kafka."""
    topic = Settings.from_env().agg_out_topic
    try:
        limit = read_agg_out_max_behind()
        lag = outbound_publish.lag(
            lake.table_uri(*WINDOW_AGGREGATES.path),
            kafka.client_config(),
            topic,
            lake.storage_options,
        )
    except (EosError, OSError, TableNotFoundError) as exc:
        return _warn(False, f"cannot compare agg-out with the table: {exc}", {})
    passed = len(lag.behind) <= limit
    return _warn(
        passed,
        f"{len(lag.behind)} data-changing versions not published to {topic} (limit {limit})",
        {
            "published_version": lag.published,
            "table_version": lag.current,
            "versions_behind": dg.MetadataValue.json(lag.behind[:50]),
        },
    )


@dg.asset_check(
    asset=KPI_ALERTS,
    op_tags=AFTER_SERVING,
    name=ALERTS_NOT_STUCK,
    automation_condition=CHECK_WITH_ASSET,
    description="No alert has been SENDING or UNKNOWN for longer than EOS_ALERT_STUCK_AFTER_S "
    "(warns); alerts FAILED for good are counted.",
)
def no_alert_stuck_in_flight(lake: LakeResource) -> dg.AssetCheckResult:
    """Warn when deliveries stay unresolved: the endpoint cannot confirm them."""
    uri = lake.table_uri(*KPI_ALERTS.path)
    try:
        policy = read_alert_policy()
        states = alert_ledger.read_states(uri, lake.storage_options)
    except (EosError, OSError, TableNotFoundError) as exc:
        return _warn(False, f"cannot read the alert ledger at {uri}: {exc}", {})
    late = stuck(states, policy.stuck_after_s)
    failed = sorted(a for a, s in states.items() if s.state == alert_ledger.FAILED)
    return _warn(
        not late,
        f"{len(late)} alerts SENDING or UNKNOWN for over {policy.stuck_after_s:g}s; "
        f"{len(failed)} FAILED",
        {
            "stuck": dg.MetadataValue.json(sorted(s.alert_id for s in late)[:50]),
            "failed": dg.MetadataValue.json(failed[:50]),
            "alerts": len(states),
        },
    )


def _warn(passed: bool, description: str, metadata: dict) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=passed,
        description=description,
        metadata=metadata,
        severity=dg.AssetCheckSeverity.WARN,
    )
