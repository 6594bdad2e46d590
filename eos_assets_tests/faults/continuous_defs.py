"""The product's definitions of one shipped stream declared ``mode: continuous`` (``orders``,
or the ``page_views`` example when ``EOS_TEST_STREAM`` says so): its continuous job with the
resources the settings configure (``dagster job execute -m`` of this module runs it as a
deployment would, in a process of its own)."""

import os

import dagster as dg

from eos_assets import examples
from eos_assets.declaration import read_declaration
from eos_assets.defs.continuous import continuous_job
from eos_assets.defs.stream import Stream
from eos_assets.resources import build_resources
from eos_assets.settings import Settings

STREAM_ENV = "EOS_TEST_STREAM"
MODEL = read_declaration(examples.shipped(os.environ.get(STREAM_ENV, "orders"))).model_copy(
    update={"mode": "continuous"}
)

defs = dg.Definitions(
    jobs=[continuous_job(Stream.of(MODEL))],
    resources=build_resources(Settings.from_env()),
    executor=dg.in_process_executor,
)
