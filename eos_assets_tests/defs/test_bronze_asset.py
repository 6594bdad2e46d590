"""bronze/raw_events through Dagster: materialize with real resources and from the Dagster CLI."""

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import dagster as dg
from pyspark.sql import SparkSession

from eos_assets.lib.delta import delta_io
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.support.bronze_runs import DAGSTER, bronze_resources, materialize_on_the_cli
from eos_assets_tests.support.orders import RAW_EVENTS, raw_events
from eos_assets_tests.support.records import batch, committed_truth
from eos_assets_tests.support.txn_producer import send_transaction

REPO = Path(__file__).resolve().parents[2]


def materialization(result: dg.ExecuteInProcessResult) -> dict:
    (mat,) = result.asset_materializations_for_node("orders__bronze__raw_events")
    assert mat.asset_key == RAW_EVENTS
    return {k: v.value for k, v in mat.metadata.items()}


def test_materialize_twice_is_idempotent(
    spark: SparkSession, kafka_bootstrap: str, make_topic: Callable[..., str], lake_root: str
) -> None:
    topic = make_topic(partitions=2)
    sent = [send_transaction(kafka_bootstrap, topic, batch(30, 2))]
    resources = bronze_resources(kafka_bootstrap, [topic], lake_root)
    instance = dg.DagsterInstance.ephemeral()
    first = materialization(dg.materialize([raw_events], resources=resources, instance=instance))
    second = materialization(dg.materialize([raw_events], resources=resources, instance=instance))
    assert (first["records"], first["malformed"], first["delta_version"]) == (30, 0, 1)
    assert (second["records"], second["delta_version"]) == (0, None)
    assert {r["partition"]: r["records"] for r in first["ranges"]} == {0: 15, 1: 15}
    uri = LakeResource(root=lake_root).table_uri("orders", "bronze", "raw_events")
    t = delta_io.read_arrow(uri)
    got = set(
        zip(
            t["partition"].to_pylist(), t["offset"].to_pylist(), t["value"].to_pylist(), strict=True
        )
    )
    assert got == committed_truth(sent) and t.num_rows == 30


def _cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOS_")}
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    env.update(
        DAGSTER_HOME=str(home), EOS_SPARK_MASTER="local[2]", EOS_STATE_DIR=str(tmp_path / "state")
    )
    env.update(extra)
    return env


def test_dagster_cli_materializes_with_only_settings_env(
    kafka_bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=3)
    sent = [send_transaction(kafka_bootstrap, topic, batch(24, 3))]
    lake = tmp_path / "lake"
    env = _cli_env(
        tmp_path, EOS_KAFKA_BOOTSTRAP=kafka_bootstrap, EOS_TOPICS=topic, EOS_LAKE_ROOT=str(lake)
    )
    done = materialize_on_the_cli(env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    t = delta_io.read_arrow(str(lake / "orders" / "bronze" / "raw_events"))
    got = set(
        zip(
            t["partition"].to_pylist(), t["offset"].to_pylist(), t["value"].to_pylist(), strict=True
        )
    )
    assert got == committed_truth(sent)


def test_dagster_cli_without_a_broker_says_what_to_do(tmp_path: Path) -> None:
    env = _cli_env(tmp_path, EOS_LAKE_ROOT=str(tmp_path / "lake"))
    done = materialize_on_the_cli(env, tmp_path)
    assert done.returncode != 0
    assert "eos-assets broker up" in done.stdout + done.stderr


def test_definitions_load_and_validate(tmp_path: Path) -> None:
    cmd = [DAGSTER, "definitions", "validate", "-m", "eos_assets.definitions"]
    done = subprocess.run(
        cmd, env=_cli_env(tmp_path), cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    from eos_assets.definitions import defs

    assert defs.resolve_assets_def(RAW_EVENTS).op.pool == "eos_ingest"
    assert {j.name for j in defs.jobs} >= {"ingest_kafka_to_bronze", "materialize_all"}  # type: ignore[union-attr]
