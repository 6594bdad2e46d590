"""The silver and gold checks, each proven by breaking a real table on purpose.

The whole graph is materialized once for the module from a real stream (duplicates, late
events, aborts, malformed records); each test copies the lake and the DuckDB file and breaks
the copy: a duplicated silver row, an altered window total, an altered DuckDB KPI.
"""

import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from eos_assets.lib.delta import delta_io
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.warehouse import WarehouseResource
from eos_assets_tests.support import graph
from eos_assets_tests.support import orders as derived_checks
from eos_assets_tests.support.bronze_runs import evaluate
from eos_assets_tests.support.graph_run import OrdersGraph
from eos_assets_tests.support.orders import EVENTS, WINDOW_AGGREGATES, events, window_aggregates

WINDOWS_OP = WINDOW_AGGREGATES.to_python_identifier()

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Lake:
    """A lake with every table, and the DuckDB serving file."""

    root: Path
    warehouse: Path
    topic: str

    def lake(self) -> LakeResource:
        return LakeResource(root=str(self.root))

    def uri(self, key: dg.AssetKey) -> str:
        return self.lake().table_uri(*key.path)

    def copy(self, target: Path) -> "Lake":
        shutil.copytree(self.root, target / "lake")
        shutil.copy(self.warehouse, target / "serving.duckdb")
        return Lake(target / "lake", target / "serving.duckdb", self.topic)


@pytest.fixture(scope="module")
def built(
    spark: SparkSession, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Lake:
    """Bronze to DuckDB, materialized from a stream spanning several 1-minute windows."""
    folder = tmp_path_factory.mktemp("derived")
    orders = OrdersGraph.in_folder(
        kafka_bootstrap, f"derived-checks-{uuid.uuid4().hex[:8]}", folder
    )
    orders.send(
        "manifest", count=600, seed=5, partitions=3, rate=0, start_time=START,
        transaction_size=100, duplicate_ratio=0.05, late_ratio=0.03, abort_ratio=0.1,
        malformed_ratio=0.02,
    )  # fmt: skip
    orders.materialize(graph.ALL, graph.window_config(1.0, 1.0))
    return Lake(Path(orders.lake_root), orders.warehouse, orders.topic)


@pytest.fixture
def broken(built: Lake, tmp_path: Path) -> Lake:
    """A private copy of the module's lake and serving database, free to break."""
    return built.copy(tmp_path)


def meta(result: dg.AssetCheckResult) -> dict:
    return {k: v.value for k, v in result.metadata.items()}


def run(check: dg.AssetChecksDefinition, lake: Lake) -> dg.AssetCheckResult:
    resources = {"lake": lake.lake(), "warehouse": WarehouseResource(path=str(lake.warehouse))}
    return evaluate(
        check, **{k: v for k, v in resources.items() if k in check.required_resource_keys}
    )


def test_every_derived_check_passes_on_the_built_graph(built: Lake) -> None:
    unique = run(derived_checks.event_id_unique, built)
    assert unique.passed, unique.description
    assert meta(unique)["duplicated_event_ids"] == 0 and meta(unique)["rows"] > 400
    windows = run(derived_checks.final_windows_match_silver, built)
    assert windows.passed, windows.description
    assert meta(windows)["final_windows"] > 3, "the stream must close several windows"
    served = run(derived_checks.duckdb_matches_delta, built)
    assert served.passed, served.description
    assert meta(served)["orders.kpi_daily_rows"] > 0 and meta(served)["orders.kpi_window_rows"] > 3


def test_event_id_unique_fails_on_a_duplicated_silver_row(broken: Lake) -> None:
    silver = delta_io.read_arrow(broken.uri(EVENTS))
    row = silver.slice(7, 1)
    write_deltalake(broken.uri(EVENTS), row.cast(silver.schema), mode="append")
    result = run(derived_checks.event_id_unique, broken)
    assert not result.passed
    event_id = row["event_id"][0].as_py()
    assert f"event_id {event_id} x2" in (result.description or "")
    assert meta(result)["duplicated_event_ids"] == 1


def test_a_duplicated_event_id_stops_gold_in_the_same_run(
    broken: Lake, kafka_bootstrap: str, spark: SparkSession
) -> None:
    silver = delta_io.read_arrow(broken.uri(EVENTS))
    write_deltalake(broken.uri(EVENTS), silver.slice(3, 1), mode="append")
    before = DeltaTable(broken.uri(WINDOW_AGGREGATES)).version()
    res = graph.resources(kafka_bootstrap, broken.topic, str(broken.root), broken.warehouse)
    config = {"ops": {WINDOWS_OP: graph.window_config(1.0, 1.0)["ops"][WINDOWS_OP]}}
    result = dg.materialize(
        [events, derived_checks.event_id_unique, window_aggregates],
        resources=res,
        run_config=config,
        raise_on_error=False,
    )
    assert not result.success
    (evaluation,) = result.get_asset_check_evaluations()
    assert (evaluation.check_name, evaluation.passed) == (derived_checks.EVENT_ID_UNIQUE, False)
    done = {m.asset_key for m in result.get_asset_materialization_events() if m.asset_key}
    assert WINDOW_AGGREGATES not in done
    assert DeltaTable(broken.uri(WINDOW_AGGREGATES)).version() == before


def test_window_reconciliation_fails_on_an_altered_total(broken: Lake) -> None:
    uri = broken.uri(WINDOW_AGGREGATES)
    gold = delta_io.read_arrow(uri).sort_by([("window_start", "ascending")])
    start = gold["window_start"][0].as_py()
    DeltaTable(uri).update(
        updates={"event_count": "event_count + 1"},
        predicate=f"window_start = '{start.isoformat()}'",
    )
    result = run(derived_checks.final_windows_match_silver, broken)
    assert not result.passed
    (first, *_) = meta(result)["first_problems"]
    assert first.startswith(f"window {start}") and "event_count" in first, first
    assert "vs silver" in (result.description or "")


def test_serving_reconciliation_fails_on_an_altered_duckdb_kpi(broken: Lake) -> None:
    with duckdb.connect(str(broken.warehouse)) as con:
        (day, currency) = con.execute(
            "SELECT day, currency FROM orders.kpi_daily ORDER BY day, currency LIMIT 1"
        ).fetchone() or (None, None)
        con.execute(
            "UPDATE orders.kpi_daily SET revenue = revenue + 1 WHERE day = ? AND currency = ?",
            [day, currency],
        )
    result = run(derived_checks.duckdb_matches_delta, broken)
    assert not result.passed
    assert f"orders.kpi_daily key ({day!r}, {currency!r}) differs from Delta" in (
        result.description or ""
    )
