"""Helpers for tests of the whole asset graph: resources, materialization, table snapshots,
and comparisons of the tables with the oracle (``oracle.py``)."""

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
from deltalake import DeltaTable

import eos_assets.streams
from eos_assets.declaration import read_declaration
from eos_assets.defs.stream import ORDERS as STREAM
from eos_assets.lib.delta.delta_io import read_rows
from eos_assets.lib.derived.kpi_compute import kpi_schema
from eos_assets.lib.derived.silver_events import events_schema
from eos_assets.lib.derived.window_aggregates import late_schema, window_schema
from eos_assets.lib.serving import warehouse_file
from eos_assets.resources.alerts import AlertsResource
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.warehouse import WarehouseResource
from eos_assets.stream_specs import entity_spec
from eos_assets_tests.support.bronze_runs import bronze_resources
from eos_assets_tests.support.oracle import Expected
from eos_assets_tests.support.orders import (
    EVENTS,
    KPI_DAILY,
    KPI_DAILY_DISTINCT,
    KPI_WINDOW,
    KPI_WINDOW_DISTINCT,
    LATE_EVENTS,
    ORDER_STATE,
    WINDOW_AGGREGATES,
    events,
    kpi_tables,
    order_state,
    raw_events,
    serving_kpi,
    sql_kpis,
    sql_serving,
    window_aggregates,
)

# The shipped orders stream: its entity state is built from its declaration.
ORDERS = read_declaration(eos_assets.streams.declaration("orders"))
_ENTITY = entity_spec(ORDERS)
assert _ENTITY is not None
ORDERS_ENTITY = _ENTITY
ORDER_STATE_SCHEMA = ORDERS_ENTITY.schema
DERIVED = [events, order_state, window_aggregates, kpi_tables, serving_kpi, sql_kpis, sql_serving]
_SPECS = {spec.name: spec for spec in STREAM.kpi_specs}
KPI_WINDOW_SCHEMA = kpi_schema(_SPECS["kpi_window"], STREAM.contract)
KPI_DAILY_SCHEMA = kpi_schema(_SPECS["kpi_daily"], STREAM.contract)
ALL = [raw_events, *DERIVED]
TABLES = (
    EVENTS,
    ORDER_STATE,
    WINDOW_AGGREGATES,
    LATE_EVENTS,
    KPI_WINDOW,
    KPI_WINDOW_DISTINCT,
    KPI_DAILY,
    KPI_DAILY_DISTINCT,
)


def window_config(window_minutes: float, grace_minutes: float) -> dict[str, Any]:
    """Run config of the window assets (the KPI tables have their declared periods)."""
    return {
        "ops": {
            "orders__gold__window_aggregates": {
                "config": {"window_minutes": window_minutes, "grace_minutes": grace_minutes}
            },
        }
    }


def resources(bootstrap: str, topic: str | None, lake_root: str, warehouse: Path) -> dict[str, Any]:
    """Real resources of the whole graph reading ``topic`` (None: the topics a stream
    declares); the Spark one reuses the session of the ``spark`` fixture."""
    return {
        "alerts": AlertsResource(),
        **bronze_resources(bootstrap, None if topic is None else [topic], lake_root),
        "warehouse": WarehouseResource(path=str(warehouse)),
    }


def materialize(
    assets: Sequence[Any], res: Mapping[str, Any], run_config: Mapping[str, Any]
) -> dg.ExecuteInProcessResult:
    """Materialize ``assets`` with the given resources; the run must succeed."""
    used = {"ops": {k: v for k, v in run_config["ops"].items() if _has_op(assets, k)}}
    result = dg.materialize(
        list(assets), resources=dict(res), run_config=used, instance=dg.DagsterInstance.ephemeral()
    )
    assert result.success
    return result


def _has_op(assets: Sequence[Any], name: str) -> bool:
    return any(a.op.name == name for a in assets)


def versions(lake_root: str) -> dict[str, int]:
    """The Delta version of every derived table."""
    lake = LakeResource(root=lake_root)
    return {k.to_user_string(): DeltaTable(lake.table_uri(*k.path)).version() for k in TABLES}


def table(lake_root: str, key: dg.AssetKey, schema: Any) -> list[dict[str, Any]]:
    """Every row of a table, as dicts."""
    uri = LakeResource(root=lake_root).table_uri(*key.path)
    return read_rows(DeltaTable(uri), schema).to_pylist()


def assert_same(
    actual: Mapping[Any, Mapping[str, Any]], wanted: Mapping[Any, Mapping[str, Any]], what: str
) -> None:
    """Same keys; each wanted field equal (floats within 1e-6, relative 1e-9)."""
    missing, extra = wanted.keys() - actual.keys(), actual.keys() - wanted.keys()
    assert not missing and not extra, (
        f"{what}: missing {sorted(missing)[:5]}, extra {sorted(extra)[:5]}"
    )
    diffs = []
    for key, row in wanted.items():
        for name, value in row.items():
            got = actual[key][name]
            if not _equal(got, value):
                diffs.append(f"{key} {name}: got {got!r}, want {value!r}")
    assert not diffs, f"{what}: {len(diffs)} differences, e.g. " + "; ".join(diffs[:8])


