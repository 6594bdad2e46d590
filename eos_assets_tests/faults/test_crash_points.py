"""Kill the ingest with SIGKILL at each named point, rerun it, and compare bronze with the oracle.

Each crash runs in a process of its own (``ingest_once``); the rerun runs in this process.
One crash goes through the real ``dagster asset materialize`` command line instead, and its
retry through ``dg.materialize``.
"""

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Consumer, TopicPartition
from dagster_pyspark import LazyPySparkResource
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.lib import faults
from eos_assets.lib.ingest.ingest import ingest_bronze
from eos_assets.lib.spark.spark_env import spark_config
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.faults.harness import Ledger, run_ingest
from eos_assets_tests.faults.oracle import judge, overlaps
from eos_assets_tests.support.orders import raw_events

DAGSTER = str(Path(sys.executable).parent / "dagster")
GROUP = "eos-assets"  # the runner's advisory consumer group (IngestOptions default)


def orphans(uri: str) -> set[str]:
    """Parquet files in the table folder that no commit of the latest snapshot references."""
    referenced = {Path(f.removeprefix("file://")).name for f in DeltaTable(uri).file_uris()}
    return {p.name for p in Path(uri).rglob("*.parquet")} - referenced


def advised(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Offsets the advisory consumer group has committed for ``topic`` (negative: none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return [tp.offset for tp in consumer.committed(tps, timeout=10)]
    finally:
        consumer.close()


@pytest.mark.parametrize("point", faults.POINTS)
def test_crash_then_rerun_is_exact(
    point: str,
    spark: SparkSession,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produced: Callable,
    table: str,
    ledger: Ledger,
) -> None:
    topic = make_topic(partitions=3)
    summary, manifest = produced(topic, count=1500, seed=100 + faults.POINTS.index(point))
    assert summary.transactions_aborted > 0 and summary.committed_malformed

    crashed = run_ingest(kafka_bootstrap, topic, table, crash_at=point)
    assert crashed.killed, f"the ingest did not die at {point}: {crashed.tail()}"
    dt = DeltaTable(table)
    if point == faults.AFTER_COMMIT:
        # Bronze has the run's data; the advisory group commit that follows never happened.
        assert dt.version() == 1 and judge(table, manifest).exact
        assert all(o < 0 for o in advised(kafka_bootstrap, topic, 3))
    else:
        assert dt.version() == 0 and not dt.file_uris(), "nothing may be committed"
    if point in (faults.AFTER_FILES, faults.BEFORE_COMMIT):
        assert len(orphans(table)) == 3, "each range's file was written, none committed"

    rerun = ingest_bronze(
        spark, table, [topic], {"bootstrap.servers": kafka_bootstrap}, contract=ORDERS.contract
    )
    verdict = judge(table, manifest)
    ledger.record(f"SIGKILL at {point}", 1, verdict.lost, verdict.doubled, "subprocess, rerun")
    assert verdict.exact, f"after a crash at {point}: {verdict}"
    assert not overlaps(table), overlaps(table)
    if point == faults.AFTER_COMMIT:
        assert rerun.version is None and rerun.records == 0, "the replay must be a no-op"
    else:
        assert rerun.version == 1 and rerun.records == summary.committed


def test_crash_through_the_dagster_cli_then_rerun_is_exact(
    spark: SparkSession,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produced: Callable,
    tmp_path: Path,
    ledger: Ledger,
) -> None:
    """The orchestrator sees a failed run whose Delta commit landed; its rerun adds nothing."""
    topic = make_topic(partitions=2)
    summary, manifest = produced(topic, count=800, seed=7)
    lake = tmp_path / "lake"
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOS_")}
    env.update(
        {faults.CRASH_ENV: faults.AFTER_COMMIT},
        DAGSTER_HOME=str(home),
        EOS_KAFKA_BOOTSTRAP=kafka_bootstrap,
        EOS_TOPICS=topic,
        EOS_LAKE_ROOT=str(lake),
        EOS_SPARK_MASTER="local[2]",
        EOS_STATE_DIR=str(tmp_path / "state"),
    )
    cmd = [DAGSTER, "asset", "materialize", "-m", "eos_assets.definitions"]
    cmd += ["--select", "orders/bronze/raw_events"]
    crashed = subprocess.run(
        cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert crashed.returncode != 0, "the step process should have died after the commit"
    uri = str(lake / "orders" / "bronze" / "raw_events")
    assert DeltaTable(uri).version() == 1, crashed.stderr[-3000:]

    # Dagster recorded a failure; the retry (here in this process) must add nothing.
    resources = {
        "kafka": KafkaResource(bootstrap_servers=kafka_bootstrap, topics=[topic]),
        "lake": LakeResource(root=str(lake)),
        "pyspark": LazyPySparkResource(spark_config=spark_config("local[2]")),
    }
    (mat,) = dg.materialize([raw_events], resources=resources).asset_materializations_for_node(
        "orders__bronze__raw_events"
    )
    assert (mat.metadata["records"].value, mat.metadata["delta_version"].value) == (0, None)
    verdict = judge(uri, manifest)
    ledger.record(
        f"SIGKILL at {faults.AFTER_COMMIT} (dagster CLI)", 1, verdict.lost, verdict.doubled
    )
    assert verdict.exact, f"after a crash at {faults.AFTER_COMMIT} under Dagster: {verdict}"
    assert DeltaTable(uri).version() == 1 and not overlaps(uri)
    assert summary.committed == verdict.found
