"""Upstream increments read from the Delta log: data changes only, in version order."""

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from eos_assets.lib.delta.txn_ids import upstream_app
from eos_assets.lib.derived.increments import added_files, plan_increment
from eos_assets.lib.errors import EosError

SCHEMA = pa.schema([("n", pa.int64())])


def _table(path: Path, *batches: list[int]) -> str:
    uri = str(path / "up")
    DeltaTable.create(uri, SCHEMA)
    for values in batches:
        write_deltalake(uri, pa.table({"n": values}, schema=SCHEMA), mode="append")
    return uri


def test_increment_holds_the_files_added_after_the_consumed_version(tmp_path: Path) -> None:
    uri = _table(tmp_path, [1, 2], [3], [4, 5, 6])
    dt = DeltaTable(uri)
    everything = plan_increment(dt, uri, None)
    assert (everything.first_version, everything.version, everything.records) == (0, 3, 6)
    assert [f.version for f in everything.files] == [1, 2, 3]
    later = plan_increment(dt, uri, 1)
    assert (later.first_version, later.records, later.is_new) == (2, 4, True)
    assert not plan_increment(dt, uri, 3).is_new
    assert plan_increment(dt, uri, 3).files == []
    assert upstream_app("bronze/raw_events") == "eos:upstream:bronze/raw_events"


def test_compaction_is_not_new_data(tmp_path: Path) -> None:
    uri = _table(tmp_path, [1], [2], [3])
    DeltaTable(uri).optimize.compact()
    dt = DeltaTable(uri)
    assert dt.version() == 4
    increment = plan_increment(dt, uri, 3)
    assert increment.is_new and increment.files == [] and increment.records == 0


def test_rewritten_upstream_or_lost_log_stops_with_the_fix(tmp_path: Path) -> None:
    uri = _table(tmp_path, [1], [2])
    DeltaTable(uri).delete("n = 1")
    with pytest.raises(EosError, match="deleted or rewrote rows"):
        plan_increment(DeltaTable(uri), uri, 2)
    assert len(added_files(uri, 3, 3, append_only=False)) == 0
    with pytest.raises(EosError, match="re-created"):
        plan_increment(DeltaTable(uri), uri, 9)
    (Path(uri) / "_delta_log" / f"{1:020d}.json").unlink()
    with pytest.raises(EosError, match="log retention"):
        added_files(uri, 1, 2)
