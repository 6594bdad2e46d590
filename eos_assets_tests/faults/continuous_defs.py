"""The product's definitions of the shipped orders stream declared ``mode: continuous``: its
continuous job with the resources the settings configure (``dagster job execute -m`` of this
module runs it as a deployment would, in a process of its own)."""

import dagster as dg

from eos_assets.declaration import read_declaration
from eos_assets.defs.continuous import continuous_job
from eos_assets.defs.stream import Stream
from eos_assets.resources import build_resources
from eos_assets.settings import Settings
from eos_assets.streams import declaration

MODEL = read_declaration(declaration("orders")).model_copy(update={"mode": "continuous"})

defs = dg.Definitions(
    jobs=[continuous_job(Stream.of(MODEL))],
    resources=build_resources(Settings.from_env()),
    executor=dg.in_process_executor,
)
