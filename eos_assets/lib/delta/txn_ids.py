"""Every Delta ``txn`` app id the product writes: the names of its exactly-once state.

A Delta table's ``txn`` actions map an app id to a number, committed atomically with the rows
they account for (DESIGN.md, "Positions live with the data"). These are all of them:

- bronze: ``eos:<topic>:<partition>`` -> the next Kafka offset to read (``partition_app``);
- every derived table: ``eos:upstream:<layer>/<table>`` -> the last upstream Delta version it
  consumed (``upstream_app``);
- ``gold/window_aggregates`` also keeps the windows' progress and their size, so that a rerun
  and a size change are judged from the table alone.
"""

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
