"""The DuckDB mirror: primary keys, upserts of changed rows only, versions in the same commit."""

from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from eos_assets.lib import faults
from eos_assets.lib.serving import serving
from eos_assets_tests.support.graph import KPI_DAILY_SCHEMA

DAY = date(2026, 11, 21)
KPI_DAILY_KEY = ("day", "currency")


def _rows(currencies: list[str], paid: int, revision: int = 1) -> pa.Table:
    counters = {
        "orders_created": 10,
        "orders_paid": paid,
        "orders_cancelled": 1,
        "orders_refunded": 0,
        "paid_amount": 10.0 * paid,
        "refunded_amount": 0.0,
    }
    rows = [
        {
            "day": DAY,
            "currency": c,
            **counters,
            "revenue": 10.0 * paid,
            "average_order_value": 10.0 if paid else None,
            "unique_customers": 3,
            "cancellation_rate": 0.1,
            "revision": revision,
            "silver_version": 1,
        }
        for c in currencies
    ]
    return pa.Table.from_pylist(rows, schema=KPI_DAILY_SCHEMA)


def _served(path: Path) -> dict[str, int]:
    with duckdb.connect(str(path), read_only=True) as conn:
        return dict(conn.execute("SELECT currency, orders_paid FROM kpi_daily").fetchall())


def _versions(path: Path) -> dict[str, int]:
    with duckdb.connect(str(path), read_only=True) as conn:
        return dict(
            conn.execute("SELECT table_name, delta_version FROM eos_delta_versions").fetchall()
        )


def test_mirror_upserts_changed_rows_with_their_version(tmp_path: Path) -> None:
    uri = str(tmp_path / "kpi_daily")
    write_deltalake(uri, _rows(["EUR", "USD"], paid=2))
    write_deltalake(uri, _rows(["GBP"], paid=1), mode="append")
    served = serving.ServedTable("kpi_daily", uri, KPI_DAILY_SCHEMA, KPI_DAILY_KEY)
    db = tmp_path / "serving.duckdb"
    with duckdb.connect(str(db)) as conn:
        first = serving.mirror(conn, [served])
    assert first.upserted == {"kpi_daily": 3} and _versions(db) == {"kpi_daily": 1}

    DeltaTable(uri).merge(
        _rows(["USD"], paid=5, revision=2), "t.day = s.day AND t.currency = s.currency", "s", "t"
    ).when_matched_update_all().when_not_matched_insert_all().execute()
    with duckdb.connect(str(db)) as conn:
        second = serving.mirror(conn, [served])
        again = serving.mirror(conn, [served])
        ddl = conn.execute(
            "SELECT constraint_type FROM duckdb_constraints() WHERE table_name = 'kpi_daily'"
        ).fetchall()
    # The merge rewrote the file of EUR and USD only: GBP is not read again.
    assert second.upserted == {"kpi_daily": 2}
    assert again.upserted == {} and again.skipped == ["kpi_daily"]
    assert _served(db) == {"EUR": 2, "USD": 5, "GBP": 1}
    assert _versions(db) == {"kpi_daily": 2}
    assert ("PRIMARY KEY",) in ddl


def test_interrupted_mirror_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "kpi_daily")
    write_deltalake(uri, _rows(["EUR"], paid=2))
    served = serving.ServedTable("kpi_daily", uri, KPI_DAILY_SCHEMA, KPI_DAILY_KEY)
    db = tmp_path / "serving.duckdb"
    with duckdb.connect(str(db)) as conn:
        serving.mirror(conn, [served])
    write_deltalake(uri, _rows(["EUR", "CHF"], paid=7, revision=2), mode="overwrite")

    def stop(point: str, pid: int | None = None) -> None:
        if point == serving.BEFORE_COMMIT:
            raise RuntimeError(point)

    monkeypatch.setattr(faults, "crash_point", stop)
    with duckdb.connect(str(db)) as conn, pytest.raises(RuntimeError):
        serving.mirror(conn, [served])
    assert _served(db) == {"EUR": 2} and _versions(db) == {"kpi_daily": 0}
    monkeypatch.undo()
    with duckdb.connect(str(db)) as conn:
        serving.mirror(conn, [served])
    assert _served(db) == {"EUR": 7, "CHF": 7} and _versions(db) == {"kpi_daily": 1}
