"""The revenue KPI formulas, and the windows an increment touches."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from eos_assets.lib.derived.increments import AddedFile, Increment
from eos_assets.lib.revenue.kpi import finish
from eos_assets.lib.revenue.kpi_window import window_keys


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


def test_window_keys_are_the_windows_and_currencies_of_the_increment(tmp_path: Path) -> None:
    """Floor to the window for times before 1970 too; a missing currency is ""."""
    times = [-1, 0, 299_999_999, 300_000_000, 300_000_001]
    rows = pa.table(
        {
            "event_time": pa.array(times, pa.timestamp("us", tz="UTC")),
            "currency": ["EUR", None, None, "EUR", "EUR"],
        }
    )
    pq.write_table(rows, tmp_path / "part.parquet")
    added = AddedFile(1, str(tmp_path / "part.parquet"), 0, len(times), {})
    increment = Increment(str(tmp_path), None, 1, [added])
    assert window_keys(increment, 300_000_000) == [
        (-300_000_000, "EUR"),
        (0, ""),
        (300_000_000, "EUR"),
    ]
