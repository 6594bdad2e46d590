"""What the declared streams of one project share: the resources and the executor that every
stream's component binds, and the jobs, schedules and automation sensor over every stream.

``dg.Definitions.merge`` accepts a resource key (or an executor) bound by several definitions
only when each binds the same object: every component and the definitions over every stream
bind the objects of ``resources.shared_resources``, so two streams whose settings agree share
one Kafka, Spark and lake resource. A stream that declares its own Kafka, lake or warehouse
binds that resource under its own key as well (``kafka__<stream>``: ``declared_resources``),
which only its definitions name; two streams that declare them alike share the object.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from eos_assets.components import builtin
from eos_assets.declaration import StreamModel
from eos_assets.defs import jobs, schedules, sensors
from eos_assets.defs.stream import Stream
from eos_assets.lib.errors import ConfigError
from eos_assets.resources import own_resources, shared_resources
from eos_assets.settings import Settings


def runtime(settings: Settings) -> dg.Definitions:
    """The resources every stream's assets use, configured from ``settings``, and the executor.

    Every step of a run shares the run's one SparkSession: a process per step would start a JVM
    per step (seconds each), which dominates small incremental runs.
    """
    return dg.Definitions(resources=shared_resources(settings), executor=dg.in_process_executor)


def stream_runtime(model: StreamModel, settings: Settings) -> dg.Definitions:
    """``runtime(settings)`` with the resources the stream configures itself, under its own
    keys."""
    resources = {**shared_resources(settings), **own_resources(settings, model.name, model)}
    return dg.Definitions(resources=resources, executor=dg.in_process_executor)


def build_shared(models: Sequence[StreamModel], settings: Settings) -> dg.Definitions:
    """The jobs, schedules, automation sensor and resources over every declared stream, with
    each stream's lag sensor and the schedules of its checks that read Kafka (they launch
    those jobs).

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
    spanning = dg.Definitions(
        jobs=jobs.build_jobs(streams, tables),
        schedules=[
            schedules.maintenance_schedule,
            *(schedule for s in streams for schedule in schedules.stream_schedules(s)),
        ],
        sensors=[*sensors.downstream_sensor(streams), *(sensors.lag_sensor(s) for s in streams)],
    )
    return dg.Definitions.merge(
        spanning, *(stream_runtime(model, settings) for model in models), runtime(settings)
    )


def rebound(
    defs: dg.Definitions,
    resources: Mapping[str, Any] | None,
    executor: dg.ExecutorDefinition | None,
) -> dg.Definitions:
    """``defs`` with ``resources`` and ``executor`` in place of its own (``merge`` cannot
    replace a bound resource)."""
    return dg.Definitions(
        assets=defs.assets,
        schedules=defs.schedules,
        sensors=defs.sensors,
        jobs=defs.jobs,
        resources=resources,
        executor=executor,
        loggers=defs.loggers,
        asset_checks=defs.asset_checks,
        metadata=defs.metadata,
        component_tree=defs.component_tree,
    )
