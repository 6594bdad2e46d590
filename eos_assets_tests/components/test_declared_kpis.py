"""The SQL KPIs the orders declaration serves: DuckDB runs their SQL over the stream's window and
entity Delta tables and serves them as ``orders.<kpi>``; the results equal the same KPIs
computed here in Python from the rows written.

The two Delta tables are written directly with their real schemas (no Spark), so the test
checks the declared-KPI step alone: its results, its idempotence, and its one-line failure
when a source table is missing.
"""

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from eos_assets.declaration import StreamModel
from eos_assets.defs.kpis import sql_kpis_asset
from eos_assets.defs.stream import ORDERS, Stream
from eos_assets.lib.derived.window_aggregates import window_schema
from eos_assets.lib.serving import warehouse_file
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.warehouse import WarehouseResource
from eos_assets_tests.support.declared import orders
from eos_assets_tests.support.graph import ORDER_STATE_SCHEMA
from eos_assets_tests.support.orders import ORDER_STATE, WINDOW_AGGREGATES

START = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
TYPES = ("order_created", "order_paid", "order_cancelled", "order_refunded")


def windows(scale: int) -> pa.Table:
    """Six hours of 5-minute windows, per event type and two currencies."""
    rows = []
    for i in range(72):
        start = START + timedelta(minutes=5 * i)
        for t, kind in enumerate(TYPES):
            for currency in ("EUR", "USD"):
                n = (i % 7 + t + 1) * scale
                rows.append(
                    {
                        "window_start": start,
                        "window_end": start + timedelta(minutes=5),
                        "event_type": kind,
                        "currency": currency,
                        "event_count": n,
                        "distinct_orders": n,
                        "distinct_customers": n // 2 + 1,
                        "amount_sum": (7.25 if t == 1 else 1.5) * n + 0.01 * i,
                        "late_events": 0,
                        "revision": 1,
                        "is_final": True,
                        "watermark": start,
                        "silver_version": scale,
                    }
                )
    return pa.Table.from_pylist(rows, window_schema(ORDERS.windows, ORDERS.contract))


def states() -> pa.Table:
    statuses = ("created", "paid", "cancelled", "refunded")
    rows = []
    for i in range(200):
        status = statuses[i % 4]
        rows.append(
            {
                "order_id": f"o{i:04d}",
                "status": status,
                "customer_id": f"c{i % 37}",
                "currency": ("EUR", "USD")[(i // 4) % 2],
                "amount": float(i),
                "created_amount": float(i),
                "paid_amount": float(i) if status != "created" else 0.0,
                "cancelled_amount": 0.0,
                "refunded_amount": 0.0,
                "event_count": 1 + i % 3,
                "first_event_time": START,
                "last_event_time": START + timedelta(seconds=i),
                "last_event_id": f"e{i}",
                "last_topic": "orders",
                "last_partition": 0,
                "last_offset": i,
                "silver_version": 1,
            }
        )
    return pa.Table.from_pylist(rows, ORDER_STATE_SCHEMA)


def expected_revenue(table: pa.Table) -> dict[tuple[datetime, str], tuple[float, int]]:
    paid: dict = defaultdict(float)
    refunded: dict = defaultdict(float)
    count: dict = defaultdict(int)
    for row in table.to_pylist():
        key = (row["window_start"].replace(minute=0), row["currency"])
        if row["event_type"] == "order_paid":
            paid[key] += row["amount_sum"]
            count[key] += row["event_count"]
        elif row["event_type"] == "order_refunded":
            refunded[key] += row["amount_sum"]
    return {k: (paid[k] - refunded[k], count[k]) for k in paid}


def expected_status(table: pa.Table) -> dict:
    out: dict = defaultdict(lambda: [0, 0.0])
    for row in table.to_pylist():
        entry = out[(row["status"], row["currency"])]
        entry[0] += 1
        entry[1] += row["paid_amount"]
    return {k: (v[0], v[1]) for k, v in out.items()}


def flat(values: dict) -> dict:
    """``{key: (a, b)}`` as ``{(key, 0): a, (key, 1): b}``, for pytest.approx."""
    return {(k, j): v for k, pair in values.items() for j, v in enumerate(pair)}


def served(path: Path, sql: str) -> list[tuple]:
    with warehouse_file.connect_reader(path) as conn:
        return conn.execute(sql).fetchall()


def _present(asset: dg.AssetsDefinition | None) -> dg.AssetsDefinition:
    assert asset is not None, "the orders declaration serves SQL KPIs"
    return asset


def test_the_declared_kpis_are_served_and_equal_python(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path / "lake"))
    warehouse = tmp_path / "warehouse.duckdb"
    resources = {"lake": lake, "warehouse": WarehouseResource(path=str(warehouse))}
    asset = _present(sql_kpis_asset(Stream.of(StreamModel.model_validate(orders()["attributes"]))))
    assert asset.key == dg.AssetKey(["orders", "serving", "sql_kpis"])

    def run() -> dict:
        result = dg.materialize([asset], resources=resources, raise_on_error=False)
        assert result.success
        (event,) = result.get_asset_materialization_events()
        return {k: v.value for k, v in event.materialization.metadata.items()}

    window_uri = lake.table_uri(*WINDOW_AGGREGATES.path)
    state_uri = lake.table_uri(*ORDER_STATE.path)
    write_deltalake(window_uri, windows(1))
    write_deltalake(state_uri, states())
    first = run()
    assert first["up_to_date"] is False and first["delta_versions"] == {
        "window_aggregates": 0,
        "entity_state": 0,
    }
    revenue = served(
        warehouse, "SELECT hour, currency, revenue, orders_paid FROM orders.revenue_by_hour"
    )
    got = {(h.astimezone(UTC), c): (r, n) for h, c, r, n in revenue}
    assert flat(got) == pytest.approx(flat(expected_revenue(windows(1))))
    assert first["rows"] == {"revenue_by_hour": len(got), "orders_by_status": 8}
    status = served(
        warehouse, "SELECT status, currency, orders, paid_amount FROM orders.orders_by_status"
    )
    assert {(s, c): (n, p) for s, c, n, p in status} == expected_status(states())

    assert run()["up_to_date"] is True  # same Delta versions: nothing rewritten

    write_deltalake(window_uri, windows(3), mode="overwrite")
    third = run()
    assert third["up_to_date"] is False and third["delta_versions"]["window_aggregates"] == 1
    revenue = served(
        warehouse, "SELECT hour, currency, revenue, orders_paid FROM orders.revenue_by_hour"
    )
    got = {(h.astimezone(UTC), c): (r, n) for h, c, r, n in revenue}
    assert flat(got) == pytest.approx(flat(expected_revenue(windows(3))))


def test_a_missing_source_table_fails_with_one_line(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path / "lake"))
    resources = {"lake": lake, "warehouse": WarehouseResource(path=str(tmp_path / "w.duckdb"))}
    asset = _present(sql_kpis_asset(Stream.of(StreamModel.model_validate(orders()["attributes"]))))
    write_deltalake(lake.table_uri(*WINDOW_AGGREGATES.path), windows(1))
    result = dg.materialize([asset], resources=resources, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    data = failure.step_failure_data
    assert data.user_failure_data is not None
    message = data.user_failure_data.description or ""
    assert "entity_state does not exist yet" in message and "\n" not in message
    assert not (tmp_path / "w.duckdb").exists()
