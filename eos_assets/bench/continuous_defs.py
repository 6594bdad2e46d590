"""The definitions the freshness bench's continuous stream runs: the shipped orders stream
declared ``mode: continuous`` (its continuous job and keeper sensor, the lag sensor, the
shared jobs and resources), for ``dagster-daemon run -m eos_assets.bench.continuous_defs``."""

import dagster as dg

from eos_assets.components import builtin
from eos_assets.declaration import read_declaration
from eos_assets.definitions import build_shared
from eos_assets.settings import Settings
from eos_assets.streams import declaration

MODEL = read_declaration(declaration("orders")).model_copy(update={"mode": "continuous"})

defs = dg.Definitions.merge(builtin.definitions(MODEL), build_shared([MODEL], Settings.from_env()))
