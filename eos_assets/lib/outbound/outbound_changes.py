"""The rows a Delta table changed in each of its versions, read from its ``_delta_log``.

A version that changes data (``dataChange=true``) removes the files holding the rows it
touches and adds their rewritten copies; rows of those files it did not touch are copied
unchanged. So the rows a version *changed* are the rows of its added files whose identity
(for ``gold/window_aggregates``: the window key, ``revision`` and ``is_final``) is not among
the rows of its removed files. Compaction (OPTIMIZE) and VACUUM commit nothing with
``dataChange=true`` and so change nothing; a blind append has no removes and changes every
row it adds.

The removed files must still exist: VACUUM deletes them once they are older than its
retention, so a reader must follow the table more often than that.
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from eos_assets.lib.delta.delta_log import file_uri, log_actions
from eos_assets.lib.errors import EosError


@dataclass(frozen=True)
class LogEntry:
    """One version's log entry: its operation and the data files it added and removed."""

    version: int
    operation: str | None
    added: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    removed: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)

    @property
    def changes_data(self) -> bool:
        """True when the version added or removed rows (not compaction, not VACUUM)."""
        return bool(self.added or self.removed)


@dataclass(frozen=True)
class VersionChange:
    """The rows (new states) one version of the table changed."""

    version: int
    operation: str | None
    rows: list[dict[str, Any]]


def read_entry(table_uri: str, version: int) -> LogEntry:
    """The log entry of ``version``: operation and data-changing adds and removes.

    Raises:
        EosError: the entry is gone (log retention).
    """
    fix = "follow the table more often than delta.logRetentionDuration"
    entry = LogEntry(version, None)
    operation = None
    for action in log_actions(table_uri, version, fix):
        if "commitInfo" in action:
            operation = action["commitInfo"].get("operation")
        for kind, files in (("add", entry.added), ("remove", entry.removed)):
            item = action.get(kind)
            if item is not None and item.get("dataChange", True):
                files.append((file_uri(table_uri, item["path"]), item.get("partitionValues") or {}))
    return LogEntry(version, operation, entry.added, entry.removed)


def data_versions(table_uri: str, first: int, last: int) -> list[int]:
    """The versions in ``first..last`` that changed data."""
    return [v for v in range(first, last + 1) if read_entry(table_uri, v).changes_data]


def changes(
    table_uri: str, first: int, last: int, schema: pa.Schema, identity: Sequence[str]
) -> Iterator[VersionChange]:
    """The rows each version in ``first..last`` changed, version by version.

    Args:
        table_uri: the table (a local path or a URI pyarrow understands).
        first: first version to read.
        last: last version to read.
        schema: the table's schema.
        identity: the columns that tell one state of a row from another.

    Raises:
        EosError: a log entry or a removed file is gone.
    """
    for version in range(first, last + 1):
        entry = read_entry(table_uri, version)
        if not entry.changes_data:
            yield VersionChange(version, entry.operation, [])
            continue
        before = {
            tuple(r[c] for c in identity)
            for r in _read(entry.removed, schema, table_uri, version).to_pylist()
        }
        after = _read(entry.added, schema, table_uri, version).to_pylist()
        rows = [r for r in after if tuple(r[c] for c in identity) not in before]
        yield VersionChange(version, entry.operation, rows)


def _read(
    files: list[tuple[str, Mapping[str, Any]]], schema: pa.Schema, table_uri: str, version: int
) -> pa.Table:
    pieces = []
    for uri, partition_values in files:
        fs, path = pafs.FileSystem.from_uri(uri)
        stored = [n for n in schema.names if n not in partition_values]
        try:
            piece = pq.read_table(path, filesystem=fs, columns=stored)
        except FileNotFoundError as exc:
            raise EosError(
                f"a file that version {version} of {table_uri} rewrote is gone (vacuumed "
                "before it was published): run the publisher more often than the vacuum "
                "retention (maintain_delta_tables: orphan_hours)"
            ) from exc
        for name, value in partition_values.items():
            column = pa.array([value] * piece.num_rows, pa.string())
            piece = piece.append_column(name, column.cast(schema.field(name).type))
        pieces.append(piece.select(schema.names).cast(schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()
