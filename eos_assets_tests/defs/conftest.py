"""Fixtures of the tests of the Dagster definitions: the orders graph of a test."""

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eos_assets_tests.support.graph_run import OrdersGraph


@pytest.fixture
def orders_graph(
    spark: SparkSession,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    lake_root: str,
    tmp_path: Path,
) -> OrdersGraph:
    """The orders graph over a new 3-partition topic, this test's lake and a DuckDB file in its
    folder; the Spark resource reuses the session of the ``spark`` fixture."""
    del spark  # started first: the Spark resource reuses the session
    topic = make_topic(partitions=3)
    return OrdersGraph(kafka_bootstrap, topic, lake_root, tmp_path / "serving.duckdb", tmp_path)
