"""The SQL KPIs of the orders declaration as Spark-computed Delta tables: over window and
entity tables written here with their real schemas, Spark's tables equal DuckDB running the
declared SQL on the same rows, after a first run (whole) and after new and revised windows
(per touched hour, then no commit when nothing changed); served as ``orders.<kpi>`` and checked
by ``duckdb_matches_delta``; a missing source table fails in one line.
"""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
from dagster_pyspark import LazyPySparkResource
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from eos_assets.defs.kpis import (
    SERVING_RECONCILE,
    SQL,
    serving_asset,
    serving_check,
    sql_kpis_asset,
)
from eos_assets.defs.stream import ORDERS
from eos_assets.lib.delta import txn_ids
from eos_assets.lib.derived.window_aggregates import window_schema
from eos_assets.lib.serving import warehouse_file
from eos_assets.lib.spark.spark_env import spark_config
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.warehouse import WarehouseResource
from eos_assets_tests.support.graph import ORDER_STATE_SCHEMA
from eos_assets_tests.support.orders import ORDER_STATE, WINDOW_AGGREGATES

START = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
TYPES = ("order_created", "order_paid", "order_cancelled", "order_refunded")


def windows(scale: int, first: int = 0, last: int = 72) -> pa.Table:
    """5-minute windows ``first`` to ``last`` from START, per event type and two currencies."""
    rows = []
    for i in range(first, last):
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


def duckdb_rows(sql: str, tables: dict[str, pa.Table]) -> set[tuple]:
    """What DuckDB gives for the declared SQL over the same rows (rounded: sums in another
    order differ in the last bits)."""
    with duckdb.connect() as con:
        for name, table in tables.items():
            con.register(name, table)
        return {_rounded(row) for row in con.execute(sql).fetchall()}


def delta_rows(uri: str, columns: list[str]) -> set[tuple]:
    table = DeltaTable(uri).to_pyarrow_table().select(columns)
    return {_rounded(tuple(r.values())) for r in table.to_pylist()}


def _rounded(row: tuple) -> tuple:
    return tuple(
        round(v, 6) if isinstance(v, float) else v.astimezone(UTC) if isinstance(v, datetime) else v
        for v in row
    )


def served(path: Path, sql: str) -> set[tuple]:
    with warehouse_file.connect_reader(path) as conn:
        return {_rounded(row) for row in conn.execute(sql).fetchall()}


def test_sql_kpis_are_spark_delta_tables_equal_to_duckdb_kept_per_touched_hour(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = LakeResource(root=str(tmp_path / "lake"))
    warehouse = tmp_path / "warehouse.duckdb"
    resources = {
        "lake": lake,
        "warehouse": WarehouseResource(path=str(warehouse)),
        # the session of the ``spark`` fixture: getOrCreate finds it
        "pyspark": LazyPySparkResource(spark_config=spark_config("local[2]")),
    }
    kpis, serving, check = (
        sql_kpis_asset(ORDERS),
        serving_asset(ORDERS, SQL),
        serving_check(ORDERS, SQL),
    )
    assert kpis is not None and serving is not None and check is not None
    sql = {kpi.name: kpi.sql for kpi in ORDERS.sql_kpis}
    revenue_uri, status_uri = (
        lake.table_uri(*ORDERS.kpi_key(name).path)
        for name in ("revenue_by_hour", "orders_by_status")
    )
    window_uri = lake.table_uri(*WINDOW_AGGREGATES.path)
    for hour in range(4):  # a file an hour, as batches of windows write them
        write_deltalake(window_uri, windows(1, 12 * hour, 12 * hour + 12), mode="append")
    write_deltalake(lake.table_uri(*ORDER_STATE.path), states())

    def run() -> dict[str, dict]:
        result = dg.materialize([kpis, serving, check], resources=resources, raise_on_error=False)
        assert result.success
        (evaluation,) = result.get_asset_check_evaluations()
        assert evaluation.check_name == SERVING_RECONCILE and evaluation.passed
        return {
            e.materialization.asset_key.path[-1]: {
                k: v.value for k, v in e.materialization.metadata.items()
            }
            for e in result.get_asset_materialization_events()
        }

    def assert_equal_to_duckdb() -> None:
        sources = {
            "window_aggregates": DeltaTable(window_uri).to_pyarrow_table(),
            "entity_state": states(),
        }
        for name, uri in (("revenue_by_hour", revenue_uri), ("orders_by_status", status_uri)):
            want = duckdb_rows(sql[name], sources)
            columns = list(next(k for k in ORDERS.sql_kpis if k.name == name).columns)
            assert delta_rows(uri, columns) == want
            assert served(warehouse, f"SELECT {', '.join(columns)} FROM orders.{name}") == want

    first = run()
    assert first["revenue_by_hour"]["recomputed"] == "whole"
    assert first["orders_by_status"]["source_versions"] == {"entity_state": 0}
    assert_equal_to_duckdb()

    # hour 3 revised (its file rewritten) and hour 4 new: only hours 3 and 4 are recomputed
    DeltaTable(window_uri).merge(
        windows(2, 40, 60),
        "t.window_start = s.window_start AND t.event_type = s.event_type "
        "AND t.currency = s.currency",
        source_alias="s",
        target_alias="t",
    ).when_matched_update_all().when_not_matched_insert_all().execute()
    second = run()
    assert second["revenue_by_hour"]["recomputed"] == (
        f"{(START + timedelta(hours=3)).isoformat()} to {(START + timedelta(hours=4)).isoformat()}"
    )
    assert second["revenue_by_hour"]["source_versions"] == {"window_aggregates": 4}
    assert second["orders_by_status"]["delta_version"] is None  # entity_state did not change
    (commit,) = DeltaTable(revenue_uri).history(1)
    assert json.loads(commit[txn_ids.LINEAGE]) == {"gold/window_aggregates": {"version": 4}}
    assert_equal_to_duckdb()

    third = run()
    assert {m["delta_version"] for m in third.values() if "delta_version" in m} == {None}


def test_a_missing_source_table_fails_with_one_line(spark: SparkSession, tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path / "lake"))
    resources = {
        "lake": lake,
        "pyspark": LazyPySparkResource(spark_config=spark_config("local[2]")),
    }
    asset = sql_kpis_asset(ORDERS)
    assert asset is not None
    write_deltalake(lake.table_uri(*WINDOW_AGGREGATES.path), windows(1))
    result = dg.materialize([asset], resources=resources, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    data = failure.step_failure_data
    assert data.user_failure_data is not None
    message = data.user_failure_data.description or ""
    assert "entity_state does not exist yet" in message and "\n" not in message
