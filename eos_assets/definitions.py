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
            [silver, gold], automation_condition=automation.FOLLOW_UPSTREAM
        ),
    ],
    asset_checks=dg.load_asset_checks_from_modules([checks, derived_checks]),
    jobs=[
        jobs.ingest_job,
        jobs.refresh_job,
        jobs.all_assets_job,
        jobs.freshness_job,
        jobs.audit_job,
        schedules.maintenance_job,
    ],
    sensors=[sensors.ingest_on_kafka_lag, automation.downstream_sensor],
    schedules=[
        automation.freshness_schedule,
        automation.audit_schedule,
        schedules.maintenance_schedule,
    ],
    resources=build_resources(Settings.from_env()),
)
