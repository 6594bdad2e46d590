"""Kill the ingest with SIGKILL at each named point, rerun it, and compare bronze with the oracle.

Each crash runs in a process of its own (``ingest_once``); the rerun runs in this process.
(A run killed under ``dagster job execute`` mid-ingest, and its replacement, is
``test_spark_server_faults.py``'s.)
"""

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.lib import faults
from eos_assets_tests.faults.oracle import judge, overlaps
from eos_assets_tests.support.fault_bench import Bench

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
