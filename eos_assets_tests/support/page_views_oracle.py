"""What the page_views tables must hold (``examples/page_views/defs.yaml``), in plain Python.

Computed from the records produced alone, independent of the pipeline and of the generator:
each record's validity comes from its own bytes, read by the contract's rules as
``lib/contract/schema.py`` states them (``defect``). Deliveries come from a manifest (``committed``:
the committed records, at their offsets) or from a generated list (``sent``: every record, in
the order sent). A view is the first delivery of a valid record of its ``view_id``.

Sums follow the pipeline's tables: a window's ``time_ms`` sums the durations present and is 0
when none is (``lib/derived/window_aggregates.py``); a session's ``time_on_site_ms`` is SQL's sum,
null when none of its views has a duration.
"""

import base64
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from eos_assets.devkit.events import Record

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SIZE = timedelta(minutes=5)
HOUR = timedelta(hours=1)
_INT64 = 2**63

# (where it was delivered, its value): a manifest's (topic, partition, offset), or a generated
# list's (index,). Deliveries of one id are compared by it: the least is the first.
Delivery = tuple[tuple, bytes | None]


@dataclass(frozen=True)
class View:
    """One valid page view, as silver holds it."""

    view_id: str
    session_id: str
    user_id: str | None
    page: str
    referrer: str | None
    duration_ms: int | None
    ts: datetime
    position: tuple


@dataclass
class Expected:
    """Every table of the stream: views by id, sessions by id, windows by (start, page), KPIs."""

    views: dict[str, View] = field(default_factory=dict)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    windows: dict[tuple[datetime, str], dict[str, Any]] = field(default_factory=dict)
    kpi_sessions: dict[str, Any] = field(default_factory=dict)
    kpi_views_by_page_hour: dict[tuple[datetime, str], dict[str, Any]] = field(default_factory=dict)
    kpi_views_by_hour: dict[tuple[datetime, str], dict[str, Any]] = field(default_factory=dict)


def committed(lines: Iterable[dict[str, Any]]) -> list[Delivery]:
    """The committed records of manifest ``lines``, with their (topic, partition, offset)."""
    return [
        (
            (line["topic"], line["partition"], line["offset"]),
            None if line["value_b64"] is None else base64.b64decode(line["value_b64"]),
        )
        for line in lines
        if line["status"] == "committed"
    ]


def sent(records: Iterable[Record]) -> list[Delivery]:
    """Generated ``records`` as deliveries, in the order sent."""
    return [((index,), record.value) for index, record in enumerate(records)]


def defect(value: bytes | None) -> str | None:
    """The malformed code of a page-view record, or None for a valid one."""
    event = _object(value)
    if isinstance(event, str):
        return event
    view_id = event.get("view_id")
    if not isinstance(view_id, str) or not view_id:
        return "missing_event_id"
    if _integral(event.get("ts")) is None:
        return "invalid_event_time"
    for name in ("session_id", "page"):  # the required fields, in declared order
        if not isinstance(event.get(name), str):
            return f"invalid_{name}"
    return None


def parse(value: bytes | None, position: tuple) -> View | None:
    """The view a record holds, or None when it is malformed."""
    if defect(value) is not None:
        return None
    event = json.loads(value or b"")
    return View(
        view_id=event["view_id"],
        session_id=event["session_id"],
        user_id=_text(event.get("user_id")),
        page=event["page"],
        referrer=_text(event.get("referrer")),
        duration_ms=_integral(event.get("duration_ms")),
        ts=EPOCH + timedelta(milliseconds=_integral(event["ts"]) or 0),
        position=position,
    )


