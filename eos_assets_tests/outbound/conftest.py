"""Fixtures of the outbound tests: one gold build and one KPI build shared by the session, the
publisher and the notifier in processes of their own, an HTTP endpoint, and the exactly-once
score."""

import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit import broker
from eos_assets.lib.delta.delta_io import read_rows
from eos_assets.lib.derived.window_aggregates import window_schema
from eos_assets_tests.faults.harness import Ledger, Run, fault_env, finish, spawn
from eos_assets_tests.faults.harness import stop_stragglers as stop_stragglers
from eos_assets_tests.outbound.endpoint import Endpoint
from eos_assets_tests.support import graph
from eos_assets_tests.support.agg_out import STATE
from eos_assets_tests.support.graph_run import OrdersGraph
from eos_assets_tests.support.orders import (
    KPI_WINDOW,
    MODEL,
    WINDOW_AGGREGATES,
    events,
    kpi_tables,
    raw_events,
    window_aggregates,
)

RUNNER = "eos_assets_tests.outbound.run_once"
START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
ALERT_WINDOWS = 4  # 5-minute windows of the KPI build that end up final

# The KPI alert thresholds as the orders stream declares them (revenue below 5000,
# cancellation rate above 0.12).
_REVENUE = MODEL.alerts["revenue_below"].below
_CANCELLATION = MODEL.alerts["cancellation_rate_above"].above
assert _REVENUE is not None and _CANCELLATION is not None
REVENUE_MIN, CANCELLATION_MAX = _REVENUE, _CANCELLATION
# Delivery of the alert tests (EOS_ALERT_* as a run would see them).
ENV = {
    "EOS_ALERT_BACKOFF_S": "0.05",
    "EOS_ALERT_TIMEOUT_S": "5",
}


@dataclass(frozen=True)
class GoldLakes:
    """Two stages of one gold build: ``early`` (one batch), ``final`` (compacted, one more)."""

    early: Path
    final: Path

    def copy(self, stage: str, to: Path) -> Path:
        """A private copy of a stage's lake (laid over what ``to`` holds already)."""
        shutil.copytree(getattr(self, stage), to, dirs_exist_ok=True)
        return to


def windows_uri(lake: Path) -> str:
    """The window table of a lake."""
    return str(lake.joinpath(*WINDOW_AGGREGATES.path))


def kpi_uri(lake: Path) -> str:
    """The KPI window table of a lake."""
    return str(lake.joinpath(*KPI_WINDOW.path))


def _orders_graph(bootstrap: str, name: str, base: Path) -> tuple[OrdersGraph, Path]:
    """The orders graph of a session lake in ``base``: its topic (3 partitions) and lake."""
    orders = OrdersGraph.in_folder(bootstrap, name, base)
    broker.ensure_topic(bootstrap, orders.topic, 3)
    lake = Path(orders.lake_root)
    lake.mkdir()
    return orders, lake


@pytest.fixture(scope="session")
def gold_lakes(
    spark: SparkSession, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> GoldLakes:
    """bronze → silver → gold over two batches, late events in the second, compaction between."""
    del spark  # started first: the Spark resource reuses the session
    base = tmp_path_factory.mktemp("gold")
    orders, lake = _orders_graph(kafka_bootstrap, "outbound-orders", base)
    config = graph.window_config(1.0, 1.0)
    mix: dict[str, Any] = {"transaction_size": 100, "partitions": 3, "abort_ratio": 0.1}
    batches: list[dict[str, Any]] = [
        {"count": 600, "seed": 71, "start_time": START},
        {"count": 600, "seed": 72, "start_time": START + timedelta(seconds=200),
         "late_ratio": 0.05, "late_by": timedelta(minutes=4)},
    ]  # fmt: skip
    assets = [raw_events, events, window_aggregates]
    early = base / "early"
    for number, options in enumerate(batches):
        if number == 1:
            shutil.copytree(lake, early)
            # A compaction (OPTIMIZE, dataChange=false) between two data-changing versions.
            DeltaTable(windows_uri(lake)).optimize.z_order(["window_start"])
        orders.send(f"batch-{number}", **options, **mix)
        orders.materialize(assets, config)
    return GoldLakes(early, lake)


@pytest.fixture(scope="session")
def kpi_lake(
    spark: SparkSession, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """bronze → silver → the KPI tables over events in several 5-minute windows, then a batch
    far enough ahead that those windows are final: their end is at or before the KPI window
    table's watermark (the max event time consumed less the declared grace)."""
    del spark  # started first: the Spark resource reuses the session
    base = tmp_path_factory.mktemp("kpis")
    orders, lake = _orders_graph(kafka_bootstrap, "outbound-kpis", base)
    mix: dict[str, Any] = {"transaction_size": 100, "partitions": 3, "abort_ratio": 0.1}
    size = timedelta(minutes=5)  # the declared period of kpi_window
    for number in range(ALERT_WINDOWS):
        start = START + number * size
        orders.send(f"window-{number}", count=300, seed=81 + number, start_time=start, **mix)
    orders.materialize([raw_events, events, kpi_tables], {"ops": {}})
    ahead = START + ALERT_WINDOWS * size + ORDERS.window.grace
    orders.send("ahead", count=100, seed=80, start_time=ahead, **mix)
    orders.materialize([raw_events, events, kpi_tables], {"ops": {}})
    return lake


def history(table: str) -> dict[tuple, int]:
    """Every state (window key, revision, is_final) any version of the table ever held, with
    the first version that held it: read snapshot by snapshot, independently of the log."""
    seen: dict[tuple, int] = {}
    for version in range(DeltaTable(table).version() + 1):
        for row in read_rows(
            DeltaTable(table, version=version), window_schema(ORDERS.windows, ORDERS.contract)
        ).to_pylist():
            seen.setdefault(tuple(row[c] for c in STATE), version)
    return seen


@dataclass(frozen=True)
class Publishing:
    """What a test of the agg-out publisher runs against (the ``publishing`` fixture)."""

    table: str  # the window table of the session's final gold lake
    bootstrap: str
    read_committed: Callable[..., list]
    ledger: Ledger  # the outbound ledger

    def topic(self, name: str) -> str:
        """A new agg-out topic name of this test."""
        return f"agg-out-{name}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def publishing(
    gold_lakes: GoldLakes, kafka_bootstrap: str, read_committed: Callable, outbound_ledger: Ledger
) -> Publishing:
    """The final gold lake's window table, the session's broker, a read_committed reader of
    it, and the outbound ledger."""
    return Publishing(
        windows_uri(gold_lakes.final), kafka_bootstrap, read_committed, outbound_ledger
    )


@pytest.fixture(scope="session")
def outbound_ledger() -> Ledger:
    """Counts of every outbound fault injected, printed at the end of the session."""
    return Ledger("outbound exactly-once ledger")


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    """A real HTTP endpoint on 127.0.0.1, stopped after the test."""
    server = Endpoint().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _no_stray_runs() -> Iterator[None]:
    yield
    stop_stragglers()


def run_outbound(
    *args: str,
    crash_at: str | None = None,
    pause_at: str | None = None,
    pause_dir: Path | None = None,
    env: dict[str, str] | None = None,
    wait: bool = True,
) -> Run:
    """Run ``run_once`` with ``args`` in a process group of its own (fault points armed)."""
    cmd = [sys.executable, "-m", RUNNER, *args]
    run = spawn(cmd, {**fault_env(crash_at, pause_at, pause_dir), **(env or {})})
    return finish(run, timeout=120) if wait else run
