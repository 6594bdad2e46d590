"""The one entry point: assembles the Definitions of every asset, job and resource."""

import dagster as dg

from eos_assets.defs import bronze, jobs
from eos_assets.resources import build_resources
from eos_assets.settings import Settings

defs = dg.Definitions(
    assets=dg.load_assets_from_modules([bronze]),
    jobs=[jobs.ingest_job, jobs.all_assets_job],
    resources=build_resources(Settings.from_env()),
)
