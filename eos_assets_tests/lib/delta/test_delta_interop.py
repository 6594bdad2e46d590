"""delta-spark reads every table of a lake the product built with delta-rs, and writes them
without locking delta-rs out.

The lake is built the way the product builds it: a real stream (duplicates, late events,
aborts, malformed records) ingested and carried through the whole graph, then the maintenance
of every table (compaction, checkpoint), then a second stream through the graph again. Each
table then has versions written by plain appends, MERGEs, compactions and a checkpoint.
"""

import functools
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_assets.components import builtin
from eos_assets.declaration import AlertRule
from eos_assets.devkit.producer import ProduceOptions, produce
from eos_assets.lib.delta import maintenance
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.support import graph
from eos_assets_tests.support.orders import (
    KPI_ALERTS,
    KPI_WINDOW,
    KPI_WINDOW_DISTINCT,
    MODEL,
    RAW_EVENTS,
    Z_ORDER,
)
from eos_assets_tests.support.orders import TABLES as MAINTAINED

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
# Every table of the lake, but one of each pair the same code writes: kpi_window and its
# distinct values are kept by the code that keeps kpi_daily and its own (kpi_tables.py), with
# columns of the same types but for the period's.
SAME_WRITER = {KPI_WINDOW, KPI_WINDOW_DISTINCT}
TABLES = tuple(k for k in (RAW_EVENTS, *graph.TABLES, KPI_ALERTS) if k not in SAME_WRITER)
# The orders stream with a revenue rule every window breaks: its alert ledger gets rows.
_EVERY_WINDOW = AlertRule(kpi="kpi_window", metric="revenue", below=1e9)
_ALERTING = MODEL.model_copy(update={"alerts": {**MODEL.alerts, "revenue_below": _EVERY_WINDOW}})
_KPI_ALERTS = builtin.build(_ALERTING).kpi_alerts
assert _KPI_ALERTS is not None and _KPI_ALERTS.key == KPI_ALERTS
KPI_ALERTS_ASSET = _KPI_ALERTS

# Protocol of each table as delta-rs writes it today: (min reader, min writer, reader features,
# writer features). Reader 1 / writer 2 has no feature lists: Spark takes `appendOnly` and
# `invariants` as given. A table at writer 7 must list `invariants` when it has a NOT NULL
# column, or delta-spark refuses it (DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH).
PROTOCOLS: dict[str, tuple[int, int, list[str], list[str]]] = {
    "orders/bronze/raw_events": (1, 2, [], []),
    "orders/silver/events": (1, 2, [], []),
    "orders/silver/entity_state": (1, 2, [], []),
    "orders/gold/window_aggregates": (1, 2, [], []),
    "orders/gold/late_events": (1, 2, [], []),
    "orders/gold/kpi_daily": (1, 2, [], []),
    "orders/gold/kpi_daily_distinct": (1, 2, [], []),
    "orders/outbound/kpi_alerts": (1, 2, [], []),
}


@dataclass(frozen=True)
class Lake:
    """A lake the product built, every table with several versions."""

    root: Path

    def uri(self, key: dg.AssetKey) -> str:
        return LakeResource(root=str(self.root)).table_uri(*key.path)


def _stream(bootstrap: str, topic: str, seed: int, start: datetime, manifest: Path) -> None:
    options = ProduceOptions(
        topic=topic, count=400, partitions=3, seed=seed, start_time=start,
        transaction_size=50, duplicate_ratio=0.05, late_ratio=0.03, abort_ratio=0.1,
        malformed_ratio=0.03,
    )  # fmt: skip
    produce(bootstrap, options, manifest)


