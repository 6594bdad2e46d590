"""Declared KPI tables on a real SparkSession: orders' declared kpi_window and kpi_daily (and
the same measures per minute) equal the oracle batch after batch;
one Spark job per batch for all; formulas, ``when``, min and max, keys without time; a stop
between a KPI's two commits or between two KPIs, then a re-run, is exact."""

import base64
import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

import eos_assets.streams
from eos_assets.declaration import read_declaration
from eos_assets.devkit.events import Mix, plan_transactions
from eos_assets.lib import faults
from eos_assets.lib.contract.schema import to_bronze_table
from eos_assets.lib.contract.stream_shape import (
    COUNT,
    COUNT_DISTINCT,
    DAY,
    ISO8601,
    LONG,
    MAX,
    MIN,
    STRING,
    SUM,
    WINDOW,
    Contract,
    KpiMeasure,
    KpiSpec,
    PayloadField,
)
from eos_assets.lib.delta import txn_ids
from eos_assets.lib.delta.delta_io import read_rows
from eos_assets.lib.derived import kpi_tables
from eos_assets.lib.derived.kpi_compute import kpi_schema
from eos_assets.lib.derived.kpi_formula import check_formula, evaluate
from eos_assets.lib.derived.kpi_tables import KpiTable, update_kpis
from eos_assets.lib.derived.silver_events import update_events
from eos_assets.lib.errors import EosError
from eos_assets.stream_specs import contract, kpi_specs
from eos_assets_tests.support.oracle import expected

_DECLARED = read_declaration(eos_assets.streams.declaration("orders"))
ORDERS = contract(_DECLARED)
START = datetime(2026, 11, 21, 23, 57, tzinfo=UTC)  # the stream crosses midnight
GRACE = timedelta(minutes=10)
FIVE, ONE = timedelta(minutes=5), timedelta(minutes=1)
T = TypeVar("T")
MIX = {"duplicate_ratio": 0.05, "late_ratio": 0.04, "abort_ratio": 0.15, "malformed_ratio": 0.03}


KINDS = ("created", "paid", "cancelled", "refunded")
# The columns users query in DuckDB: they stay what they are as the code behind them changes.
KPI_WINDOW_COLUMNS = [
    "window_start", "window_end", "currency", "orders_created", "orders_paid",
    "orders_cancelled", "orders_refunded", "paid_amount", "refunded_amount", "revenue",
    "average_order_value", "unique_customers", "cancellation_rate", "revision", "silver_version",
]  # fmt: skip


def _of(kind: str) -> tuple[tuple[str, str], ...]:
    return (("event_type", f"order_{kind}"),)


# The revenue measures as the orders declaration states them, in its columns' order.
REVENUE = (
    *[KpiMeasure(f"orders_{k}", COUNT, when=_of(k)) for k in KINDS],
    KpiMeasure("paid_amount", SUM, "amount", _of("paid")),
    KpiMeasure("refunded_amount", SUM, "amount", _of("refunded")),
    KpiMeasure("revenue", formula="paid_amount - refunded_amount"),
    KpiMeasure("average_order_value", formula="paid_amount / orders_paid"),
    KpiMeasure("unique_customers", COUNT_DISTINCT, "customer_id"),
    KpiMeasure("cancellation_rate", formula="orders_cancelled / orders_created"),
)


def _window(name: str, size: timedelta) -> KpiSpec:
    return KpiSpec(name, WINDOW, ("currency",), REVENUE, int(size.total_seconds() * 1e6))


KPI_WINDOW, KPI_DAILY = kpi_specs(_DECLARED)
KPI_MINUTE = _window("kpi_minute", ONE)


