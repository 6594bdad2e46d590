"""The definitions the freshness bench's continuous stream runs: a shipped stream (orders, or
the page_views example when ``EOS_BENCH_STREAM`` says so) declared ``mode: continuous`` (its
continuous job and keeper sensor, the lag sensor, the shared jobs and resources), for
``dagster-daemon run -m eos_assets.bench.continuous_defs``."""

import os

import dagster as dg

from eos_assets import examples
from eos_assets.components import builtin
from eos_assets.declaration import read_declaration
from eos_assets.definitions import build_shared
from eos_assets.settings import Settings

STREAM_ENV = "EOS_BENCH_STREAM"
MODEL = read_declaration(examples.shipped(os.environ.get(STREAM_ENV, "orders"))).model_copy(
    update={"mode": "continuous"}
)

defs = dg.Definitions.merge(builtin.definitions(MODEL), build_shared([MODEL], Settings.from_env()))
