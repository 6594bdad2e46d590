"""The session's S3 server, shared by every test folder that puts a lake on object storage:
one S3Proxy over a temporary folder, started at its first use, stopped at the session's end."""

import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from eos_assets.devkit import s3server

# The processes of the session's S3 server: its first start, then each restart of a test.
_STARTED: list[s3server.S3Info] = []


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3server.S3Info]:
    """The session's S3 server (S3Proxy over a temporary folder), bucket ``lake`` created."""
    _STARTED.append(s3server.start_server(tmp_path_factory.mktemp("s3")))
    yield _STARTED[0]
    for info in _STARTED:
        s3server.stop_server(info)


def stop(info: s3server.S3Info) -> None:
    """Stop the session's server: the process serving its endpoint now (a test may have
    restarted it before)."""
    s3server.stop_server(next(i for i in reversed(_STARTED) if i.endpoint == info.endpoint))


def restart(info: s3server.S3Info) -> None:
    """Start the session's server again, at the same endpoint over the same data."""
    port = int(info.endpoint.rsplit(":", 1)[1])
    _STARTED.append(s3server.start_server(Path(info.data_dir), port=port))


def lake_env(info: s3server.S3Info) -> dict[str, str]:
    """The README's variables for a lake root of its own (a fresh prefix) on ``info``."""
    return info.env(prefix=f"t-{uuid.uuid4().hex[:10]}")


def objects(root: str) -> list[str]:
    """Every object under ``root`` (an s3:// URI), by the store's own listing (the endpoint
    and keys from this process's environment)."""
    fs, path = pafs.FileSystem.from_uri(root)
    found = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    return sorted(f.path for f in found if f.type == pafs.FileType.File)
