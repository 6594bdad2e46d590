"""The expected silver and gold tables, computed from the producer's manifests alone.

Plain Python over what the producer says it committed, independent of the pipeline's code:
batch ``k`` (0-based) is everything produced before the ``k+1``-th materialization of the
graph, so it arrives in bronze (and silver) version ``k + 1``. A record is an event when the
manifest says it was committed and not malformed; its fields come from its own JSON value.
"""

import base64
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The period of the orders stream's kpi_window (its declaration's ``time: 5m``), whatever
# size a test gives gold/window_aggregates.
KPI_WINDOW_SIZE = timedelta(minutes=5)


@dataclass(frozen=True)
class Event:
    """One silver row as the oracle sees it."""

    event_id: str
    event_type: str
    event_time: datetime
    order_id: str | None
    customer_id: str | None
    amount: float
    currency: str | None
    topic: str
    partition: int
    offset: int
    batch: int

    @property
    def version(self) -> int:
        """The bronze (and silver) version that brought it."""
        return self.batch + 1


@dataclass
class Expected:
    """Everything the oracle derives."""

    events: dict[str, Event] = field(default_factory=dict)
    order_state: dict[str, dict[str, Any]] = field(default_factory=dict)
    windows: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    late_events: dict[str, dict[str, Any]] = field(default_factory=dict)
    kpi_window: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    kpi_daily: dict[tuple, dict[str, Any]] = field(default_factory=dict)


def parse_time(text: str) -> datetime:
    """A contract event time (``...Z``) as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def silver(batches: Sequence[Iterable[dict[str, Any]]]) -> dict[str, Event]:
    """First delivery of every committed valid event: earliest batch, then lowest offset."""
    events: dict[str, Event] = {}
    for number, lines in enumerate(batches):
        committed = [
            line for line in lines if line["status"] == "committed" and line["kind"] != "malformed"
        ]
        for line in sorted(committed, key=lambda r: (r["topic"], r["partition"], r["offset"])):
            value = json.loads(base64.b64decode(line["value_b64"]))
            if value["event_id"] in events:
                continue
            events[value["event_id"]] = Event(
                event_id=value["event_id"],
                event_type=value["event_type"],
                event_time=parse_time(value["event_time"]),
                order_id=value.get("order_id"),
                customer_id=value.get("customer_id"),
                amount=float(value["amount"]),
                currency=value.get("currency"),
                topic=line["topic"],
                partition=line["partition"],
                offset=line["offset"],
                batch=number,
            )
    return events


def expected(
    batches: Sequence[Iterable[dict[str, Any]]],
    size: timedelta,
    grace: timedelta,
    kpi_size: timedelta = KPI_WINDOW_SIZE,
) -> Expected:
    """Every derived table after materializing the graph once per batch (windows of
    ``size``, the KPI windows of ``kpi_size``)."""
    out = Expected(events=silver(batches))
    rows = list(out.events.values())
    out.order_state = _order_state(rows)
    _windows(out, rows, len(batches), size, grace)
    out.kpi_window = _kpis(rows, lambda e: (_floor(e.event_time, kpi_size), _currency(e)))
    out.kpi_daily = _kpis(rows, lambda e: (e.event_time.date(), _currency(e)))
    return out


def _currency(e: Event) -> str:
    return e.currency if e.currency is not None else ""


def _floor(moment: datetime, size: timedelta) -> datetime:
    return EPOCH + ((moment - EPOCH) // size) * size


def _order_state(rows: list[Event]) -> dict[str, dict[str, Any]]:
    by_order: dict[str, list[Event]] = defaultdict(list)
    for e in rows:
        if e.order_id is not None:
            by_order[e.order_id].append(e)
    states = {}
    for order_id, events in by_order.items():
        last = max(events, key=lambda e: (e.event_time, e.topic, e.partition, e.offset))
        states[order_id] = {
            "status": last.event_type.removeprefix("order_"),
            "customer_id": last.customer_id,
            "currency": last.currency,
            "amount": last.amount,
            **{
                f"{kind}_amount": sum(e.amount for e in events if e.event_type == f"order_{kind}")
                for kind in ("created", "paid", "cancelled", "refunded")
            },
            "event_count": len(events),
            "first_event_time": min(e.event_time for e in events),
            "last_event_time": last.event_time,
            "last_event_id": last.event_id,
            "silver_version": max(e.version for e in events),
        }
    return states


def _windows(
    out: Expected, rows: list[Event], batches: int, size: timedelta, grace: timedelta
) -> None:
    """Windows, late events, revisions and finality, replaying the batches in order."""
    top: datetime | None = None
    marks: list[datetime | None] = []  # watermark after each batch
    touched: dict[tuple, list[int]] = defaultdict(list)
    for number in range(batches):
        before = top - grace if top is not None else None
        new = [e for e in rows if e.batch == number]
        for e in new:
            start = _floor(e.event_time, size)
            key = (start, e.event_type, _currency(e))
            if number not in touched[key]:
                touched[key].append(number)
            if before is not None and start + size <= before:
                out.late_events[e.event_id] = {
                    "window_start": start,
                    "window_end": start + size,
                    "watermark": before,
                    "silver_version": e.version,
                }
        if new:
            latest = max(e.event_time for e in new)
            top = latest if top is None else max(top, latest)
        marks.append(top - grace if top is not None else None)
    members: dict[tuple, list[Event]] = defaultdict(list)
    for e in rows:
        members[(_floor(e.event_time, size), e.event_type, _currency(e))].append(e)
    for key, events in members.items():
        end = key[0] + size
        last = touched[key][-1]
        final_at = next((n for n, m in enumerate(marks) if m is not None and end <= m), None)
        written = last if final_at is None or final_at <= last else final_at
        out.windows[key] = {
            "window_end": end,
            "event_count": len(events),
            "distinct_orders": len({e.order_id for e in events if e.order_id is not None}),
            "distinct_customers": len({e.customer_id for e in events if e.customer_id}),
            "amount_sum": sum(e.amount for e in events),
            "late_events": sum(1 for e in events if e.event_id in out.late_events),
            "revision": len(touched[key]),
            "is_final": final_at is not None,
            "watermark": marks[written],
            "silver_version": last + 1,
        }


def _kpis(rows: list[Event], period) -> dict[tuple, dict[str, Any]]:
    groups: dict[tuple, list[Event]] = defaultdict(list)
    for e in rows:
        groups[period(e)].append(e)
    kpis = {}
    for key, events in groups.items():
        count = {
            kind: sum(1 for e in events if e.event_type == f"order_{kind}")
            for kind in ("created", "paid", "cancelled", "refunded")
        }
        paid = sum(e.amount for e in events if e.event_type == "order_paid")
        refunded = sum(e.amount for e in events if e.event_type == "order_refunded")
        kpis[key] = {
            "orders_created": count["created"],
            "orders_paid": count["paid"],
            "orders_cancelled": count["cancelled"],
            "orders_refunded": count["refunded"],
            "paid_amount": paid,
            "refunded_amount": refunded,
            "revenue": paid - refunded,
            "average_order_value": paid / count["paid"] if count["paid"] else None,
            "unique_customers": len({e.customer_id for e in events if e.customer_id is not None}),
            "cancellation_rate": count["cancelled"] / count["created"]
            if count["created"]
            else None,
            "revision": len({e.batch for e in events}),
            "silver_version": max(e.version for e in events),
        }
    return kpis


def day_of(moment: datetime) -> date:
    """The UTC date of ``moment``."""
    return moment.astimezone(UTC).date()
