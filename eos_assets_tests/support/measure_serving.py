"""What serving by copy-and-swap costs against writing the DuckDB file in place.

``python -m eos_assets_tests.support.measure_serving --windows 6700 --runs 20`` writes KPI Delta
tables with ``--windows`` window rows (the size a stream of 5M events makes: the generator's event
clock advances 0.1 s per event, so 5M events span ~5.8 days, ~1,670 five-minute windows of 4
currencies), then times ``--runs`` serving runs that each change the latest ``--touched``
windows and today's daily rows (what one incremental run does), once in place
(``serving.mirror`` on the file itself) and once by ``serving.serve`` (copy, mirror, swap)
while a reader holds the file open.
"""

import argparse
import statistics
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from eos_assets.lib.serving import serving
from eos_assets_tests.support.graph import KPI_DAILY_SCHEMA, KPI_WINDOW_SCHEMA

CURRENCIES = ("EUR", "USD", "GBP", "CHF")
START = datetime(2026, 11, 21, tzinfo=UTC)


def _measures(paid: int) -> dict:
    counters = {
        "orders_created": 10 + paid,
        "orders_paid": paid,
        "orders_cancelled": 1,
        "orders_refunded": 0,
        "paid_amount": 10.0 * paid,
        "refunded_amount": 0.0,
    }
    derived = {
        "revenue": counters["paid_amount"] - counters["refunded_amount"],
        "average_order_value": 10.0,
        "unique_customers": 3,
        "cancellation_rate": counters["orders_cancelled"] / counters["orders_created"],
    }
    return {**counters, **derived, "revision": paid, "silver_version": paid}


def _windows(first: int, count: int, paid: int) -> pa.Table:
    rows = [
        {
            "window_start": START + timedelta(minutes=5 * i),
            "window_end": START + timedelta(minutes=5 * (i + 1)),
            "currency": c,
            **_measures(paid),
        }
        for i in range(first, first + count)
        for c in CURRENCIES
    ]
    return pa.Table.from_pylist(rows, schema=KPI_WINDOW_SCHEMA)


def _days(count: int, paid: int) -> pa.Table:
    rows = [
        {"day": date(2026, 11, 21) + timedelta(days=d), "currency": c, **_measures(paid)}
        for d in range(count)
        for c in CURRENCIES
    ]
    return pa.Table.from_pylist(rows, schema=KPI_DAILY_SCHEMA)


def _upsert(uri: str, rows: pa.Table, keys: tuple[str, ...]) -> None:
    on = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    DeltaTable(uri).merge(rows, on, "s", "t").when_matched_update_all().when_not_matched_insert_all(
    ).execute()  # fmt: skip


def main() -> int:
    """Print the median and max seconds per run of both ways, and the file size."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--windows", type=int, default=6700)
    parser.add_argument("--touched", type=int, default=4)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    windows, days = args.windows // len(CURRENCIES), max(1, args.windows // len(CURRENCIES) // 288)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        tables = [
            serving.ServedTable(
                "kpi_window",
                str(root / "kpi_window"),
                KPI_WINDOW_SCHEMA,
                ("window_start", "currency"),
            ),
            serving.ServedTable(
                "kpi_daily", str(root / "kpi_daily"), KPI_DAILY_SCHEMA, ("day", "currency")
            ),
        ]
        write_deltalake(tables[0].uri, _windows(0, windows, 1))
        write_deltalake(tables[1].uri, _days(days, 1))
        in_place, swapped = root / "in_place.duckdb", root / "swapped.duckdb"
        with duckdb.connect(str(in_place)) as conn:
            serving.mirror(conn, tables)
        serving.serve(str(swapped), tables)
        reader = duckdb.connect(str(swapped), read_only=True)
        times: dict[str, list[float]] = {"in place": [], "copy and swap": []}
        for run in range(args.runs):
            paid = run + 2
            _upsert(
                tables[0].uri,
                _windows(windows - args.touched, args.touched, paid),
                ("window_start", "currency"),
            )
            _upsert(tables[1].uri, _days(1, paid), ("day", "currency"))  # fmt: skip
            began = time.perf_counter()
            with duckdb.connect(str(in_place)) as conn:
                serving.mirror(conn, tables)
            times["in place"].append(time.perf_counter() - began)
            began = time.perf_counter()
            serving.serve(str(swapped), tables)
            times["copy and swap"].append(time.perf_counter() - began)
        held = reader.execute("SELECT max(delta_version) FROM eos_delta_versions").fetchone()
        reader.close()
        size = swapped.stat().st_size
        print(
            f"{windows * len(CURRENCIES)} kpi_window rows, {days * len(CURRENCIES)} kpi_daily rows,"
            f" file {size / 1e6:.1f} MB, {args.runs} runs of {args.touched} windows each; "
            f"held reader still at version {held[0] if held else None}"
        )
        for way, values in times.items():
            print(
                f"  {way}: median {statistics.median(values) * 1000:.1f} ms, "
                f"max {max(values) * 1000:.1f} ms per run"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
