"""Fixtures of the lake on S3: a lake prefix per test on the session's S3 server
(``support.s3``), and one Spark Connect server per session started with the lake's variables
(s3a jars and settings)."""

import dataclasses
from collections.abc import Iterator

import pytest

from eos_assets.devkit import s3server
from eos_assets.lib.spark import spark_server
from eos_assets.settings import Settings

# The fault suite's fixtures: its product producer, its ledger, its bench, no ingest outliving
# a test.
from eos_assets_tests.faults.conftest import _no_stray_ingests as _no_stray_ingests
from eos_assets_tests.faults.conftest import bench as bench
from eos_assets_tests.faults.conftest import ledger as ledger
from eos_assets_tests.faults.conftest import produced as produced
from eos_assets_tests.faults.conftest import table as table
from eos_assets_tests.support import released
from eos_assets_tests.support.fault_bench import Bench
from eos_assets_tests.support.s3 import lake_env


@pytest.fixture
def s3_lake(s3_server: s3server.S3Info, monkeypatch: pytest.MonkeyPatch) -> str:
    """A lake root of its own on the session's server, with the variables of the README set
    in this process (as a deployment sets them); returns ``EOS_LAKE_ROOT``."""
    env = lake_env(s3_server)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env["EOS_LAKE_ROOT"]


@pytest.fixture(scope="session")
def s3_spark(s3_server: s3server.S3Info, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a local Spark Connect server (2 task slots) started as `eos-assets spark up`
    is with the lake on the session's S3 server."""
    with pytest.MonkeyPatch.context() as patched:  # the lake's variables, for the start only
        for name, value in s3_server.env(prefix="spark").items():
            patched.setenv(name, value)
        info = spark_server.start_server(tmp_path_factory.mktemp("spark-s3"), "local[2]")
    stop = released.on_release("s3_spark", lambda: spark_server.stop_server(info))
    yield info.run_url()
    stop()


@pytest.fixture
def s3_bench(bench: Bench, s3_lake: str, s3_spark: str) -> Bench:
    """The fault suite's bench with its bronze table in the lake on S3, and every ingest
    process a session of the Spark Connect server of that lake."""
    uri = Settings(lake_root=s3_lake).table_uri("orders", "bronze", "raw_events")
    return dataclasses.replace(bench, table=uri, remote=s3_spark)
