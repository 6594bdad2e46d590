"""One lake of the bench: real resources, the asset graph through ``dg.materialize`` and the
duration of each step from the Dagster event log."""

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pyspark.sql import SparkSession

import eos_assets.streams
from eos_assets.components import builtin
from eos_assets.declaration import read_declaration
from eos_assets.lib import lake_store
from eos_assets.lib.errors import EosError
from eos_assets.lib.spark.spark_env import spark_config
from eos_assets.resources.alerts import AlertsResource
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import spark_session
from eos_assets.resources.warehouse import WarehouseResource

CHECK_ENV = {"EOS_MALFORMED_MAX_RATE": "0.02", "EOS_AUDIT_BUDGET_S": "60"}
# A per-run cap larger than any backlog: the whole backlog in one ingest run.
UNCAPPED = 1 << 62
# The bench runs the shipped orders stream.
ORDERS = builtin.build(read_declaration(eos_assets.streams.declaration("orders")))
BRONZE = [ORDERS.raw_events]
assert ORDERS.entity_state is not None and ORDERS.kpi_tables is not None
assert ORDERS.serving is not None
DERIVED = [
    ORDERS.events,
    ORDERS.entity_state,
    ORDERS.window_aggregates,
    ORDERS.kpi_tables,  # gold/kpi_window, gold/kpi_daily and their distinct values
    ORDERS.serving,
]
ALL_CHECKS = [*ORDERS.bronze_checks, *ORDERS.derived_checks, ORDERS.kpi_checks[0]]


def start_spark(master: str, extra_jars: Sequence[str] = ()) -> SparkSession:
    """The bench's one SparkSession; the assets' resource reuses it (``getOrCreate``).

    ``extra_jars`` join Delta's in ``spark.jars`` (the peers' Spark Kafka source).
    """
    config = {**spark_config(master, app_name="eos_bench"), "spark.ui.enabled": "false"}
    if extra_jars:
        config["spark.jars"] = ",".join([config["spark.jars"], *extra_jars])
    spark = spark_session(LazyPySparkResource(spark_config=config))
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass
class RunTimes:
    """Wall time of one Dagster run and of each of its steps (seconds)."""

    wall: float
    steps: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class BenchLake:
    """Delta tables and a DuckDB file under ``root``, fed from ``topic``."""

    root: Path
    bootstrap: str
    topic: str
    master: str
    lake: str | None = None  # the lake root when not ``root/lake`` (an object store's URI)

    @property
    def lake_root(self) -> str:
        """Where the Delta tables live."""
        return self.lake or str(self.root / "lake")

    def resources(self) -> dict[str, Any]:
        """The product's resources, pointed at this lake and topic."""
        options = lake_store.storage_options(self.lake_root, os.environ)
        return {
            "alerts": AlertsResource(),
            "kafka": KafkaResource(bootstrap_servers=self.bootstrap, topics=[self.topic]),
            "lake": LakeResource(root=self.lake_root, storage_options=options),
            "pyspark": LazyPySparkResource(spark_config=spark_config(self.master)),
            "warehouse": WarehouseResource(path=str(self.root / "warehouse.duckdb")),
        }

    def uri(self, *key: str) -> str:
        """Location of the table of asset key ``key``."""
        return LakeResource(root=self.lake_root).table_uri(*key)

    @property
    def warehouse(self) -> Path:
        """The DuckDB serving database."""
        return self.root / "warehouse.duckdb"

    def materialize(
        self, assets: Sequence[Any], max_records: int | None = None, *, checks: bool = False
    ) -> RunTimes:
        """Materialize ``assets`` (with their checks if ``checks``) in process; must succeed.

        ``max_records`` caps the ingest run (run config ``max_records_per_run``).
        """
        run_config: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
        if max_records is not None and any(a is ORDERS.raw_events for a in assets):
            run_config["ops"] = {
                "orders__bronze__raw_events": {"config": {"max_records_per_run": max_records}}
            }
        defs: list[Any] = list(assets)
        if checks:
            defs += _checks_of(assets)
        began = time.monotonic()
        result = dg.materialize(
            defs,
            resources=self.resources(),
            run_config=run_config,
            instance=dg.DagsterInstance.ephemeral(),
            raise_on_error=False,
        )
        wall = time.monotonic() - began
        if not result.success:
            failure = next((e for e in result.all_events if e.is_failure), None)
            raise EosError(f"bench run failed: {failure.message if failure else '?'}")
        return RunTimes(wall, step_seconds(result), _metadata(result))


def step_seconds(result: dg.ExecuteInProcessResult) -> dict[str, float]:
    """Duration of each successful step, from the run's event log."""
    return {
        e.step_key or "?": getattr(e.event_specific_data, "duration_ms", 0.0) / 1000
        for e in result.all_events
        if e.event_type_value == "STEP_SUCCESS"
    }


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for event in result.all_events:
        if event.event_type_value != "ASSET_MATERIALIZATION":
            continue
        mat = getattr(event.event_specific_data, "materialization", None)
        if isinstance(mat, dg.AssetMaterialization):
            out[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
    return out


def _checks_of(assets: Sequence[Any]) -> list[Any]:
    keys = {k for a in assets for k in a.keys}
    return [c for c in ALL_CHECKS if any(k.asset_key in keys for k in c.check_keys)]


def sum_steps(times: RunTimes, names: Mapping[str, str] | None = None) -> float:
    """Sum of the step durations (``names`` maps step keys to keep, default all)."""
    return sum(v for k, v in times.steps.items() if names is None or k in names)


def run_checks(
    lake: BenchLake, instance: dg.DagsterInstance | None = None, skip: Sequence[str] = ()
) -> RunTimes:
    """Run every asset check of the product but those named in ``skip``, alone (no asset), on
    the tables as they are.

    On ``instance`` (a new ephemeral one by default): the incremental checks start from the
    passing evaluations it holds.
    """
    keys = [k for c in ALL_CHECKS for k in c.check_keys if k.name not in skip]
    job = dg.define_asset_job("bench_checks", selection=dg.AssetSelection.checks(*keys))
    defs = dg.Definitions(
        assets=[*BRONZE, *DERIVED],
        asset_checks=ALL_CHECKS,
        jobs=[job],
        resources=lake.resources(),
    )
    quiet = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    # The bench streams carry 1 % malformed records by design, and the Kafka audit is bounded
    # to a minute (it warns when partial): the times measured are those of the checks.
    saved = {k: os.environ.get(k) for k in CHECK_ENV}
    os.environ.update(CHECK_ENV)
    try:
        began = time.monotonic()
        result = defs.resolve_job_def("bench_checks").execute_in_process(
            run_config=quiet,
            instance=instance or dg.DagsterInstance.ephemeral(),
            raise_on_error=False,
        )
        wall = time.monotonic() - began
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if not result.success:
        failure = next((e for e in result.all_events if e.is_failure), None)
        raise EosError(f"bench check run failed: {failure.message if failure else '?'}")
    evaluations = [
        e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    passed = {v.check_name: v.passed for v in evaluations if isinstance(v, dg.AssetCheckEvaluation)}
    return RunTimes(wall, step_seconds(result), {"passed": passed})
