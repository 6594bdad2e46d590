"""One version's entry of a Delta table's ``_delta_log``, read as its JSON actions."""

import json
from typing import Any
from urllib.parse import unquote

import pyarrow.fs as pafs

from eos_assets.lib.errors import EosError


def log_actions(table_uri: str, version: int, fix: str) -> list[dict[str, Any]]:
    """The actions (``add``, ``remove``, ``commitInfo``...) of the entry of ``version``, in order.

    Raises:
        EosError: the entry is gone (log retention); the message ends with ``fix``.
    """
    fs, root = pafs.FileSystem.from_uri(table_uri)
    path = f"{root.rstrip('/')}/_delta_log/{version:020d}.json"
    try:
        with fs.open_input_stream(path) as stream:
            lines = stream.read().decode().splitlines()
    except FileNotFoundError as exc:
        raise EosError(
            f"the log entry of version {version} of {table_uri} is gone (log retention): {fix}"
        ) from exc
    return [json.loads(line) if line.strip() else {} for line in lines]


def file_uri(table_uri: str, path: str) -> str:
    """The URI of a data file named by a log action (``path``: URL-encoded, relative to the
    table or absolute)."""
    path = unquote(path)
    if "://" in path or path.startswith("/"):
        return path
    return f"{table_uri.rstrip('/')}/{path}"
