"""The ``EventStream`` component: an event stream declared in YAML (``eos_assets/streams/``),
and ``with_cross_stream``: what spans the streams of a project (its jobs, schedule, sensor)."""

from eos_assets.components.event_stream import EventStream, with_cross_stream

__all__ = ["EventStream", "with_cross_stream"]
