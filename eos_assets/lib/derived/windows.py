"""Event-time tumbling windows with a grace period: the rules, without Spark or Delta.

**Windows.** ``[start, start + size)`` aligned on the epoch (UTC), per value of the stream's
dimensions (``WindowShape.dimensions``: string payload fields; a missing value is ``""``, so
that a window's key never holds a null).

**Watermark and finality.** Arrival order is the bronze version that brought an event (a
silver row's ``bronze_version``), so results do not depend on how often the window asset runs.
After bronze version ``v`` the watermark is ``max(event_time of events up to v) - grace``,
never moving back (even when ``grace`` grows). A window is *final* once the watermark reaches
its end. An event is *late* when its window was already final before the event's bronze
version arrived: it is never lost, its window is recomputed (``revision`` + 1,
``late_events`` + 1) and the event is recorded (``window_aggregates.py``).

**Revisions.** ``revise`` turns fresh aggregates and the current rows into the rows to upsert:
``revision`` is 1 at first computation and + 1 per recomputation; a window that becomes final
without new events is rewritten with ``is_final`` only (same revision). Times are microseconds
since the epoch.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from eos_assets.lib.contract.stream_shape import WindowShape
from eos_assets.lib.delta import txn_ids

UPSTREAM = "silver/events"
APP = txn_ids.FROM_SILVER
# State of gold/window_aggregates, kept as txn actions next to APP (microseconds, seconds);
# gold/kpi_window keeps its size as SIZE_APP too.
MAX_EVENT_TIME_APP = txn_ids.MAX_EVENT_TIME
WATERMARK_APP = txn_ids.WATERMARK
SIZE_APP = txn_ids.WINDOW_SIZE
NO_VALUE = ""  # a string dimension's missing value
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class WindowSpec:
    """Window size and grace period."""

    size: timedelta = timedelta(minutes=5)
    grace: timedelta = timedelta(minutes=10)

    @property
    def size_us(self) -> int:
        """The size in microseconds."""
        return micros(self.size)

    @property
    def grace_us(self) -> int:
        """The grace period in microseconds."""
        return micros(self.grace)


@dataclass(frozen=True)
class Progress:
    """The watermark before each bronze version of a batch, and the state after the batch."""

    before: Mapping[int, int | None]
    max_event_time: int | None
    watermark: int | None


def key_columns(shape: WindowShape) -> tuple[str, ...]:
    """The columns that identify a window: its start, then the dimensions in declared order."""
    return ("window_start", *shape.dimensions)


def window_start(micros: int, size_us: int) -> int:
    """The start of the window holding ``micros`` (floor, also before the epoch)."""
    return micros - micros % size_us


def progress(
    max_event_time: int | None, watermark: int | None, version_max: Mapping[int, int], grace_us: int
) -> Progress:
    """Advance the watermark over a batch's bronze versions, in order.

    Args:
        max_event_time: max event time consumed before the batch (None: nothing yet).
        watermark: watermark before the batch (None: nothing yet).
        version_max: max event time of the batch's events per bronze version.
        grace_us: the grace period.
    """
    before: dict[int, int | None] = {}
    for version in sorted(version_max):
        before[version] = watermark
        top = version_max[version]
        max_event_time = top if max_event_time is None else max(max_event_time, top)
        candidate = max_event_time - grace_us
        watermark = candidate if watermark is None else max(watermark, candidate)
    return Progress(before, max_event_time, watermark)


def is_late(window_end_us: int, watermark_before: int | None) -> bool:
    """True when the window was final before the event arrived."""
    return watermark_before is not None and window_end_us <= watermark_before


def revise(
    shape: WindowShape,
    existing: Iterable[Mapping[str, Any]],
    recomputed: Mapping[tuple, Mapping[str, Any]],
    late: Mapping[tuple, int],
    watermark: int | None,
    silver_version: int,
    size_us: int,
) -> list[dict[str, Any]]:
    """The rows to upsert: every recomputed window, and existing ones that became final.

    Args:
        shape: the windows' dimensions and measures.
        existing: current rows of (at least) the recomputed windows and of windows whose end
            lies at or before ``watermark``; times as microseconds.
        recomputed: key (start micros, then the dimensions' values, as ``key_columns``) ->
            fresh values of the measures.
        late: key -> late events of this batch.
        watermark: the watermark after this batch.
        silver_version: the silver version consumed.
        size_us: the window size.
    """
    key_names = key_columns(shape)
    current = {tuple(r[k] for k in key_names): dict(r) for r in existing}
    rows: list[dict[str, Any]] = []
    for key, aggregates in recomputed.items():
        before = current.get(key, {})
        end = key[0] + size_us
        rows.append(
            {
                "window_start": key[0],
                "window_end": end,
                **dict(zip(shape.dimensions, key[1:], strict=True)),
                **aggregates,
                "late_events": before.get("late_events", 0) + late.get(key, 0),
                "revision": before.get("revision", 0) + 1,
                "is_final": watermark is not None and end <= watermark,
                "watermark": watermark,
                "silver_version": silver_version,
            }
        )
    for key, row in current.items():
        final = watermark is not None and row["window_end"] <= watermark
        if key not in recomputed and final and not row["is_final"]:
            rows.append({**row, "is_final": True, "watermark": watermark})
    return rows


def micros(delta: timedelta) -> int:
    """A duration in whole microseconds."""
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def at(us: int) -> datetime:
    """The UTC time ``us`` microseconds after the epoch."""
    return EPOCH + timedelta(microseconds=us)


def micros_of(value: Any) -> Any:
    """A datetime as microseconds since the epoch; anything else unchanged."""
    if isinstance(value, datetime):
        return micros(value - EPOCH)
    return value
