"""Fixtures of the lake on S3: one S3Proxy per test session, a lake prefix per test, and one
Spark Connect server per session started with the lake's variables (s3a jars and settings)."""

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pyarrow.fs as pafs
import pytest

from eos_assets.devkit import s3server
from eos_assets.lib.spark import spark_server


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3server.S3Info]:
    """The session's S3 server (S3Proxy over a temporary folder), bucket ``lake`` created."""
    info = s3server.start_server(tmp_path_factory.mktemp("s3"))
    yield info
    s3server.stop_server(info)


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
    with mock.patch.dict(os.environ, s3_server.env(prefix="spark")):
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
