"""The one entry point: the declared streams (``eos_assets/streams/``, one ``EventStream``
component each) with their assets, checks and lag sensors; the jobs, schedules and automation
sensor over all of them; and the resources."""

from collections.abc import Sequence
from pathlib import Path

import dagster as dg

import eos_assets.streams
from eos_assets.components import builtin
from eos_assets.components.event_stream import load_streams
from eos_assets.declaration import StreamModel
from eos_assets.defs import jobs, schedules, sensors
from eos_assets.defs.stream import Stream
from eos_assets.lib.errors import ConfigError
from eos_assets.resources import build_resources
from eos_assets.settings import Settings


def build_shared(models: Sequence[StreamModel], settings: Settings) -> dg.Definitions:
    """The jobs, schedules, automation sensor and resources over every declared stream.

    Raises:
        ConfigError: ``EOS_TOPICS`` is set while several streams are declared.
    """
    if settings.topics_from_env and len(models) > 1:
        raise ConfigError(
            f"EOS_TOPICS names the topics of one stream and {len(models)} are declared: unset "
            "it and list each stream's topics in its defs.yaml"
        )
    streams = [Stream.of(model) for model in models]
    tables = [key for model in models for key in builtin.tables(model)]
    return dg.Definitions(
        jobs=jobs.build_jobs(streams, tables),
        schedules=[schedules.maintenance_schedule],
        sensors=[sensors.downstream_sensor(streams)],
        resources=build_resources(settings),
        # Every step of a run shares the run's one SparkSession: a process per step would start
        # a JVM per step (seconds each), which dominates small incremental runs.
        executor=dg.in_process_executor,
    )


def _definitions() -> tuple[dg.Definitions, list[StreamModel]]:
    declared, streams = load_streams(eos_assets.streams, Path(__file__).parent.parent)
    return dg.Definitions.merge(declared, build_shared(streams, Settings.from_env())), streams


defs, streams = _definitions()
