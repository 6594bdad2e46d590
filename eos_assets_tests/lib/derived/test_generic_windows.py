"""A stream that is not orders, end to end on a real SparkSession: Kafka records of page views
become bronze rows, silver events and windows of the declared dimension and measures, equal to
a recount in plain Python; a late event restates its window."""

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from eos_assets.lib.checks.reconcile import reconcile_windows, silver_columns
from eos_assets.lib.contract.schema import to_bronze_table
from eos_assets.lib.contract.stream_shape import (
    COUNT,
    COUNT_DISTINCT,
    ISO8601,
    LONG,
    MAX,
    MIN,
    STRING,
    SUM,
    Contract,
    Measure,
    PayloadField,
    WindowShape,
)
from eos_assets.lib.delta.delta_io import read_rows
from eos_assets.lib.derived import windows
from eos_assets.lib.derived.silver_events import events_schema, update_events
from eos_assets.lib.derived.window_aggregates import late_schema, update_windows, window_schema
from eos_assets.lib.derived.windows import WindowSpec

VIEWS = Contract(
    id_field="view_id",
    time_field="viewed_at",
    time_format=ISO8601,
    fields=(
        PayloadField("session_id", STRING, required=True),
        PayloadField("page", STRING),
        PayloadField("referrer", STRING),
        PayloadField("duration_ms", LONG),
    ),
)
SHAPE = WindowShape(
    dimensions=("page",),
    measures=(
        Measure("views", COUNT),
        Measure("sessions", COUNT_DISTINCT, "session_id"),
        Measure("time_ms", SUM, "duration_ms"),
        Measure("longest", MAX, "duration_ms"),
        Measure("shortest", MIN, "duration_ms"),
    ),
)
SPEC = WindowSpec(size=timedelta(minutes=1), grace=timedelta(minutes=1))
T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MEASURES = [m.name for m in SHAPE.measures]


def _view(n: int, seconds: int, session: str, page: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "event_id": f"v-{n}",
        "event_time": T0 + timedelta(seconds=seconds),
        "session_id": session,
        "page": page,
        "referrer": extra.get("referrer"),
        "duration_ms": extra.get("duration_ms"),
    }


# First bronze version: windows [10:00, 10:01) .. [10:03, 10:04); views without a page, views
# without a duration (a window whose only view has none: time 0, longest null), no referrer.
FIRST = [
    _view(1, 5, "s-1", "/home", referrer="https://a.example", duration_ms=1200),
    _view(2, 20, "s-2", "/home", duration_ms=300),
    _view(3, 40, "s-1", "/home", referrer="https://b.example", duration_ms=4500),
    _view(4, 50, "s-3", None, duration_ms=700),
    _view(5, 65, "s-2", "/cart"),
    _view(6, 70, "s-2", "/home", duration_ms=100),
    _view(7, 125, "s-4", "/cart", duration_ms=2500),
    _view(8, 130, "s-4", None),
    _view(9, 210, "s-5", "/home", duration_ms=50),
]
# Second bronze version: after the first, the watermark is 10:02:30, so [10:00, 10:01) is
# final and v-10 is late for it; v-11 is on time.
SECOND = [
    _view(10, 30, "s-6", "/home", duration_ms=9000),
    _view(11, 215, "s-5", "/home", duration_ms=60),
]


def _value(view: dict[str, Any]) -> bytes:
    """The Kafka value of a view: JSON with the declared id and time fields."""
    payload = {k: v for k, v in view.items() if k not in ("event_id", "event_time")}
    value = {"view_id": view["event_id"], "viewed_at": view["event_time"].isoformat(), **payload}
    return json.dumps({k: v for k, v in value.items() if v is not None}).encode()


def _bronze(values: list[bytes], first_offset: int) -> pa.Table:
    """Bronze rows of Kafka records with ``values``, at offsets from ``first_offset``."""
    n = len(values)
    offsets = list(range(first_offset, first_offset + n))
    return to_bronze_table(VIEWS, "page_views", 0, offsets, [0] * n, [None] * n, values)


