"""Delta tables through delta-rs: create, read positions, commit files with ``txn`` actions.

The exactly-once commit rests on one measured property of delta-rs: a commit made from the
``DeltaTable`` snapshot that was used to read ``transaction_version`` fails with
``CommitFailedError`` when a concurrent commit wrote the same ``txn`` app id. Writing by path
re-loads the latest snapshot and would silently duplicate, so every commit here goes through
the snapshot object the positions were read from.
"""

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction

from eos_assets.lib.errors import EosError

__all__ = ["CommitFailedError", "commit_files", "ensure_table", "find_commit", "positions"]


def ensure_table(
    uri: str, schema: pa.Schema, storage_options: Mapping[str, str] | None = None
) -> DeltaTable:
    """Open the table at ``uri``, creating it empty with ``schema`` first if it does not exist.

    Raises:
        EosError: the location cannot be written (a one-line cause and fix).
    """
    options = dict(storage_options or {})
    try:
        return DeltaTable(uri, storage_options=options)
    except TableNotFoundError:
        pass
    try:
        return DeltaTable.create(uri, schema, mode="ignore", storage_options=options)
    except (OSError, DeltaError) as exc:
        raise EosError(
            f"cannot create the Delta table at {uri} ({_cause(exc)}): make "
            "EOS_LAKE_ROOT a writable location"
        ) from exc


def _cause(exc: Exception) -> str:
    """One line of an I/O error; delta-rs adds a multi-line Rust debug dump of the OS error."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc)
    rust = re.search(r'message: "([^"]+)"', text)
    if rust:
        return rust.group(1)
    return " ".join(text.split()) or type(exc).__name__


def load(uri: str, storage_options: Mapping[str, str] | None = None) -> DeltaTable:
    """Open the latest snapshot of the table at ``uri``."""
    return DeltaTable(uri, storage_options=dict(storage_options or {}))


def positions(dt: DeltaTable, app_ids: Iterable[str]) -> dict[str, int | None]:
    """The ``txn`` version of each app id in snapshot ``dt`` (None if never committed)."""
    return {a: dt.transaction_version(a) for a in app_ids}


def add_action(path: str, size: int, stats: str) -> AddAction:
    """An add action for a Parquet file already written inside the table folder."""
    return AddAction(path, size, {}, int(time.time() * 1000), True, stats)


def commit_files(
    dt: DeltaTable,
    actions: Sequence[AddAction],
    schema: pa.Schema,
    txns: Mapping[str, int],
    metadata: Mapping[str, Any],
) -> None:
    """Commit ``actions`` and one ``txn`` action per app id in one Delta commit, from ``dt``.

    Raises:
        CommitFailedError: a concurrent commit conflicted (for example it wrote one of the same
            ``txn`` app ids); nothing of this commit is visible and the caller must re-plan.
    """
    props = CommitProperties(
        custom_metadata=dict(metadata),
        app_transactions=[Transaction(a, v) for a, v in sorted(txns.items())],
    )
    dt.create_write_transaction(
        list(actions), mode="append", schema=schema, commit_properties=props
    )


def find_commit(
    uri: str,
    key: str,
    value: str,
    storage_options: Mapping[str, str] | None = None,
    limit: int = 50,
) -> int:
    """The version of the recent commit whose metadata has ``key == value``.

    Raises:
        EosError: no such commit among the last ``limit``.
    """
    for entry in load(uri, storage_options).history(limit):
        if entry.get(key) == value:
            return int(entry["version"])
    raise EosError(f"commit with {key}={value} not found in the last {limit} versions of {uri}")


def read_arrow(
    uri: str, storage_options: Mapping[str, str] | None = None, columns: Sequence[str] | None = None
) -> pa.Table:
    """The latest snapshot of a small table as Arrow, read from its file list.

    Reads the Parquet files through an explicit pyarrow filesystem (delta-rs's default one can
    abort the interpreter at exit); valid because tables here have no deletion vectors.
    """
    dt = load(uri, storage_options)
    schema = pa.schema(dt.schema().to_arrow())  # type: ignore[arg-type]
    files = dt.file_uris()
    if not files:
        empty = schema.empty_table()
        return empty.select(list(columns)) if columns else empty
    fs, _ = pafs.FileSystem.from_uri(files[0])
    paths = [pafs.FileSystem.from_uri(f)[1] for f in files]
    return pq.read_table(
        paths, filesystem=fs, columns=list(columns) if columns else None, schema=schema
    )


def spark_files(uri: str, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """Data files of the latest snapshot, for ``spark.read.parquet(*files)``."""
    return load(uri, storage_options).file_uris()


def exists(uri: str, storage_options: Mapping[str, str] | None = None) -> bool:
    """True when a Delta table lives at ``uri``."""
    return DeltaTable.is_deltatable(uri, storage_options=dict(storage_options or {}))
