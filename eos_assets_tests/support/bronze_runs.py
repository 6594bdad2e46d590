"""Bronze materializations in the tests: their real resources, the Dagster command line, and
their results (metadata, check evaluations, history)."""

import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from deltalake import DeltaTable

from eos_assets.lib.spark.spark_env import spark_config
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource

NODE = "orders__bronze__raw_events"
DAGSTER = str(Path(sys.executable).parent / "dagster")


def bronze_resources(bootstrap: str, topics: list[str] | None, lake_root: str) -> dict[str, Any]:
    """The real resources of bronze/raw_events reading ``topics`` (None: the topics a stream
    declares); the Spark one reuses the session of the ``spark`` fixture."""
    return {
        "kafka": KafkaResource(bootstrap_servers=bootstrap, topics=topics),
        "lake": LakeResource(root=lake_root),
        "pyspark": LazyPySparkResource(spark_config=spark_config("local[2]")),
    }


def materialize_on_the_cli(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``dagster asset materialize`` of orders/bronze/raw_events from the product's definitions,
    with ``env`` as its whole environment."""
    cmd = [DAGSTER, "asset", "materialize", "-m", "eos_assets.definitions"]
    cmd += ["--select", "orders/bronze/raw_events"]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def materialized(result: dg.ExecuteInProcessResult) -> dict:
    (mat,) = result.asset_materializations_for_node(NODE)
    return {k: v.value for k, v in mat.metadata.items()}


def evaluations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def meta(evaluation: dg.AssetCheckEvaluation) -> dict:
    return {k: v.value for k, v in evaluation.metadata.items()}


def ingest_history(uri: str) -> list[dict]:
    return [h for h in reversed(DeltaTable(uri).history()) if h.get("eos.operation") == "ingest"]


def evaluate(check: dg.AssetChecksDefinition, **resources: object) -> dg.AssetCheckResult:
    """Run one asset check directly with real resources (and a context with no history)."""
    result = check(dg.build_asset_check_context(), **resources)
    assert isinstance(result, dg.AssetCheckResult)
    return result
