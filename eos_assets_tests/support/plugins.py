"""Shared real-service fixtures besides the broker: one SparkSession per test session."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eos_assets.lib.spark.java import require_java
from eos_assets.lib.spark.spark_env import spark_config, use_this_python


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One real local SparkSession (2 task slots) shared by every test."""
    require_java()
    use_this_python()
    builder = SparkSession.builder
    for key, value in spark_config("local[2]", app_name="eos_assets_tests").items():
        builder = builder.config(key, value)
    session = builder.config("spark.ui.enabled", "false").getOrCreate()
    yield session
    session.stop()


@pytest.fixture
def lake_root(tmp_path: Path) -> str:
    """An empty lake root for one test."""
    root = tmp_path / "lake"
    root.mkdir()
    return str(root)
