"""Files left by a crash before the commit: never read as data, removed by maintenance later."""

import os
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.lib import faults
from eos_assets.lib.delta import delta_io
from eos_assets.lib.delta.maintenance import remove_orphans
from eos_assets.lib.errors import ConfigError
from eos_assets_tests.faults.oracle import judge
from eos_assets_tests.support.fault_bench import Bench


def data_files(uri: str) -> set[str]:
    """Every Parquet file in the table folder, relative to it (the log excluded)."""
    root = Path(uri)
    return {
        str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts
    }


def referenced(uri: str) -> set[str]:
    root = Path(uri).resolve()
    return {
        str(Path(f.removeprefix("file://")).relative_to(root)) for f in DeltaTable(uri).file_uris()
    }


def test_crash_leftovers_are_never_read_and_vacuum_removes_only_them(
    spark: SparkSession, bench: Bench
) -> None:
    table = bench.table
    topic, summary, manifest = bench.topic_with(partitions=3, count=900, seed=81)
    bench.crash(topic, faults.AFTER_FILES)
    orphans = data_files(table)
    assert len(orphans) == 3 and not referenced(table), "one written, uncommitted file per range"

    bench.ingest(spark, topic)
    committed = referenced(table)
    assert committed and not committed & orphans and data_files(table) == committed | orphans

    # The orphans hold real rows: a reader of the folder would count everything twice...
    assert spark.read.parquet(table).count() == 2 * summary.committed
    # ...but readers of the table read the log's files only.
    verdict = judge(table, manifest)
    assert verdict.exact, f"orphans leaked into bronze: {verdict}"
    assert delta_io.read_arrow(table).num_rows == summary.committed
    assert spark.read.parquet(*DeltaTable(table).file_uris()).count() == summary.committed

    # Fresh files may belong to an ingest in flight: neither a short retention nor a young
    # file is ever removed.
    with pytest.raises(ConfigError, match="at least 1 h"):
        remove_orphans(table, older_than_hours=0)
    assert remove_orphans(table) == [] and data_files(table) == committed | orphans

    two_days_ago = time.time() - 48 * 3600
    for name in orphans | committed:
        os.utime(Path(table) / name, (two_days_ago, two_days_ago))
    removed = remove_orphans(table, older_than_hours=24)
    assert set(removed) == orphans, removed
    assert data_files(table) == committed, "committed files stay, old or not"
    after = bench.score(
        "orphan files from a crash after_files",
        manifest,
        f"{len(orphans)} orphans never read, removed by remove_orphans",
    )
    assert after.exact, f"after remove_orphans: {after}"
    assert remove_orphans(table) == []
