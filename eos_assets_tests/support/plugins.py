"""Shared real-service fixtures besides the broker: one SparkSession and one local Spark
Connect server per test session."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eos_assets.lib.spark import spark_server as server
from eos_assets.lib.spark.java import require_java
from eos_assets.lib.spark.spark_env import spark_config, use_this_python
from eos_assets_tests.support import released


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


@pytest.fixture(scope="session")
def _session_spark_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    state = tmp_path_factory.mktemp("spark-server")
    server.up(state, "local[2]")
    yield state
    server.down(state)


@pytest.fixture
def spark_server_state(_session_spark_server: Path) -> Path:
    """State folder of the session's one local Spark Connect server (2 task slots), running.

    A test may kill it or stop it: the next test that asks for it gets it started again on
    its folder and, when free, its port (``spark_server.up``).
    """
    server.up(_session_spark_server, "local[2]")
    released.on_release("_session_spark_server", lambda: server.down(_session_spark_server))
    return _session_spark_server


@pytest.fixture
def lake_root(tmp_path: Path) -> str:
    """An empty lake root for one test."""
    root = tmp_path / "lake"
    root.mkdir()
    return str(root)
