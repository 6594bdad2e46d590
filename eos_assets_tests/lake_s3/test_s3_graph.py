"""The whole graph with the lake on S3: two rounds of produced data, bronze to the DuckDB KPI
tables, every table equal to the oracle; Spark on the local Spark Connect server (s3a reads,
its Python tasks writing the files with pyarrow), delta-rs committing, DuckDB serving. Each
round's run is a process of its own (``materialize_once``); the oracle reads the store here."""

import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets_tests.support import graph
from eos_assets_tests.support.oracle import expected
from eos_assets_tests.support.s3 import objects

REPO = Path(__file__).resolve().parents[2]
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
    command = [sys.executable, "-m", "eos_assets_tests.lake_s3.materialize_once"]
    command += ["--bootstrap", kafka_bootstrap, "--topic", topic, "--lake", s3_lake]
    command += ["--warehouse", str(warehouse), "--remote", s3_spark]
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
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
        assert done.returncode == 0, done.stderr[-3000:]
        want = expected(batches, WINDOW, GRACE)
        graph.assert_matches_oracle(s3_lake, want, warehouse)

    assert want.late_events, "the scenario must produce late events"
    assert len({d for d, _ in want.kpi_daily}) == 2, "the scenario must cross midnight"
    stored = objects(s3_lake)
    assert any(o.endswith(".parquet") for o in stored), "the tables live on the store"
    assert not (Path.cwd() / s3_lake.removeprefix("s3://")).exists(), "nothing on local disk"