def _equal(got: Any, want: Any) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-6)
    if isinstance(want, datetime) and isinstance(got, datetime):
        return got.astimezone(UTC) == want.astimezone(UTC)
    return got == want


def assert_matches_oracle(lake_root: str, want: Expected, warehouse: Path | None = None) -> None:
    """Compare every derived table (and the DuckDB mirror) with the oracle."""
    assert_silver(lake_root, want)
    state = table(lake_root, ORDER_STATE, ORDER_STATE_SCHEMA)
    assert_same({r["order_id"]: r for r in state}, want.order_state, "orders/silver/entity_state")
    assert_windows(lake_root, want)
    kpi_rows = table(lake_root, KPI_WINDOW, KPI_WINDOW_SCHEMA)
    assert_same(
        {(r["window_start"], r["currency"]): r for r in kpi_rows}, want.kpi_window, "kpi_window"
    )
    daily = table(lake_root, KPI_DAILY, KPI_DAILY_SCHEMA)
    assert_same({(r["day"], r["currency"]): r for r in daily}, want.kpi_daily, "kpi_daily")
    if warehouse is not None:
        assert_served(lake_root, warehouse, kpi_rows, daily)


def assert_silver(lake_root: str, want: Expected) -> None:
    """silver/events holds exactly the oracle's first deliveries, each event once."""
    silver = table(lake_root, EVENTS, events_schema(STREAM.contract))
    assert len({r["event_id"] for r in silver}) == len(silver), "event_id not unique in silver"
    assert_same(
        {r["event_id"]: r for r in silver},
        {
            e.event_id: {
                "event_type": e.event_type,
                "event_time": e.event_time,
                "order_id": e.order_id,
                "customer_id": e.customer_id,
                "amount": e.amount,
                "currency": e.currency,
                "topic": e.topic,
                "partition": e.partition,
                "offset": e.offset,
                "bronze_version": e.version,
                "event_date": e.event_time.date(),
            }
            for e in want.events.values()
        },
        "orders/silver/events",
    )


def assert_windows(lake_root: str, want: Expected) -> None:
    """gold/window_aggregates and gold/late_events are the oracle's, each late event once."""
    rows = table(lake_root, WINDOW_AGGREGATES, window_schema(STREAM.windows, STREAM.contract))
    assert_same(
        {(r["window_start"], r["event_type"], r["currency"]): r for r in rows},
        want.windows,
        "orders/gold/window_aggregates",
    )
    late = table(lake_root, LATE_EVENTS, late_schema(STREAM.contract))
    assert len({r["event_id"] for r in late}) == len(late), "a late event recorded twice"
    assert_same({r["event_id"]: r for r in late}, want.late_events, "orders/gold/late_events")


def assert_served(
    lake_root: str,
    warehouse: Path,
    kpi_rows: list[dict[str, Any]],
    daily: list[dict[str, Any]],
) -> None:
    """DuckDB holds exactly the Delta KPI rows, and every served table the Delta version it
    reflects."""
    lake = LakeResource(root=lake_root)
    with warehouse_file.connect_reader(warehouse) as conn:
        served = {
            "kpi_window": served_rows(conn, "orders.kpi_window", ("window_start", "currency")),
            "kpi_daily": served_rows(conn, "orders.kpi_daily", ("day", "currency")),
        }
        recorded = dict(
            conn.execute("SELECT table_name, delta_version FROM eos_delta_versions").fetchall()
        )
    assert_same(
        served["kpi_window"],
        {(r["window_start"], r["currency"]): r for r in kpi_rows},
        "DuckDB kpi_window",
    )
    assert_same(
        served["kpi_daily"], {(r["day"], r["currency"]): r for r in daily}, "DuckDB kpi_daily"
    )
    assert recorded == {
        f"orders.{name}": DeltaTable(lake.table_uri(*STREAM.kpi_key(name).path)).version()
        for name in STREAM.serve
    }


def served_rows(
    conn: duckdb.DuckDBPyConnection, name: str, key: tuple[str, ...]
) -> dict[tuple, dict[str, Any]]:
    """Every row of a served DuckDB table by ``key`` (times in UTC)."""
    cursor = conn.execute(f"SELECT * FROM {name}")
    names = [d[0] for d in cursor.description or []]
    rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
    return {tuple(_utc(r[k]) for k in key): {k: _utc(v) for k, v in r.items()} for r in rows}


def _utc(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    if isinstance(value, date):
        return value
    return value
