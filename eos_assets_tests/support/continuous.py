"""What the tests of continuous streams share: the oracle of the path to the served KPIs, cut
into batches the way a continuous run cuts it."""

from datetime import UTC
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from eos_assets.declaration import read_declaration
from eos_assets.defs.kpis import sql_sources
from eos_assets.defs.stream import ORDERS, Stream
from eos_assets.examples import shipped
from eos_assets.lib.derived.silver_events import events_schema
from eos_assets.lib.derived.sql_kpi_tables import SOURCE_APPS
from eos_assets.lib.derived.window_aggregates import late_schema, window_schema
from eos_assets.lib.serving import warehouse_file
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.support import graph
from eos_assets_tests.support.oracle import Expected
from eos_assets_tests.support.orders import (
    EVENTS,
    KPI_DAILY,
    KPI_WINDOW,
    LATE_EVENTS,
    ORDER_STATE,
    WINDOW_AGGREGATES,
)
from eos_assets_tests.support.page_views_oracle import Expected as PageViews

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


# What the follow steps' tables hold that depends on how batches were cut (which versions a
# throttled pass took together): the entity's latest event id among events of one time, a
# window's revisions, whether an event came late and the watermark a row was written at.
FOLLOW_BOOKKEEPING = {
    "last_event_id", "silver_version", "revision", "late_events", "is_final", "watermark",
}  # fmt: skip
WINDOW_VALUES = ("window_end", "event_count", "distinct_orders", "distinct_customers", "amount_sum")


def assert_followed(lake_root: str, want: Expected, warehouse: Path) -> None:
    """The entity state and the windows hold the oracle's values (the windows at the declared
    size), every late event is an event of silver recorded once, and the SQL KPIs reflect the
    current window and entity tables."""
    state = graph.table(lake_root, ORDER_STATE, graph.ORDER_STATE_SCHEMA)
    graph.assert_same(
        {r["order_id"]: r for r in state},
        {k: _values(r, FOLLOW_BOOKKEEPING) for k, r in want.order_state.items()},
        "orders/silver/entity_state",
    )
    rows = graph.table(lake_root, WINDOW_AGGREGATES, window_schema(ORDERS.windows, ORDERS.contract))
    graph.assert_same(
        {(r["window_start"], r["event_type"], r["currency"]): r for r in rows},
        {k: {f: r[f] for f in WINDOW_VALUES} for k, r in want.windows.items()},
        "orders/gold/window_aggregates",
    )
    late = graph.table(lake_root, LATE_EVENTS, late_schema(ORDERS.contract))
    assert len({r["event_id"] for r in late}) == len(late), "a late event recorded twice"
    assert {r["event_id"] for r in late} <= want.events.keys()
    assert_sql_kpis_current(LakeResource(root=lake_root), ORDERS)
    with warehouse_file.connect_reader(warehouse) as conn:
        (hours,) = conn.execute("SELECT count(*) FROM orders.revenue_by_hour").fetchone() or (0,)
    assert hours > 0


def assert_sql_kpis_current(lake: LakeResource, stream: Stream) -> None:
    """Each SQL KPI table reflects its sources as they are now."""
    sources = {name: lake.table_uri(*key.path) for name, key in sql_sources(stream).items()}
    for kpi in stream.sql_kpis:
        table = DeltaTable(lake.table_uri(*stream.kpi_key(kpi.name).path))
        reflected = {s: table.transaction_version(SOURCE_APPS[s]) for s in kpi.sources}
        current = {s: DeltaTable(sources[s]).version() for s in kpi.sources}
        assert reflected == current, f"{kpi.name} reflects its sources as they are"


def _values(row: dict[str, Any], bookkeeping: set[str] = BOOKKEEPING) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in bookkeeping}


def assert_page_views_exact(lake_root: str, want: PageViews, warehouse: Path) -> None:
    """Every table of the page_views example after a continuous run is the oracle's: silver
    (each view once), the sessions, the windows' values, each late event once, the hourly KPI
    table and its DuckDB copy, and the SQL KPIs over the current window and entity tables."""
    lake = LakeResource(root=lake_root)

    def rows(*path: str) -> list[dict[str, Any]]:
        return DeltaTable(lake.table_uri("page_views", *path)).to_pyarrow_table().to_pylist()

    silver = rows("silver", "events")
    assert len({r["event_id"] for r in silver}) == len(silver), "event_id not unique in silver"
    assert {r["event_id"] for r in silver} == want.views.keys()
    state = {r["session_id"]: r for r in rows("silver", "entity_state")}
    graph.assert_same(
        state,
        {k: _values(r, FOLLOW_BOOKKEEPING) for k, r in want.sessions.items()},
        "page_views/silver/entity_state",
    )
    windows = {(r["window_start"], r["page"]): r for r in rows("gold", "window_aggregates")}
    graph.assert_same(windows, want.windows, "page_views/gold/window_aggregates")
    late = rows("gold", "late_events")
    assert len({r["event_id"] for r in late}) == len(late), "a late event recorded twice"
    assert {r["event_id"] for r in late} <= want.views.keys()
    hourly = {(r["window_start"], r["page"]): r for r in rows("gold", "views_by_hour")}
    graph.assert_same(hourly, want.kpi_views_by_hour, "page_views/gold/views_by_hour")
    with warehouse_file.connect_reader(warehouse) as conn:
        served = graph.served_rows(conn, "page_views.views_by_hour", ("window_start", "page"))
        (mirrored,) = conn.execute(
            "SELECT delta_version FROM eos_delta_versions "
            "WHERE table_name = 'page_views.views_by_hour'"
        ).fetchone() or (None,)
        sessions = conn.execute(
            "SELECT sessions, pages_per_session, bounce_rate FROM page_views.sessions"
        ).fetchone()
        by_page_hour = conn.execute(
            "SELECT hour, page, views, sessions FROM page_views.views_by_page_hour"
        ).fetchall()
    graph.assert_same(served, hourly, "DuckDB page_views.views_by_hour")
    assert mirrored == DeltaTable(lake.table_uri("page_views", "gold", "views_by_hour")).version()
    assert_sql_kpis_current(lake, Stream.of(read_declaration(shipped("page_views"))))
    assert sessions is not None
    graph.assert_same(
        {(): dict(zip(("sessions", "pages_per_session", "bounce_rate"), sessions, strict=True))},
        {(): want.kpi_sessions},
        "page_views.sessions",
    )
    graph.assert_same(
        {(h.astimezone(UTC), p): {"views": v, "sessions": s} for h, p, v, s in by_page_hour},
        want.kpi_views_by_page_hour,
        "page_views.views_by_page_hour",
    )
