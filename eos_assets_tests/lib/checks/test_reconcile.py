"""The derived-table checks on rows written by hand: event ids once, final windows equal to a
recount of silver, and DuckDB KPI tables equal to their Delta table at the mirrored version."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
from deltalake import write_deltalake

from eos_assets.lib.checks.reconcile import (
    Served,
    changed_windows,
    new_event_ids_unique,
    read_version,
    reconcile_serving,
    reconcile_windows,
    silver_columns,
    unique_event_ids,
)
from eos_assets.lib.contract.stream_shape import (
    COUNT,
    COUNT_DISTINCT,
    MAX,
    SUM,
    Measure,
    WindowShape,
)

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
SHAPE = WindowShape(
    dimensions=("page",),
    measures=(
        Measure("views", COUNT),
        Measure("users", COUNT_DISTINCT, "user"),
        Measure("amount", SUM, "amount"),
        Measure("longest", MAX, "ms"),
    ),
)
UTC_US = pa.timestamp("us", tz="UTC")
SILVER = pa.table(
    {
        "event_time": pa.array(
            [T0 + timedelta(seconds=s) for s in (10, 20, 30, 70, 80, 125)], UTC_US
        ),
        "page": ["/a", "/a", "/b", "/a", None, "/a"],
        "user": ["u1", "u1", "u2", "u3", "u3", "u1"],
        "amount": [1.1, 2.2, 0.5, 1.0, 0.0, 9.0],
        "ms": pa.array([5, 7, 3, 4, 2, 1], pa.int64()),
    }
)
WATERMARK_US = int((T0 + 2 * MINUTE).timestamp() * 1_000_000)  # windows 10:00 and 10:01 final


def gold(*windows: tuple[int, str, int, int, float, int]) -> pa.Table:
    """Window rows ``(minute, page, views, users, amount, longest)``."""
    starts = [T0 + m * MINUTE for m, *_ in windows]
    columns = list(zip(*[w[1:] for w in windows], strict=True))
    return pa.table(
        {
            "window_start": pa.array(starts, UTC_US),
            "window_end": pa.array([s + MINUTE for s in starts], UTC_US),
            **dict(zip(["page", "views", "users", "amount", "longest"], columns, strict=True)),
        }
    )


RIGHT = [
    (0, "/a", 2, 1, 3.3, 7),  # silver sums 1.1 + 2.2 = 3.3000000000000003: within tolerance
    (0, "/b", 1, 1, 0.5, 3),
    (1, "/a", 1, 1, 1.0, 4),
    (1, "", 1, 1, 0.0, 2),  # a missing dimension value is kept as ""
    (2, "/a", 99, 9, 99.0, 99),  # not final yet: not compared
]


def test_final_windows_equal_to_silver_pass() -> None:
    assert silver_columns(SHAPE) == ["event_time", "page", "user", "amount", "ms"]
    report = reconcile_windows(SHAPE, gold(*RIGHT), SILVER, 60, WATERMARK_US)
    assert report.ok, report.problems
    assert report.summary() == "4 final windows match silver: 5 events"
    assert report.counts["silver_final_windows"] == 4


def test_a_wrong_measure_a_missing_and_an_invented_window_fail() -> None:
    wrong = [
        (0, "/a", 2, 1, 3.31, 7),
        (0, "/c", 1, 1, 0.0, 1),
        RIGHT[2],
        RIGHT[3],
    ]
    report = reconcile_windows(SHAPE, gold(*wrong), SILVER, 60, WATERMARK_US)
    assert report.problem_count == 3
    assert report.problems[0].endswith("/a: amount 3.31 vs silver 3.3000000000000003")
    assert report.problems[1].endswith(
        "/b: views None vs silver 1, users None vs silver 1, amount None vs silver 0.5, "
        "longest None vs silver 3"
    )
    assert report.problems[2].endswith(
        "/c: views 1 vs silver None, users 1 vs silver None, amount 0.0 vs silver None, "
        "longest 1 vs silver None"
    )
    assert report.summary().startswith("3 problem(s): window ")


def test_no_watermark_means_no_final_window() -> None:
    report = reconcile_windows(SHAPE, gold(RIGHT[0]), SILVER, 60, None)
    assert report.ok and report.summary() == "no final window yet (no watermark)"


def test_duplicated_and_null_event_ids_are_named_with_where_they_came_from() -> None:
    silver = pa.table(
        {
            "event_id": ["a", "b", "a", None, "c", "a"],
            "topic": ["t"] * 6,
            "partition": [0, 0, 1, 0, 0, 1],
            "offset": [4, 5, 2, 6, 7, 9],
        }
    )
    report = unique_event_ids(silver)
    assert report.problems == [
        "1 row(s) without event_id",
        "event_id a x3 (t[1]@2, t[0]@4, t[1]@9)",  # by offset,
    ]
    assert report.counts == {
        "rows": 6,
        "distinct_event_ids": 3,
        "null_event_ids": 1,
        "duplicated_event_ids": 1,
    }
    assert unique_event_ids(silver.slice(0, 2)).summary() == (
        "2 rows, 2 distinct event_ids: each exactly once"
    )


def test_added_event_ids_are_checked_among_themselves_and_against_the_proven_ones() -> None:
    proven = pa.table({"event_id": ["a", "b", "c"]})
    clean = new_event_ids_unique(pa.table({"event_id": ["d", "e"]}), proven, 4)
    assert clean.ok, clean.summary()
    assert clean.summary() == (
        "2 rows added since version 4: each event_id once, and none among the 3 rows proven then"
    )
    assert (clean.counts["rows"], clean.counts["rows_checked_since_version"]) == (5, 4)
    broken = new_event_ids_unique(pa.table({"event_id": ["d", "d", "b", None]}), proven, 4)
    assert not broken.ok
    assert (broken.counts["duplicated_event_ids"], broken.counts["null_event_ids"]) == (2, 1)
    assert broken.problem_count == 3


def test_the_windows_to_compare_again_are_the_newly_final_and_the_touched_ones() -> None:
    minute = 60_000_000
    w0 = int(T0.timestamp() * 1_000_000) // minute

    def at(minutes: list[float]) -> pa.Array:
        return pa.array([T0 + timedelta(minutes=m) for m in minutes], UTC_US)

    numbers = changed_windows(
        60,
        (w0 + 5) * minute + 1,  # windows up to w0+4 were final
        (w0 + 8) * minute,  # now up to w0+7
        at([1, 9]),  # a gold row of w0+1 rewritten; w0+9 is not final: not compared
        at([2.5, 6]),  # silver rows added to w0+2 and w0+6
    )
    assert [n - w0 for n in numbers] == [1, 2, 5, 6, 7]
    nothing = changed_windows(60, (w0 + 8) * minute, (w0 + 8) * minute, at([]), at([]))
    assert nothing == []


def kpi(day: list[str], orders: list[int]) -> pa.Table:
    return pa.table({"day": day, "orders": pa.array(orders, pa.int64())})


def test_duckdb_tables_are_compared_with_delta_at_the_mirrored_version(tmp_path: Path) -> None:
    uri = str(tmp_path / "kpi_daily")
    write_deltalake(uri, kpi(["d1", "d2"], [3, 4]))
    write_deltalake(uri, kpi(["d3"], [5]), mode="append")  # not mirrored yet: no alarm
    assert read_version(uri, 0, ["orders"]).column("orders").to_pylist() == [3, 4]
    con = duckdb.connect()
    con.execute("CREATE TABLE versions (table_name VARCHAR, delta_version BIGINT)")
    con.execute("INSERT INTO versions VALUES ('kpi_daily', 0)")
    con.execute(
        "CREATE TABLE kpi_daily AS SELECT * FROM (VALUES ('d1', 3), ('d2', 4)) v(day, orders)"
    )
    served = [Served("kpi_daily", ["day"], uri), Served("kpi_window", ["day"], uri)]
    report = reconcile_serving(con, served[:1], "versions")
    assert report.ok, report.problems
    assert report.summary() == "DuckDB equals Delta, row by row: kpi_daily@v0 (2 rows)"
    con.execute("UPDATE kpi_daily SET orders = 9 WHERE day = 'd2'")
    report = reconcile_serving(con, served, "versions")
    assert report.problems == [
        "kpi_daily key ('d2',) differs from Delta v0",
        "kpi_window: never mirrored into DuckDB",
    ]
    assert report.counts == {"kpi_daily_rows": 2, "kpi_daily_delta_version": 0}