def _recount(views: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """The windows of ``views``, counted in plain Python."""
    size = SPEC.size
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for v in views:
        start = T0 + (v["event_time"] - T0) // size * size
        groups[(start, v["page"] or "")].append(v)
    out = {}
    for key, members in groups.items():
        durations = [v["duration_ms"] for v in members if v["duration_ms"] is not None]
        out[key] = {
            "views": len(members),
            "sessions": len({v["session_id"] for v in members}),
            "time_ms": sum(durations),
            "longest": max(durations) if durations else None,
            "shortest": min(durations) if durations else None,
        }
    return out


def _windows(uri: str) -> dict[tuple, dict[str, Any]]:
    rows = read_rows(DeltaTable(uri), window_schema(SHAPE, VIEWS)).to_pylist()
    return {(r["window_start"], r["page"]): r for r in rows}


def _measures(rows: dict[tuple, dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    return {k: {m: r[m] for m in MEASURES} for k, r in rows.items()}


def test_page_view_windows_equal_a_plain_python_recount(
    spark: SparkSession, tmp_path: Path
) -> None:
    uri = {n: str(tmp_path / n) for n in ("bronze", "silver", "windows", "late")}

    def run() -> None:
        update_events(spark, VIEWS, uri["bronze"], uri["silver"])
        update_windows(spark, SHAPE, VIEWS, uri["silver"], uri["windows"], uri["late"], SPEC)

    # A redelivery of v-1 and a malformed record come after the first batch's views.
    values = [_value(v) for v in FIRST] + [_value(FIRST[0]), b"{"]
    write_deltalake(uri["bronze"], _bronze(values, 0))
    run()

    silver = read_rows(DeltaTable(uri["silver"]), events_schema(VIEWS)).to_pylist()
    assert sorted(r["event_id"] for r in silver) == sorted(v["event_id"] for v in FIRST)
    assert next(r["offset"] for r in silver if r["event_id"] == "v-1") == 0, "first delivery"
    assert events_schema(VIEWS).names[:6] == [
        "event_id",
        "event_time",
        "session_id",
        "page",
        "referrer",
        "duration_ms",
    ]
    first = _windows(uri["windows"])
    assert _measures(first) == _recount(FIRST)
    assert first[(T0, "")]["views"] == 1, "a view without a page counts under the page ''"
    no_duration = first[(T0 + SPEC.size, "/cart")]
    assert (no_duration["time_ms"], no_duration["longest"], no_duration["shortest"]) == (
        0,
        None,
        None,
    )
    watermark = T0 + timedelta(minutes=2, seconds=30)
    assert {k for k, r in first.items() if r["is_final"]} == {
        k for k in first if k[0] + SPEC.size <= watermark
    }
    assert {r["revision"] for r in first.values()} == {1}

    write_deltalake(uri["bronze"], _bronze([_value(v) for v in SECOND], 20), mode="append")
    run()

    after = _windows(uri["windows"])
    assert _measures(after) == _recount(FIRST + SECOND)
    restated = after[(T0, "/home")]
    assert (restated["revision"], restated["late_events"], restated["is_final"]) == (2, 1, True)
    assert restated["views"] == 4 and restated["longest"] == 9000
    assert {k: (r["revision"], r["late_events"]) for k, r in after.items()} == {
        **{k: (1, 0) for k in first},
        (T0, "/home"): (2, 1),
        (T0 + 3 * SPEC.size, "/home"): (2, 0),
    }
    late = read_rows(DeltaTable(uri["late"]), late_schema(VIEWS)).to_pylist()
    assert [(r["event_id"], r["page"], r["window_start"]) for r in late] == [("v-10", "/home", T0)]

    gold = read_rows(DeltaTable(uri["windows"]), window_schema(SHAPE, VIEWS))
    silver_rows = read_rows(
        DeltaTable(uri["silver"]), events_schema(VIEWS), columns=silver_columns(SHAPE)
    )
    watermark_us = DeltaTable(uri["windows"]).transaction_version(windows.WATERMARK_APP)
    report = reconcile_windows(SHAPE, gold, silver_rows, 60, watermark_us)
    assert report.ok and report.counts["final_windows"] == 4, report.summary()
    altered = [r | {"sessions": r["sessions"] + (r["page"] == "/cart")} for r in gold.to_pylist()]
    broken = pa.Table.from_pylist(altered, schema=gold.schema)
    report = reconcile_windows(SHAPE, broken, silver_rows, 60, watermark_us)
    assert not report.ok and report.problems[0].endswith("/cart: sessions 2 vs silver 1"), (
        report.problems
    )
