"""Every schedule: each stream's checks that read Kafka, and the daily table maintenance.

A stream's schedules launch the shared check jobs with only that stream's check selected, so
each stream's freshness and audit runs, and its schedule can be turned off, on its own.
"""

import dagster as dg

from eos_assets.defs.checks import FRESHNESS, KAFKA_AUDIT
from eos_assets.defs.jobs import AUDIT_JOB, FRESHNESS_JOB, MAINTENANCE_JOB, STREAM_TAG
from eos_assets.defs.stream import Stream


def stream_schedules(stream: Stream) -> list[dg.ScheduleDefinition]:
    """``<stream>_check_bronze_freshness_every_15_min`` and ``<stream>_audit_bronze_daily``."""

    def check_of(name: str, job: str, cron: str, description: str) -> dg.ScheduleDefinition:
        key = dg.AssetCheckKey(stream.raw_events, name)

        @dg.schedule(
            name=stream.named(f"{job}_{_EVERY[cron]}"),
            job_name=job,
            cron_schedule=cron,
            execution_timezone="UTC",
            default_status=dg.DefaultScheduleStatus.RUNNING,
            description=description,
        )
        def check_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
            del context
            return dg.RunRequest(
                asset_selection=[], asset_check_keys=[key], tags={STREAM_TAG: stream.name}
            )

        return check_schedule

    return [
        check_of(
            FRESHNESS,
            FRESHNESS_JOB,
            "*/15 * * * *",
            f"Every 15 minutes: is the oldest Kafka record of {stream.name} not yet in bronze "
            "within its freshness threshold?",
        ),
        check_of(
            KAFKA_AUDIT,
            AUDIT_JOB,
            "30 3 * * *",
            f"Daily at 03:30 UTC: re-read {stream.name}'s retained Kafka log and compare it with "
            "bronze (bounded by EOS_AUDIT_BUDGET_S; a partial audit warns, it never passes).",
        ),
    ]


_EVERY = {"*/15 * * * *": "every_15_min", "30 3 * * *": "daily"}

maintenance_schedule = dg.ScheduleDefinition(
    name="maintain_delta_tables_daily",
    job_name=MAINTENANCE_JOB,
    cron_schedule="15 2 * * *",
    execution_timezone="UTC",
    description="Daily table maintenance at 02:15 UTC.",
)