def expected(deliveries: Iterable[Delivery]) -> Expected:
    """Every table after the pipeline has read all of ``deliveries``."""
    out = Expected()
    for position, value in sorted(deliveries, key=lambda d: d[0]):
        view = parse(value, position)
        if view is not None and view.view_id not in out.views:
            out.views[view.view_id] = view
    views = list(out.views.values())
    out.sessions = _sessions(views)
    out.windows = _windows(views)
    out.kpi_sessions = _kpi_sessions(out.sessions)
    out.kpi_views_by_page_hour = _kpi_views_by_page_hour(out.windows)
    out.kpi_views_by_hour = _kpi_views_by_hour(views)
    return out


def floor(moment: datetime, size: timedelta) -> datetime:
    """The start of the ``size`` window (aligned to the epoch) holding ``moment``."""
    return EPOCH + ((moment - EPOCH) // size) * size


def _sessions(views: list[View]) -> dict[str, dict[str, Any]]:
    by_session: dict[str, list[View]] = defaultdict(list)
    for view in views:
        by_session[view.session_id].append(view)
    sessions = {}
    for session_id, members in by_session.items():
        last = max(members, key=lambda v: (v.ts, v.position))
        durations = [v.duration_ms for v in members if v.duration_ms is not None]
        sessions[session_id] = {
            "user_id": last.user_id,
            "pages": len(members),
            "first_view": min(v.ts for v in members),
            "last_view": last.ts,
            "time_on_site_ms": sum(durations) if durations else None,
            "last_event_id": last.view_id,
        }
    return sessions


def _windows(views: list[View]) -> dict[tuple[datetime, str], dict[str, Any]]:
    members: dict[tuple[datetime, str], list[View]] = defaultdict(list)
    for view in views:
        members[(floor(view.ts, SIZE), view.page)].append(view)
    return {
        (start, page): {
            "window_end": start + SIZE,
            "views": len(group),
            "sessions": len({v.session_id for v in group}),
            "time_ms": sum(v.duration_ms for v in group if v.duration_ms is not None),
        }
        for (start, page), group in members.items()
    }


def _kpi_sessions(sessions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    pages = [s["pages"] for s in sessions.values()]
    return {
        "sessions": len(pages),
        "pages_per_session": sum(pages) / len(pages) if pages else None,
        "bounce_rate": sum(1 for p in pages if p == 1) / len(pages) if pages else None,
    }


def _kpi_views_by_page_hour(
    windows: dict[tuple[datetime, str], dict[str, Any]],
) -> dict[tuple[datetime, str], dict[str, Any]]:
    hours: dict[tuple[datetime, str], dict[str, Any]] = {}
    for (start, page), window in windows.items():
        row = hours.setdefault((floor(start, HOUR), page), {"views": 0, "sessions": 0})
        row["views"] += window["views"]
        row["sessions"] += window["sessions"]  # distinct per window, summed (see the KPI)
    return hours


def _kpi_views_by_hour(views: list[View]) -> dict[tuple[datetime, str], dict[str, Any]]:
    members: dict[tuple[datetime, str], list[View]] = defaultdict(list)
    for view in views:
        members[(floor(view.ts, HOUR), view.page)].append(view)
    hours = {}
    for (start, page), group in members.items():
        time_ms = sum(v.duration_ms for v in group if v.duration_ms is not None)
        hours[(start, page)] = {
            "window_end": start + HOUR,
            "views": len(group),
            "sessions": len({v.session_id for v in group}),
            "time_ms": time_ms,
            "ms_per_view": time_ms / len(group),
        }
    return hours


def _object(value: bytes | None) -> dict[str, Any] | str:
    """The JSON object of ``value``, or the code of why it is none."""
    if value is None:
        return "null_value"
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid_utf8"
    try:
        event = json.loads(text)
    except ValueError:
        return "invalid_json"
    return event if isinstance(event, dict) else "not_an_object"


def _integral(value: object) -> int | None:
    """A JSON number of integral value within int64 (``2.0`` too), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    number = int(value)
    return number if -_INT64 <= number < _INT64 else None


def _text(value: object) -> str | None:
    """An optional string field: a string as is, another JSON value as its compact text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))
