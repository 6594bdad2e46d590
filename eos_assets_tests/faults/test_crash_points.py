"""Kill the ingest with SIGKILL at each named point, rerun it, and compare bronze with the oracle.

Each crash runs in a process of its own (``ingest_once``); the rerun runs in this process.
One crash goes through the real ``dagster asset materialize`` command line instead, and its
retry through ``dg.materialize``.
"""

import os
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka import Consumer, TopicPartition
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.lib import faults
from eos_assets_tests.faults.harness import score
from eos_assets_tests.faults.oracle import judge, overlaps
from eos_assets_tests.support.bronze_runs import bronze_resources, materialize_on_the_cli
from eos_assets_tests.support.fault_bench import Bench
from eos_assets_tests.support.orders import raw_events

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
def test_crash_then_rerun_is_exact(point: str, spark: SparkSession, bench: Bench) -> None:
    topic, summary, manifest = bench.topic_with(
        partitions=3, count=1500, seed=100 + faults.POINTS.index(point)
    )
    assert summary.transactions_aborted > 0 and summary.committed_malformed

    bench.crash(topic, point)
    table = bench.table
    dt = DeltaTable(table)
    if point == faults.AFTER_COMMIT:
        # Bronze has the run's data; the advisory group commit that follows never happened.
        assert dt.version() == 1 and judge(table, manifest).exact
        assert all(o < 0 for o in advised(bench.bootstrap, topic, 3))
    else:
        assert dt.version() == 0 and not dt.file_uris(), "nothing may be committed"
    if point in (faults.AFTER_FILES, faults.BEFORE_COMMIT):
        assert len(orphans(table)) == 3, "each range's file was written, none committed"

    rerun = bench.ingest(spark, topic)
    verdict = bench.score(f"SIGKILL at {point}", manifest, "subprocess, rerun")
    assert verdict.exact, f"after a crash at {point}: {verdict}"
    assert not overlaps(table), overlaps(table)
    if point == faults.AFTER_COMMIT:
        assert rerun.version is None and rerun.records == 0, "the replay must be a no-op"
    else:
        assert rerun.version == 1 and rerun.records == summary.committed


def test_crash_through_the_dagster_cli_then_rerun_is_exact(
    spark: SparkSession, bench: Bench, tmp_path: Path
) -> None:
    """The orchestrator sees a failed run whose Delta commit landed; its rerun adds nothing."""
    kafka_bootstrap = bench.bootstrap
    topic, summary, manifest = bench.topic_with(partitions=2, count=800, seed=7)
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
    crashed = materialize_on_the_cli(env, tmp_path)
    assert crashed.returncode != 0, "the step process should have died after the commit"
    uri = str(lake / "orders" / "bronze" / "raw_events")
    assert DeltaTable(uri).version() == 1, crashed.stderr[-3000:]

    # Dagster recorded a failure; the retry (here in this process) must add nothing.
    resources = bronze_resources(kafka_bootstrap, [topic], str(lake))
    (mat,) = dg.materialize([raw_events], resources=resources).asset_materializations_for_node(
        "orders__bronze__raw_events"
    )
    assert (mat.metadata["records"].value, mat.metadata["delta_version"].value) == (0, None)
    verdict = score(bench.ledger, f"SIGKILL at {faults.AFTER_COMMIT} (dagster CLI)", uri, manifest)
    assert verdict.exact, f"after a crash at {faults.AFTER_COMMIT} under Dagster: {verdict}"
    assert DeltaTable(uri).version() == 1 and not overlaps(uri)
    assert summary.committed == verdict.found
