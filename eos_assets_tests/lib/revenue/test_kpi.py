"""The revenue KPI formulas."""

from eos_assets.lib.revenue.kpi import finish


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
