"""Window arithmetic, the watermark, lateness and revisions, without Spark."""

from datetime import UTC, datetime, timedelta

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.derived.windows import WindowSpec, is_late, progress, revise, window_start

MIN = 60_000_000  # one minute in microseconds


def test_window_start_floors_also_before_the_epoch() -> None:
    assert window_start(7 * MIN + 5, 5 * MIN) == 5 * MIN
    assert window_start(5 * MIN, 5 * MIN) == 5 * MIN
    assert window_start(-1, 5 * MIN) == -5 * MIN


def test_spec_sizes_in_microseconds() -> None:
    spec = WindowSpec(size=timedelta(minutes=5), grace=timedelta(seconds=90))
    assert (spec.size_us, spec.grace_us) == (5 * MIN, 90_000_000)


def test_watermark_advances_per_bronze_version_in_order() -> None:
    moved = progress(None, None, {7: 30 * MIN, 5: 20 * MIN, 6: 10 * MIN}, grace_us=10 * MIN)
    assert dict(moved.before) == {5: None, 6: 10 * MIN, 7: 10 * MIN}
    assert (moved.max_event_time, moved.watermark) == (30 * MIN, 20 * MIN)


def test_watermark_never_moves_back_when_grace_grows() -> None:
    moved = progress(30 * MIN, 20 * MIN, {9: 31 * MIN}, grace_us=60 * MIN)
    assert dict(moved.before) == {9: 20 * MIN}
    assert (moved.max_event_time, moved.watermark) == (31 * MIN, 20 * MIN)


def test_late_only_once_the_window_was_final_before_arrival() -> None:
    assert not is_late(10 * MIN, None)
    assert is_late(10 * MIN, 10 * MIN)
    assert not is_late(10 * MIN, 10 * MIN - 1)


def _row(start: int, revision: int, late: int, final: bool) -> dict:
    return {
        "window_start": start,
        "window_end": start + 5 * MIN,
        "event_type": "order_paid",
        "currency": "EUR",
        "event_count": 1,
        "distinct_orders": 1,
        "distinct_customers": 1,
        "amount_sum": 1.0,
        "late_events": late,
        "revision": revision,
        "is_final": final,
        "watermark": 0,
        "silver_version": 1,
    }


def test_revise_bumps_revisions_adds_late_events_and_finalizes_untouched_windows() -> None:
    aggregates = {
        "event_count": 3,
        "distinct_orders": 2,
        "distinct_customers": 2,
        "amount_sum": 9.5,
    }
    late_key = (0, "order_paid", "EUR")
    new_key = (20 * MIN, "order_paid", "EUR")
    existing = [_row(0, 2, 1, True), _row(5 * MIN, 1, 0, False), _row(10 * MIN, 1, 0, False)]
    rows = revise(
        ORDERS.windows,
        existing,
        {late_key: aggregates, new_key: aggregates},
        {late_key: 2},
        watermark=10 * MIN,
        silver_version=4,
        size_us=5 * MIN,
    )
    by_start = {r["window_start"]: r for r in rows}
    assert set(by_start) == {0, 5 * MIN, 20 * MIN}  # 10 min window: not final, not touched
    assert by_start[0] | {} == {
        **_row(0, 3, 3, True),
        **aggregates,
        "watermark": 10 * MIN,
        "silver_version": 4,
    }
    assert by_start[5 * MIN] == {**_row(5 * MIN, 1, 0, True), "watermark": 10 * MIN}
    assert by_start[20 * MIN]["revision"] == 1 and not by_start[20 * MIN]["is_final"]


def test_window_bounds_are_utc() -> None:
    moment = datetime(2026, 11, 21, 23, 58, 30, tzinfo=UTC)
    micros = int(moment.timestamp()) * 1_000_000
    start = window_start(micros, 5 * MIN)
    assert datetime.fromtimestamp(start / 1e6, UTC) == datetime(2026, 11, 21, 23, 55, tzinfo=UTC)
