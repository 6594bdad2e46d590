"""Incremental checks on bronze tables written by hand: after a snapshot proven clean, only the
files added since are read, and a violation they bring (a repeated or stray row, a miscounted
range, a hole) still fails; a rewritten, recreated or log-trimmed table is checked whole; the
rows a rewrite brings back unchanged are no change."""

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from eos_assets.lib.checks.contiguity import ContiguityReport, contiguity_of
from eos_assets.lib.checks.increment import Checked, rows_changed, since
from eos_assets_tests.support.forged_log import append, ingest, read, rows


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return str(tmp_path / "raw_events")


def proven(uri: str) -> Checked:
    """Check the whole table, which must pass, and return the snapshot it proved."""
    report = contiguity_of(DeltaTable(uri), None)
    assert report.ok and report.since_version is None, report.summary()
    checked = Checked.from_metadata(report.metadata())
    assert checked is not None
    return checked


def again(uri: str, checked: Checked) -> ContiguityReport:
    return contiguity_of(DeltaTable(uri), checked)


def test_only_the_rows_added_since_the_proven_snapshot_are_read(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 6, [0, 1, 2, 4]), read("t", 1, 0, 2))
    checked = proven(uri)
    ingest(uri, read("t", 0, 6, 9, [6, 7]), read("t", 1, 2, 4))
    report = again(uri, checked)
    assert report.ok, report.summary()
    assert (report.since_version, report.rows, report.ranges) == (0, 4, 4)
    assert report.summary().startswith(
        "4 rows added since version 0, each in 4 committed ranges over 2 partitions tile"
    )
    assert report.metadata()["checked_version"] == 1
    unchanged = again(uri, Checked.from_metadata(report.metadata()) or checked)
    assert (unchanged.ok, unchanged.rows, unchanged.since_version) == (True, 0, 1)


def test_a_row_repeated_after_a_clean_check_fails_the_next_one(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 4))
    checked = proven(uri)
    append(uri, rows("t", 0, [2]))  # a copy of a row already proven
    report = again(uri, checked)
    assert not report.ok and report.since_version == 0
    assert report.count_mismatches == [
        "t[0] range [0, 4) of version 0 committed 4 records, holds 5 rows"
    ]


def test_a_repeated_stray_or_missing_row_in_a_new_range_fails(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 4))
    checked = proven(uri)
    ingest(uri, read("t", 0, 4, 8, [4, 5, 6, 7], records=4))
    append(uri, rows("t", 0, [5, 9]))
    report = again(uri, checked)
    assert not report.ok
    assert report.duplicates == ["t[0] offset 5 x2"]
    assert report.outside == ["t[0] offset 9"]
    assert report.count_mismatches == [
        "t[0] range [4, 8) of version 1 committed 4 records, holds 5 rows"
    ]


def test_a_hole_committed_after_a_clean_check_fails(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 4))
    checked = proven(uri)
    ingest(uri, read("t", 0, 6, 8))
    report = again(uri, checked)
    assert not report.ok
    assert report.holes == ["t[0] offsets [4, 6) between the ranges of versions 0 and 1"]


def test_a_rewritten_table_is_checked_whole(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 4))
    ingest(uri, read("t", 0, 4, 8))
    checked = proven(uri)
    DeltaTable(uri).optimize.compact()  # files removed and rewritten
    diff = since(uri, DeltaTable(uri), checked)
    assert diff is not None and diff.removed
    report = again(uri, checked)
    assert report.ok and report.since_version is None and report.rows == 8


def test_a_recreated_table_is_not_the_proven_one(uri: str, tmp_path: Path) -> None:
    ingest(uri, read("t", 0, 0, 4))
    checked = proven(uri)
    shutil.rmtree(uri)
    ingest(uri, read("t", 0, 0, 4))  # version 0 again, other files
    assert since(uri, DeltaTable(uri), checked) is None
    append(uri, rows("t", 0, [1]))
    report = again(uri, checked)
    assert not report.ok and report.since_version is None
    assert report.duplicates == ["t[0] offset 1 x2"]


def test_a_checked_version_newer_than_the_table_or_cleaned_up_means_whole(
    uri: str, tmp_path: Path
) -> None:
    ingest(uri, read("t", 0, 0, 3))
    ingest(uri, read("t", 0, 3, 5))
    assert since(uri, DeltaTable(uri), Checked(7, "x")) is None
    checked = proven(uri)
    ingest(uri, read("t", 0, 5, 6))
    DeltaTable(uri).create_checkpoint()
    for version in (0, 1):
        (tmp_path / "raw_events" / "_delta_log" / f"{version:020d}.json").unlink()
    assert since(uri, DeltaTable(uri), checked) is None
    report = again(uri, checked)
    assert report.ok and report.since_version is None


def test_rows_a_rewrite_brings_back_unchanged_are_no_change() -> None:
    removed = pa.table({"w": [1, 2, 3], "n": ["a", "b", "c"]})
    added = pa.table({"w": [2, 1, 2, 4], "n": ["b", "a", "b", "d"]})
    changed = rows_changed(added, removed).sort_by([("w", "ascending")])
    assert changed.to_pylist() == [{"w": 2, "n": "b"}, {"w": 3, "n": "c"}, {"w": 4, "n": "d"}]
