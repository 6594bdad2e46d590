"""The ``EventStream`` component: an event stream declared in YAML (``eos_assets/streams/``)."""

from eos_assets.components.event_stream import EventStream

__all__ = ["EventStream"]
