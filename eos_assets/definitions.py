"""The one entry point: the declared streams (``eos_assets/streams/``, one ``EventStream``
component each) with their assets, checks, jobs, sensors and schedules, and the resources."""

from pathlib import Path

import dagster as dg

import eos_assets.streams
from eos_assets.components.event_stream import load_streams
from eos_assets.declaration import StreamModel
from eos_assets.resources import build_resources
from eos_assets.settings import Settings


def _definitions() -> tuple[dg.Definitions, list[StreamModel]]:
    declared, streams = load_streams(eos_assets.streams, Path(__file__).parent.parent)
    shared = dg.Definitions(
        resources=build_resources(Settings.from_env(), streams[0].topics),
        # Every step of a run shares the run's one SparkSession: a process per step would start
        # a JVM per step (seconds each), which dominates small incremental runs.
        executor=dg.in_process_executor,
    )
    return dg.Definitions.merge(declared, shared), streams


defs, streams = _definitions()
