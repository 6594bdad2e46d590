"""Fixtures of the lake on S3: one S3Proxy per test session, a lake prefix per test, and one
Spark Connect server per session started with the lake's variables (s3a jars and settings)."""

import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from eos_assets.devkit import s3server
from eos_assets.lib.spark import spark_server

# The fault suite's fixtures: its product producer, its ledger, no ingest outliving a test.
from eos_assets_tests.faults.conftest import _no_stray_ingests as _no_stray_ingests
from eos_assets_tests.faults.conftest import ledger as ledger
from eos_assets_tests.faults.conftest import produced as produced

# The processes of the session's S3 server: its first start, then each restart of a test.
_STARTED: list[s3server.S3Info] = []


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3server.S3Info]:
    """The session's S3 server (S3Proxy over a temporary folder), bucket ``lake`` created."""
    _STARTED.append(s3server.start_server(tmp_path_factory.mktemp("s3")))
    yield _STARTED[0]
    for info in _STARTED:
        s3server.stop_server(info)


def restart(info: s3server.S3Info) -> None:
    """Start the session's server again, at the same endpoint over the same data."""
    port = int(info.endpoint.rsplit(":", 1)[1])
    _STARTED.append(s3server.start_server(Path(info.data_dir), port=port))


@pytest.fixture
def s3_lake(s3_server: s3server.S3Info, monkeypatch: pytest.MonkeyPatch) -> str:
    """A lake root of its own on the session's server, with the variables of the README set
    in this process (as a deployment sets them); returns ``EOS_LAKE_ROOT``."""
    env = s3_server.env(prefix=f"t-{uuid.uuid4().hex[:10]}")
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
    yield info.run_url()
    spark_server.stop_server(info)


def objects(root: str) -> list[str]:
    """Every object under ``root`` (an s3:// URI), by the store's own listing."""
    fs, path = pafs.FileSystem.from_uri(root)
    found = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    return sorted(f.path for f in found if f.type == pafs.FileType.File)


def bucket_folder(info: s3server.S3Info) -> Path:
    """The folder S3Proxy keeps the bucket ``lake`` in."""
    return Path(info.data_dir) / "data" / s3server.BUCKET
