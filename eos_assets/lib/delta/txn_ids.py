"""Every Delta ``txn`` app id the product writes: the names of its exactly-once state.

A Delta table's ``txn`` actions map an app id to a number, committed atomically with the rows
they account for (DESIGN.md, "Positions live with the data"). These are all of them:

- bronze: ``eos:<topic>:<partition>`` -> the next Kafka offset to read (``partition_app``);
- every derived table: ``eos:upstream:<layer>/<table>`` -> the last upstream Delta version it
  consumed (``upstream_app``);
- ``gold/window_aggregates`` also keeps the windows' progress and their size, so that a rerun
  and a size change are judged from the table alone.

The keys of the commit metadata the product writes beside them live here too: the checks and
the increments read them back.
"""

from collections.abc import Mapping
from typing import Any

UPSTREAM_PREFIX = "eos:upstream:"
# Microseconds since the epoch: the max event time consumed, and the watermark.
MAX_EVENT_TIME = "eos:state:max_event_time_us"
WATERMARK = "eos:state:watermark_us"
# Seconds: the window size the table was built with (a size change is refused).
WINDOW_SIZE = "eos:config:window_size_s"


def partition_app(topic: str, partition: int) -> str:
    """The app id recording the next offset to read of one topic-partition (bronze)."""
    return f"eos:{topic}:{partition}"


def upstream_app(upstream_key: str) -> str:
    """The app id recording how far a table consumed ``upstream_key`` (``layer/table``)."""
    return f"{UPSTREAM_PREFIX}{upstream_key}"


FROM_BRONZE = upstream_app("bronze/raw_events")
FROM_SILVER = upstream_app("silver/events")


# Commit metadata (Delta commitInfo) keys.
OPERATION = "eos.operation"  # which step wrote the commit: INGEST, or a derived table's name
INGEST = "ingest"
RUN_ID = "eos.run_id"  # finds a run's own commit when its answer was lost
RANGES = "eos.ranges"  # bronze: the offset ranges the run read, one entry per partition range
LOST = "eos.lost"  # bronze: offsets Kafka deleted before they were read, accepted as lost
SKIPPED = "eos.skipped"  # bronze: retained offsets a declared start passed over
UPSTREAM = "eos.upstream"  # derived: the upstream table it read
UPSTREAM_VERSIONS = "eos.upstream_versions"  # derived: [first, last] upstream version consumed
# derived: what the rows reflect, one entry per table read: {"silver/events": {"version": 40,
# "bronze/raw_events": 37}}: the version read and the versions that table had consumed in turn
# (bronze's version holds the Kafka offsets in its txn actions).
LINEAGE = "eos.lineage"


def lineage(upstream: str, version: int, consumed: Mapping[str, int | None]) -> dict[str, Any]:
    """One entry of ``LINEAGE``: the table ``upstream`` read at ``version``, which had consumed
    the versions ``consumed`` (by ``txn`` app id) of its own upstream tables."""
    entry: dict[str, Any] = {"version": version}
    for app, done in consumed.items():
        if done is not None:
            entry[app.removeprefix(UPSTREAM_PREFIX)] = done
    return {upstream: entry}