class Lake:
    """A stream's bronze and silver in a folder: batches of order records, as the producer
    makes them, committed to bronze and inserted into silver; their manifest for the oracle."""

    def __init__(self, spark: SparkSession, root: Path, kpis: Iterable[KpiSpec]) -> None:
        self.spark, self.root = spark, root
        self.bronze, self.silver = str(root / "bronze"), str(root / "silver")
        self.tables = [self.table(spec) for spec in kpis]
        self.batches: list[list[dict[str, Any]]] = []
        self.offset = 0

    def table(self, spec: KpiSpec) -> KpiTable:
        """Where a KPI lives in this lake."""
        return KpiTable(spec, str(self.root / spec.name), str(self.root / f"{spec.name}_distinct"))

    def send(self, *runs: Mapping[str, Any]) -> None:
        """One batch: every run of the producer (``plan_transactions`` options) into bronze
        in one version, then silver."""
        lines, offsets, values = [], [], []
        for run in runs:
            mix = Mix(**MIX, late_by=run.get("late_by", timedelta(hours=2)))
            plans = plan_transactions(run["seed"], run["start"], run["count"], 100, mix)
            for plan in plans:
                for record in plan.records:
                    status = "aborted" if plan.abort else "committed"
                    value = base64.b64encode(record.value or b"").decode()
                    lines.append(
                        {"status": status, "kind": record.kind, "topic": "orders"}
                        | {"partition": 0, "offset": self.offset, "value_b64": value}
                    )
                    if not plan.abort:
                        offsets.append(self.offset)
                        values.append(record.value)
                    self.offset += 1
        n = len(values)
        rows = to_bronze_table(ORDERS, "orders", 0, offsets, [0] * n, [None] * n, values)
        write_deltalake(self.bronze, rows, mode="append")
        update_events(self.spark, ORDERS, self.bronze, self.silver)
        self.batches.append(lines)

    def kpis(self, **options: Any) -> dict[str, kpi_tables.KpiOutcome]:
        """Every KPI of the lake brought up to date in one call."""
        return update_kpis(self.spark, self.tables, ORDERS, self.silver, grace=GRACE, **options)

    def rows(self, spec: KpiSpec, uri: str | None = None) -> dict[tuple, dict[str, Any]]:
        """A KPI table's rows by key."""
        schema = kpi_schema(spec, ORDERS)
        found = read_rows(DeltaTable(uri or str(self.root / spec.name)), schema).to_pylist()
        names = [n for n in spec.key if n != "window_end"]
        return {tuple(r[n] for n in names): r for r in found}


def assert_same(actual: Mapping[tuple, Mapping], wanted: Mapping[tuple, Mapping], what: str):
    """Same keys; every wanted field equal (floats with a relative tolerance of 1e-9)."""
    assert actual.keys() == wanted.keys(), f"{what}: keys {actual.keys() ^ wanted.keys()}"
    diffs = [
        f"{key} {name}: got {actual[key][name]!r}, want {value!r}"
        for key, row in wanted.items()
        for name, value in row.items()
        if not _equal(actual[key][name], value)
    ]
    assert not diffs, f"{what}: {len(diffs)} differences, e.g. " + "; ".join(diffs[:6])


def _equal(got: Any, want: Any) -> bool:
    if isinstance(got, float) and isinstance(want, float):
        return math.isclose(got, want, rel_tol=1e-9)
    return got == want


