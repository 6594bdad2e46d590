"""``dg scaffold defs eos_assets.components.EventStream <stream>``: a declaration to start from.

The skeleton has a topic, an id field, a time field, one payload field, one window and one KPI,
each with a comment saying what it is; it loads as it is (its topic need not exist yet), so a
new stream starts from a file that works and changes one field at a time.
"""

import re

import dagster as dg

from eos_assets.declaration import DECLARATION, NAME

SKELETON = """\
# The stream {name}: Kafka events into Delta tables and DuckDB KPIs, exactly once.
# Written by `dg scaffold defs`; it loads as it is. Change each field to your events' shape
# (README, "Declared streams" and "Add a stream"), then `dg check defs` checks it and
# `eos-assets run --stream {name}` runs it.
type: eos_assets.components.EventStream

attributes:
  # Lower case, digits and _: it prefixes the stream's tables, assets, checks and jobs.
  name: {name}
  # The topics read (or topic_pattern: a regular expression over topic names, not both).
  topics: [{name}]
  # The JSON field holding each event's unique id: events are deduplicated by it.
  event_id:
    field: event_id
  # The JSON field holding the event time: iso8601, epoch_millis or epoch_seconds.
  event_time:
    field: event_time
    format: iso8601
  # The JSON fields kept as columns: string, long, double, boolean or timestamp. A record
  # without a valid required field is malformed (kept in bronze with the reason).
  payload:
    kind:
      type: string
      required: true
  # Event-time tumbling windows; events up to `grace` after a window ends still count.
  windows:
    size: 5m
    grace: 10m
    dimensions: [kind]
    measures:
      events: {{agg: count}}
  # KPI tables kept from the events batch by batch (a batch updates the rows it touches):
  # the period of a row (a duration such as 1h, or day), the string fields it is keyed by,
  # and measures: count, count_distinct (exact), sum, min or max, each with an optional
  # `when: {{field: value}}`, or a formula over the measures above it. A KPI may instead be
  # DuckDB SQL over window_aggregates and entity_state (`sql: SELECT ...`).
  kpis:
    events_per_hour:
      time: 1h
      by: [kind]
      measures:
        events: {{agg: count}}
  # The KPIs served in DuckDB, as {name}.<kpi>.
  serve: [events_per_hour]
"""


def stream_name(folder: str) -> str:
    """The stream name a folder gives: lower case, other characters as ``_``."""
    name = re.sub(r"[^a-z0-9_]", "_", folder.lower()).lstrip("_0123456789") or "events"
    return name if NAME.match(name) else name[:48]


class EventStreamScaffolder(dg.Scaffolder):
    """Writes ``<path>/defs.yaml``: a commented declaration that loads as it is."""

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        """Write the skeleton, named after the target folder."""
        request.target_path.mkdir(parents=True, exist_ok=True)
        target = request.target_path / DECLARATION
        target.write_text(SKELETON.format(name=stream_name(request.target_path.name)))
