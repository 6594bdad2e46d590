"""What the tests of continuous streams share: the oracle of the path to the served KPIs, cut
into batches the way a continuous run cuts it."""

from pathlib import Path
from typing import Any

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.derived.silver_events import events_schema
from eos_assets_tests.support import graph
from eos_assets_tests.support.oracle import Expected
from eos_assets_tests.support.orders import EVENTS, KPI_DAILY, KPI_WINDOW

# Which delivery of a duplicated event wins, and how many revisions a KPI row went through,
# depend on how the offsets were cut into batches; the values do not.
BOOKKEEPING = {"revision", "silver_version"}
EVENT_FIELDS = ("event_type", "event_time", "order_id", "customer_id", "amount", "currency")


def assert_kpi_path(lake_root: str, want: Expected, warehouse: Path) -> None:
    """silver/events (each event once, with its payload), the declared KPI tables and their
    DuckDB mirror are the oracle's."""
    silver = graph.table(lake_root, EVENTS, events_schema(ORDERS.contract))
    assert len({r["event_id"] for r in silver}) == len(silver), "event_id not unique in silver"
    graph.assert_same(
        {r["event_id"]: {f: r[f] for f in EVENT_FIELDS} for r in silver},
        {e.event_id: {f: getattr(e, f) for f in EVENT_FIELDS} for e in want.events.values()},
        "orders/silver/events",
    )
    windows = graph.table(lake_root, KPI_WINDOW, graph.KPI_WINDOW_SCHEMA)
    graph.assert_same(
        {(r["window_start"], r["currency"]): _values(r) for r in windows},
        {k: _values(r) for k, r in want.kpi_window.items()},
        "kpi_window",
    )
    daily = graph.table(lake_root, KPI_DAILY, graph.KPI_DAILY_SCHEMA)
    graph.assert_same(
        {(r["day"], r["currency"]): _values(r) for r in daily},
        {k: _values(r) for k, r in want.kpi_daily.items()},
        "kpi_daily",
    )
    graph.assert_served(lake_root, warehouse, windows, daily)


def _values(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in BOOKKEEPING}