def test_orders_kpis_equal_the_oracle(spark: SparkSession, tmp_path: Path) -> None:
    assert (
        _window("kpi_window", FIVE),
        KpiSpec("kpi_daily", DAY, ("currency",), REVENUE),
    ) == (KPI_WINDOW, KPI_DAILY), "the orders declaration states the revenue KPIs"
    lake = Lake(spark, tmp_path, [KPI_WINDOW, KPI_DAILY, KPI_MINUTE])
    assert kpi_schema(KPI_WINDOW, ORDERS).names == KPI_WINDOW_COLUMNS
    assert kpi_schema(KPI_DAILY, ORDERS).names == ["day", *KPI_WINDOW_COLUMNS[2:]]
    batches = [
        [{"seed": 11, "start": START, "count": 700}],
        [{"seed": 12, "start": START + timedelta(seconds=200), "count": 700, "late_by": FIVE}],
        # A restarted producer re-sends the start of the first stream, then goes on.
        [
            {"seed": 11, "start": START, "count": 300},
            {"seed": 13, "start": START + timedelta(seconds=420), "count": 500, "late_by": FIVE},
        ],
    ]
    outcomes: dict[str, kpi_tables.KpiOutcome] = {}
    for number, runs in enumerate(batches):
        lake.send(*runs)
        outcomes, jobs = _spark_jobs(spark, f"kpis-{number}", lake.kpis)
        assert jobs == 1, "one Spark job for every KPI of the batch"

        first = 0 if number == 0 else number + 1  # silver version 0 is its empty creation
        assert [o.consumed for o in outcomes.values()] == [(first, number + 1)] * 3
        assert [o.shared_job for o in outcomes.values()] == [False, True, True], "one job"
        window, daily = lake.rows(KPI_WINDOW), lake.rows(KPI_DAILY)
        want = expected(lake.batches, FIVE, GRACE)
        assert_same(window, want.kpi_window, "kpi_window vs the oracle")
        assert_same(daily, want.kpi_daily, "kpi_daily vs the oracle")
        minute = expected(lake.batches, FIVE, GRACE, kpi_size=ONE).kpi_window
        assert_same(lake.rows(KPI_MINUTE), minute, "1-minute windows vs the oracle")

    want = expected(lake.batches, FIVE, GRACE)
    minute = expected(lake.batches, FIVE, GRACE, kpi_size=ONE).kpi_window
    assert len({day for day, _ in want.kpi_daily}) == 2, "the scenario must cross midnight"
    assert any(r["revision"] == 3 for r in want.kpi_daily.values())
    assert any(r["average_order_value"] is None for r in minute.values())
    top = max(e.event_time for e in want.events.values())
    assert outcomes["kpi_daily"].watermark == top - GRACE
    # Each commit names what its rows reflect, down to the bronze version (its txn: offsets).
    (commit,) = DeltaTable(lake.table(KPI_DAILY).uri).history(1)
    assert json.loads(commit[txn_ids.LINEAGE]) == {
        "silver/events": {"version": 3, "bronze/raw_events": DeltaTable(lake.bronze).version()}
    }
    versions = {t.spec.name: DeltaTable(t.uri).version() for t in lake.tables}
    again = lake.kpis()
    assert all(o.version is None and o.consumed is None for o in again.values())
    assert {t.spec.name: DeltaTable(t.uri).version() for t in lake.tables} == versions