@pytest.fixture(scope="module")
def lake(
    spark: SparkSession, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Lake:
    """Two streams through the whole graph and the alert ledger, with maintenance between."""
    root = tmp_path_factory.mktemp("interop")
    topic = f"interop-{uuid.uuid4().hex[:8]}"
    built = Lake(root / "lake")
    res = graph.resources(kafka_bootstrap, topic, str(built.root), root / "serving.duckdb")
    assets = [*graph.ALL, KPI_ALERTS_ASSET]
    with pytest.MonkeyPatch.context() as env:
        # Without an endpoint the alerts every final window raises are recorded as PENDING.
        env.delenv("EOS_ALERT_URL", raising=False)
        _stream(kafka_bootstrap, topic, 1, START, root / "first.jsonl")
        graph.materialize(assets, res, graph.window_config(1.0, 1.0))
        for key in MAINTAINED:  # as the maintenance schedule does
            maintenance.maintain(built.uri(key), Z_ORDER.get(key, ()))
        _stream(kafka_bootstrap, topic, 2, START + timedelta(minutes=20), root / "second.jsonl")
        graph.materialize(assets, res, graph.window_config(1.0, 1.0))
    return built


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows as tuples in column-name order, sorted: a comparable form of a table's content."""
    names = sorted(table.column_names)
    columns = [table.column(n).to_pylist() for n in names]
    return sorted(zip(*columns, strict=True), key=repr)


@pytest.mark.parametrize("key", TABLES, ids=lambda k: k.to_user_string())
def test_delta_spark_reads_every_version_of_every_table_as_delta_rs_does(
    lake: Lake, spark: SparkSession, key: dg.AssetKey
) -> None:
    uri = lake.uri(key)
    latest = DeltaTable(uri).version()
    assert latest >= 1, f"{key.to_user_string()} must have several versions to travel through"
    # Every version read by delta-spark (its own snapshot of each), counted in one Spark job.
    versions = [
        spark.read.format("delta").option("versionAsOf", v).load(uri).select(F.lit(v).alias("v"))
        for v in range(latest + 1)
    ]
    counted = functools.reduce(DataFrame.unionAll, versions).groupBy("v").count().collect()
    theirs = {r["v"]: r["count"] for r in counted}
    for version in range(latest + 1):
        ours = DeltaTable(uri, version=version).to_pyarrow_table().num_rows
        assert theirs.get(version, 0) == ours, f"{key.to_user_string()} at version {version}"
    current = spark.read.format("delta").load(uri).toArrow()
    assert current.num_rows > 0
    assert _rows(current) == _rows(DeltaTable(uri).to_pyarrow_table())


@pytest.mark.parametrize("key", TABLES, ids=lambda k: k.to_user_string())
def test_delta_spark_history_is_delta_rs_history(
    lake: Lake, spark: SparkSession, key: dg.AssetKey
) -> None:
    uri = lake.uri(key)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{uri}`").collect()
    theirs = sorted((r["version"], r["operation"]) for r in history)
    ours = sorted((h["version"], h["operation"]) for h in DeltaTable(uri).history())
    assert theirs == ours
    assert [v for v, _ in theirs] == list(range(len(theirs))) and len(theirs) >= 2


def test_the_lake_has_every_kind_of_commit_the_product_makes(lake: Lake) -> None:
    operations = {h["operation"] for k in TABLES for h in DeltaTable(lake.uri(k)).history()}
    assert {"CREATE TABLE", "WRITE", "MERGE", "OPTIMIZE"} <= operations, operations
    assert all(DeltaTable(lake.uri(k)).version() >= 1 for k in TABLES)


@pytest.mark.parametrize("key", TABLES, ids=lambda k: k.to_user_string())
def test_every_table_has_the_recorded_protocol_and_none_locks_delta_spark_out(
    lake: Lake, spark: SparkSession, key: dg.AssetKey
) -> None:
    uri = lake.uri(key)
    protocol = DeltaTable(uri).protocol()
    got = (
        protocol.min_reader_version,
        protocol.min_writer_version,
        sorted(protocol.reader_features or []),
        sorted(protocol.writer_features or []),
    )
    assert got == PROTOCOLS[key.to_user_string()]
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]
    assert (detail["minReaderVersion"], detail["minWriterVersion"]) == got[:2]
    schema = spark.read.format("delta").load(uri).schema
    if protocol.min_writer_version >= 7 and any(not f.nullable for f in schema.fields):
        assert "invariants" in got[3], "NOT NULL without the invariants feature at writer 7"


@pytest.mark.parametrize("key", TABLES, ids=lambda k: k.to_user_string())
def test_delta_spark_appends_to_every_table_and_delta_rs_still_reads_it(
    lake: Lake, spark: SparkSession, key: dg.AssetKey, tmp_path: Path
) -> None:
    copy = str(tmp_path / "table")
    shutil.copytree(lake.uri(key), copy)
    before = DeltaTable(copy)
    rows, protocol = before.to_pyarrow_table().num_rows, before.protocol()
    spark.read.format("delta").load(copy).limit(3).write.format("delta").mode("append").save(copy)
    after = DeltaTable(copy)
    assert after.version() == before.version() + 1
    assert after.to_pyarrow_table().num_rows == rows + 3
    assert after.protocol() == protocol


def test_a_table_spark_creates_has_no_deletion_vectors_and_delta_rs_reads_its_deletes(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path / "table")
    spark.range(100).write.format("delta").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id < 10")
    table = DeltaTable(path)
    protocol = table.protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2)
    assert not protocol.reader_features and not protocol.writer_features
    assert table.to_pyarrow_table().num_rows == 90
