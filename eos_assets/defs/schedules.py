"""Every schedule: the checks that read Kafka (every stream's), and the daily table maintenance."""

import dagster as dg

from eos_assets.defs.jobs import AUDIT_JOB, FRESHNESS_JOB, MAINTENANCE_JOB

freshness_schedule = dg.ScheduleDefinition(
    name="check_bronze_freshness_every_15_min",
    job_name=FRESHNESS_JOB,
    cron_schedule="*/15 * * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Every 15 minutes: is the oldest Kafka record not yet in bronze within "
    "EOS_FRESHNESS_MAX_AGE_S?",
)

audit_schedule = dg.ScheduleDefinition(
    name="audit_bronze_against_kafka_daily",
    job_name=AUDIT_JOB,
    cron_schedule="30 3 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Daily at 03:30: re-read the retained Kafka log and compare it with bronze "
    "(bounded by EOS_AUDIT_BUDGET_S; a partial audit warns, it never passes).",
)

maintenance_schedule = dg.ScheduleDefinition(
    name="maintain_delta_tables_daily",
    job_name=MAINTENANCE_JOB,
    cron_schedule="15 2 * * *",
    execution_timezone="UTC",
    description="Daily table maintenance at 02:15 UTC.",
)