def _spark_jobs(spark: SparkSession, group: str, run: Callable[[], T]) -> tuple[T, int]:
    """What ``run`` returns, and the Spark jobs it ran."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        result = run()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return result, len(context.statusTracker().getJobIdsForGroup(group))


class Stopped(Exception):
    """Raised at a fault point instead of dying: the tables are left as a kill leaves them."""


def _stop_at(point: str, reached: str) -> None:
    if reached == point:
        raise Stopped(point)


def test_a_stop_between_the_distinct_values_and_the_rows_then_a_rerun_is_exact(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = _two_batches(spark, tmp_path)
    monkeypatch.setattr(
        faults, "crash_point", functools.partial(_stop_at, kpi_tables.AFTER_DISTINCT)
    )
    with pytest.raises(Stopped):
        lake.kpis()
    monkeypatch.undo()
    daily = lake.tables[0]
    assert daily.distinct_uri is not None
    assert DeltaTable(daily.distinct_uri).transaction_version(kpi_tables.APP) == 2
    assert DeltaTable(daily.uri).transaction_version(kpi_tables.APP) == 1

    outcomes = lake.kpis()
    assert outcomes["kpi_daily"].distinct_version is None, "its distinct values were committed"
    assert outcomes["kpi_daily"].new_distinct > 0
    _assert_exact(lake)


def test_a_stop_after_one_kpi_committed_then_a_rerun_is_exact(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = _two_batches(spark, tmp_path)
    monkeypatch.setattr(faults, "crash_point", functools.partial(_stop_at, kpi_tables.AFTER_COMMIT))
    with pytest.raises(Stopped):
        lake.kpis()
    monkeypatch.undo()
    daily, window = lake.tables
    assert DeltaTable(daily.uri).transaction_version(kpi_tables.APP) == 2
    assert DeltaTable(window.uri).transaction_version(kpi_tables.APP) == 1

    outcomes = lake.kpis()
    assert outcomes["kpi_daily"].version is None and outcomes["kpi_window"].version is not None
    assert not outcomes["kpi_window"].shared_job, "the aggregates are computed again"
    _assert_exact(lake)


def _two_batches(spark: SparkSession, root: Path) -> Lake:
    """A lake whose KPIs consumed its first batch of two."""
    lake = Lake(spark, root, [KPI_DAILY, KPI_WINDOW])
    lake.send({"seed": 21, "start": START, "count": 500})
    lake.kpis()
    # Late customers of the first day and the first customers of the second.
    lake.send({"seed": 22, "start": START + timedelta(seconds=150), "count": 500})
    return lake


def _assert_exact(lake: Lake) -> None:
    want = expected(lake.batches, FIVE, GRACE)
    assert_same(lake.rows(KPI_DAILY), want.kpi_daily, "kpi_daily after the re-run")
    assert_same(lake.rows(KPI_WINDOW), want.kpi_window, "kpi_window after the re-run")


VIEWS = Contract(
    id_field="view_id",
    time_field="viewed_at",
    time_format=ISO8601,
    fields=(
        PayloadField("session_id", STRING, required=True),
        PayloadField("page", STRING),
        PayloadField("kind", STRING),
        PayloadField("duration_ms", LONG),
    ),
)
T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
PAGES = KpiSpec(
    "pages",
    None,
    ("page",),
    (
        KpiMeasure("views", COUNT),
        KpiMeasure("clicks", COUNT, when=(("kind", "click"),)),
        KpiMeasure("never", COUNT, when=(("kind", "never"),)),
        KpiMeasure("time_ms", SUM, "duration_ms"),
        KpiMeasure("click_ms", SUM, "duration_ms", (("kind", "click"),)),
        KpiMeasure("longest", MAX, "duration_ms"),
        KpiMeasure("shortest", MIN, "duration_ms"),
        KpiMeasure("sessions", COUNT_DISTINCT, "session_id"),
        KpiMeasure("clicking", COUNT_DISTINCT, "session_id", (("kind", "click"),)),
        KpiMeasure("spread", formula="longest - shortest"),
        KpiMeasure("per_never", formula="time_ms / never"),
        KpiMeasure("share", formula="clicks * 100 / views"),
    ),
)
DAYS = KpiSpec("days", DAY, (), (KpiMeasure("views", COUNT), KpiMeasure("first", MIN, "page")))


def _views(lake_root: Path, views: list[tuple], first_offset: int) -> None:
    """Page views (id, seconds after T0, session, page, kind, duration) into bronze."""
    values = []
    for n, seconds, session, page, kind, ms in views:
        value = {"view_id": f"v-{n}", "viewed_at": (T0 + timedelta(seconds=seconds)).isoformat()}
        fields = {"session_id": session, "page": page, "kind": kind, "duration_ms": ms}
        value |= {k: v for k, v in fields.items() if v is not None}
        values.append(json.dumps(value).encode())
    offsets = list(range(first_offset, first_offset + len(values)))
    n = len(values)
    rows = to_bronze_table(VIEWS, "views", 0, offsets, [0] * n, [None] * n, values)
    write_deltalake(str(lake_root / "bronze"), rows, mode="append")


def test_formulas_when_min_max_and_keys_without_time(spark: SparkSession, tmp_path: Path) -> None:
    tables = [KpiTable(PAGES, str(tmp_path / "pages"), str(tmp_path / "pages_d"))]
    tables.append(KpiTable(DAYS, str(tmp_path / "days")))
    bronze, silver = str(tmp_path / "bronze"), str(tmp_path / "silver")

    def run() -> dict[str, dict[tuple, dict[str, Any]]]:
        update_events(spark, VIEWS, bronze, silver)
        update_kpis(spark, tables, VIEWS, silver)
        return {
            t.spec.name: {
                tuple(r[k] for k in t.spec.key): r
                for r in read_rows(DeltaTable(t.uri), kpi_schema(t.spec, VIEWS)).to_pylist()
            }
            for t in tables
        }

    _views(
        tmp_path,
        [
            (1, 5, "s-1", "/a", "click", 100),
            (2, 6, "s-2", "/a", None, 300),
            (3, 7, "s-1", None, None, None),  # no page: grouped under ""
        ],
        0,
    )
    first = run()
    a = first["pages"][("/a",)]
    assert (a["views"], a["clicks"], a["never"], a["time_ms"], a["click_ms"]) == (2, 1, 0, 400, 100)
    assert (a["longest"], a["shortest"], a["sessions"], a["clicking"]) == (300, 100, 2, 1)
    assert a["spread"] == 200.0 and a["per_never"] is None, "x / 0 is null"
    assert a["share"] == 50.0
    blank = first["pages"][("",)]
    assert (blank["time_ms"], blank["longest"], blank["spread"]) == (0, None, None), "null operand"
    assert (blank["sessions"], blank["clicking"], blank["share"]) == (1, 0, 0.0)
    assert first["days"] == {
        (date(2026, 11, 21),): {
            "day": date(2026, 11, 21),
            "views": 3,
            "first": "/a",
            "revision": 1,
            "silver_version": 1,
        }
    }

    _views(
        tmp_path,
        [
            (4, 86_400, "s-1", "/a", "click", 50),  # the next day; s-1 clicked before
            (5, 86_401, "s-3", "/a", "click", 900),
            (6, 8, "s-2", "", None, 70),  # an empty page is the missing page
        ],
        3,
    )
    second = run()
    a = second["pages"][("/a",)]
    assert (a["views"], a["clicks"], a["time_ms"], a["click_ms"]) == (4, 3, 1350, 1050)
    assert (a["longest"], a["shortest"], a["spread"]) == (900, 50, 850.0)
    assert (a["sessions"], a["clicking"], a["revision"]) == (3, 2, 2)
    assert a["share"] == 75.0
    blank = second["pages"][("",)]
    assert (blank["views"], blank["longest"], blank["sessions"], blank["revision"]) == (2, 70, 2, 2)
    assert blank["spread"] == 0.0
    assert {k: r["views"] for k, r in second["days"].items()} == {
        (date(2026, 11, 21),): 4,
        (date(2026, 11, 22),): 2,
    }
    assert second["days"][(date(2026, 11, 22),)]["first"] == "/a"

    window = KpiSpec("pages", WINDOW, ("page",), (KpiMeasure("views", COUNT),), 60_000_000)
    with pytest.raises(EosError, match="other columns"):
        update_kpis(spark, [KpiTable(window, tables[0].uri)], VIEWS, silver)
    sized = [KpiTable(window, str(tmp_path / "sized"))]
    update_kpis(spark, sized, VIEWS, silver)
    resized = KpiSpec("pages", WINDOW, ("page",), window.measures, 120_000_000)
    with pytest.raises(EosError, match="holds 60s windows, not 120s"):
        update_kpis(spark, [KpiTable(resized, sized[0].uri)], VIEWS, silver)


def test_formula_rules() -> None:
    row = {"a": 6, "b": 0, "c": None, "d": 1.5}
    assert evaluate("a / d", row) == 4.0
    assert evaluate("(a + d) * 2 - -1", row) == 16.0
    assert evaluate("a / b", row) is None, "x / 0 is null"
    assert evaluate("a + c", row) is None, "a null operand gives null"
    assert evaluate("c / b", row) is None
    assert check_formula("a / b", ["a", "b"]) is None
    assert check_formula("a / z", ["a"]) == "z is not a measure declared before this one"
    for wrong in ("a ** 2", "f(a)", "a // b", "a.b", "'x'", "a <"):
        assert check_formula(wrong, ["a", "b"]) is not None, wrong
    with pytest.raises(ValueError, match="not a measure"):
        evaluate("a + z", row)


def test_a_kpi_needs_a_key_and_windows_a_size() -> None:
    with pytest.raises(EosError, match="neither time nor by"):
        kpi_schema(KpiSpec("all", None, (), (KpiMeasure("n", COUNT),)), VIEWS)
    with pytest.raises(EosError, match="without a size"):
        kpi_schema(KpiSpec("w", WINDOW, (), (KpiMeasure("n", COUNT),)), VIEWS)
    with pytest.raises(EosError, match="string fields only"):
        kpi_schema(KpiSpec("d", DAY, ("duration_ms",), (KpiMeasure("n", COUNT),)), VIEWS)
    assert pa.types.is_float64(kpi_schema(PAGES, VIEWS).field("spread").type)
