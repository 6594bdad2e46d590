"""The whole graph with the lake on S3: two rounds of produced data, bronze to the DuckDB KPI
tables, every table equal to the oracle; Spark on the local Spark Connect server (s3a reads,
its Python tasks writing the files with pyarrow), delta-rs committing, DuckDB serving."""

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dagster_pyspark import LazyPySparkResource

from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets.lib import lake_store
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.lake_s3.conftest import objects
from eos_assets_tests.support import graph
from eos_assets_tests.support.oracle import expected

START = datetime(2026, 11, 21, 23, 58, tzinfo=UTC)  # the stream crosses midnight
WINDOW = GRACE = timedelta(minutes=1)
MIX: dict[str, Any] = {
    "duplicate_ratio": 0.05,
    "late_ratio": 0.04,
    "abort_ratio": 0.15,
    "malformed_ratio": 0.03,
    "transaction_size": 100,
    "partitions": 2,
}


def test_the_graph_on_s3_matches_the_oracle_over_two_rounds(
    s3_lake: str,
    s3_spark: str,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    topic = make_topic(partitions=2)
    warehouse = tmp_path / "serving.duckdb"
    res = graph.resources(kafka_bootstrap, topic, s3_lake, warehouse)
    res["lake"] = LakeResource(
        root=s3_lake, storage_options=lake_store.storage_options(s3_lake, os.environ)
    )
    res["pyspark"] = LazyPySparkResource(spark_config={"spark.remote": s3_spark})
    config = graph.window_config(WINDOW.total_seconds() / 60, GRACE.total_seconds() / 60)
    rounds = [
        ProduceOptions(topic=topic, count=600, seed=41, start_time=START, **MIX),
        ProduceOptions(
            topic=topic,
            count=600,
            seed=42,
            start_time=START + timedelta(seconds=150),
            late_by=timedelta(minutes=4),
            **MIX,
        ),
    ]
    batches: list[list[dict[str, Any]]] = []
    want = expected(batches, WINDOW, GRACE)
    for number, options in enumerate(rounds):
        manifest = tmp_path / f"round-{number}.jsonl"
        produce(kafka_bootstrap, options, manifest)
        batches.append(read_manifest(manifest))
        graph.materialize(graph.ALL, res, config)
        want = expected(batches, WINDOW, GRACE)
        graph.assert_matches_oracle(s3_lake, want, warehouse)

    assert want.late_events, "the scenario must produce late events"
    assert len({d for d, _ in want.kpi_daily}) == 2, "the scenario must cross midnight"
    stored = objects(s3_lake)
    assert any(o.endswith(".parquet") for o in stored), "the tables live on the store"
    assert not (Path.cwd() / s3_lake.removeprefix("s3://")).exists(), "nothing on local disk"
