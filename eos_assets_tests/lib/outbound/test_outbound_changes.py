"""The rows each version of a real Delta table changed, read from its log: an update changes only
the rows it touched, an append every row it adds, a compaction none; what is gone is one line."""

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from eos_assets.lib.errors import EosError
from eos_assets.lib.outbound.outbound_changes import changes, data_versions, read_entry

SCHEMA = pa.schema(
    [("day", pa.string()), ("key", pa.string()), ("revision", pa.int64()), ("v", pa.float64())]
)
IDENTITY = ["key", "revision"]


def append(uri: str, *rows: tuple[str, str, int, float]) -> None:
    table = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], SCHEMA)
    write_deltalake(uri, table, mode="append", partition_by=["day"])


@pytest.fixture
def uri(tmp_path: Path) -> str:
    """v0 two rows, v1 an update of one, v2 an append, v3 a compaction (a partition value with a
    space: its folder name is URL-encoded in the log)."""
    path = str(tmp_path / "windows")
    append(path, ("d 1", "k1", 1, 1.0), ("d 1", "k2", 1, 2.0))
    DeltaTable(path).update(predicate="key = 'k1'", updates={"revision": "2", "v": "10.0"})
    append(path, ("d 1", "k3", 1, 3.0))
    DeltaTable(path).optimize.compact()
    return path


def test_each_version_changes_only_the_rows_it_touched(uri: str) -> None:
    found = [(c.version, c.operation, c.rows) for c in changes(uri, 0, 3, SCHEMA, IDENTITY)]
    assert found == [
        (0, "WRITE", [{"day": "d 1", "key": "k1", "revision": 1, "v": 1.0},
                      {"day": "d 1", "key": "k2", "revision": 1, "v": 2.0}]),
        (1, "UPDATE", [{"day": "d 1", "key": "k1", "revision": 2, "v": 10.0}]),  # k2 copied
        (2, "WRITE", [{"day": "d 1", "key": "k3", "revision": 1, "v": 3.0}]),
        (3, "OPTIMIZE", []),
    ]  # fmt: skip
    assert data_versions(uri, 0, 3) == [0, 1, 2]


def test_a_log_entry_lists_its_data_files(uri: str) -> None:
    update = read_entry(uri, 1)
    assert (len(update.added), len(update.removed), update.changes_data) == (1, 1, True)
    file, partition = update.added[0]
    assert Path(file).exists() and partition == {"day": "d 1"}
    compaction = read_entry(uri, 3)
    assert (compaction.operation, compaction.changes_data) == ("OPTIMIZE", False)


def test_a_vacuumed_file_or_a_removed_log_entry_is_one_line(uri: str) -> None:
    DeltaTable(uri).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(EosError, match=r"a file that version 1 of .* rewrote is gone"):
        list(changes(uri, 1, 1, SCHEMA, IDENTITY))
    assert [c.rows for c in changes(uri, 3, 3, SCHEMA, IDENTITY)] == [[]]
    (Path(uri) / "_delta_log" / f"{0:020d}.json").unlink()
    with pytest.raises(EosError, match=r"version 0 of .* is gone .*logRetentionDuration"):
        read_entry(uri, 0)
