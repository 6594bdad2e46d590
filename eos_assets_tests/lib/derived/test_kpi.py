"""KPI formulas and the file-pruning predicates the incremental reads rely on."""

from datetime import UTC, datetime, timedelta

from eos_assets.lib.derived.kpi import finish
from eos_assets.lib.derived.silver_events import existing_files_predicate, merge_ranges

T0 = datetime(2026, 11, 21, 23, 30, tzinfo=UTC)


def _counters(created: int, paid: int, cancelled: int, paid_amount: float, refunded: float):
    return {
        "orders_created": created,
        "orders_paid": paid,
        "orders_cancelled": cancelled,
        "orders_refunded": 1,
        "paid_amount": paid_amount,
        "refunded_amount": refunded,
    }


def test_revenue_aov_and_cancellation_rate() -> None:
    kpis = finish(_counters(10, 4, 2, 200.0, 30.0), unique_customers=7)
    assert kpis["revenue"] == 170.0
    assert kpis["average_order_value"] == 50.0
    assert kpis["cancellation_rate"] == 0.2
    assert kpis["unique_customers"] == 7


def test_ratios_without_a_denominator_are_null() -> None:
    kpis = finish(_counters(0, 0, 3, 0.0, 12.0), unique_customers=1)
    assert kpis["average_order_value"] is None and kpis["cancellation_rate"] is None
    assert kpis["revenue"] == -12.0


def test_ranges_merge_when_they_touch_or_overlap() -> None:
    m = timedelta(minutes=1)
    ranges = [(T0 + 5 * m, T0 + 6 * m), (T0, T0 + 2 * m), (T0 + 2 * m, T0 + 3 * m)]
    assert merge_ranges(ranges) == [(T0, T0 + 3 * m), (T0 + 5 * m, T0 + 6 * m)]


def test_existing_files_predicate_names_every_date_of_a_span() -> None:
    spans = [T0, T0 + timedelta(minutes=15), T0 + timedelta(hours=2)]
    predicate = existing_files_predicate(spans)
    assert predicate is not None
    first, second = predicate.split(" OR ")
    assert "event_date IN ('2026-11-21')" in first
    assert "event_time >= '2026-11-21T23:30:00+00:00'" in first
    assert "event_time < '2026-11-22T00:00:00+00:00'" in first
    assert "event_date IN ('2026-11-22')" in second
    assert existing_files_predicate([]) is None
