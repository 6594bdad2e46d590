"""How the graph runs by itself, besides the lag sensor (``defs/sensors.py``) for bronze.

Silver and gold follow bronze through declarative automation: an asset is requested when an
upstream asset was updated, nothing upstream is missing or in progress, and every blocking
check upstream (``offsets_contiguous`` on bronze, ``event_id_unique`` on silver/events) passed.
The checks that read Kafka run on schedules: a stopped ingest is exactly when freshness
matters.
"""

import dagster as dg

from eos_assets.defs.bronze import RAW_EVENTS
from eos_assets.defs.jobs import audit_job, freshness_job

FOLLOW_UPSTREAM = (
    dg.AutomationCondition.eager() & dg.AutomationCondition.all_deps_blocking_checks_passed()
).with_label("eager once upstream blocking checks passed")
# A check runs with its asset whenever the asset is requested, or after the asset was updated
# by a run that did not evaluate the check (jobs include their assets' checks, so a run of
# ingest_and_refresh leaves nothing to do here).
CHECK_WITH_ASSET = (
    dg.AutomationCondition.any_deps_updated().since(
        dg.AutomationCondition.newly_requested() | dg.AutomationCondition.newly_updated()
    )
    | dg.AutomationCondition.will_be_requested()
).with_label("with its asset")

downstream_sensor = dg.AutomationConditionSensorDefinition(
    "follow_bronze_downstream",
    target=dg.AssetSelection.assets(RAW_EVENTS).downstream(include_self=False),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Materializes silver and gold after bronze changes, once the blocking checks "
    "upstream passed.",
)

freshness_schedule = dg.ScheduleDefinition(
    name="check_bronze_freshness_every_15_min",
    job=freshness_job,
    cron_schedule="*/15 * * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Every 15 minutes: is the oldest Kafka record not yet in bronze within "
    "EOS_FRESHNESS_MAX_AGE_S?",
)

audit_schedule = dg.ScheduleDefinition(
    name="audit_bronze_against_kafka_daily",
    job=audit_job,
    cron_schedule="30 3 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Daily at 03:30: re-read the retained Kafka log and compare it with bronze "
    "(bounded by EOS_AUDIT_BUDGET_S; a partial audit warns, it never passes).",
)
