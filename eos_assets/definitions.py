"""The one entry point: assembles the Definitions of every asset, check, job, sensor, schedule
and resource."""

import dagster as dg

from eos_assets.defs import (
    automation,
    bronze,
    checks,
    derived_checks,
    gold,
    jobs,
    outbound,
    schedules,
    sensors,
    silver,
)
from eos_assets.resources import build_resources
from eos_assets.settings import Settings

defs = dg.Definitions(
    assets=[
        *dg.load_assets_from_modules([bronze]),
        *dg.load_assets_from_modules(
            [silver, gold, outbound], automation_condition=automation.FOLLOW_UPSTREAM
        ),
    ],
    asset_checks=dg.load_asset_checks_from_modules([checks, derived_checks, outbound]),
    jobs=[
        jobs.ingest_job,
        jobs.stream_job,
        jobs.refresh_job,
        jobs.all_assets_job,
        jobs.freshness_job,
        jobs.audit_job,
        jobs.outbound_job,
        schedules.maintenance_job,
    ],
    sensors=[sensors.ingest_on_kafka_lag, automation.downstream_sensor],
    schedules=[
        automation.freshness_schedule,
        automation.audit_schedule,
        schedules.maintenance_schedule,
    ],
    resources=build_resources(Settings.from_env()),
    # Every step of a run shares the run's one SparkSession: a process per step would start a
    # JVM per step (seconds each), which dominates small incremental runs.
    executor=dg.in_process_executor,
)
