"""check_contiguity on bronze tables whose ingest commits were written by hand: each case a
writer could leave (gap, hole, overlap, miscount, stray or repeated row, loss, declared skip)
gets its own verdict."""

from pathlib import Path

import pytest
from deltalake import DeltaTable

from eos_assets.lib.checks.contiguity import ContiguityReport, check_contiguity
from eos_assets.lib.ingest.commit_log import read_ingest_log
from eos_assets_tests.support.forged_log import append, ingest, offsets_span, read, rows


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return str(tmp_path / "raw_events")


def contiguity(uri: str) -> ContiguityReport:
    dt = DeltaTable(uri)
    offsets = dt.to_pyarrow_table(columns=["topic", "partition", "offset"])
    return check_contiguity(read_ingest_log(dt), offsets)


def test_ranges_that_tile_pass_and_empty_offsets_count_as_gaps(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 6, [0, 1, 2, 4]), read("t", 1, 0, 2))  # 3, 5, 8: markers
    ingest(uri, read("t", 0, 6, 9, [6, 7]), read("t", 1, 2, 4, [2, 3]))
    report = contiguity(uri)
    assert report.ok, report.summary()
    assert (report.partitions, report.ranges, report.rows, report.gaps) == (2, 4, 10, 3)
    assert report.summary() == (
        "10 rows in 4 committed ranges over 2 partitions tile without hole or overlap; "
        "3 offsets are gaps (transaction markers or aborted records)"
    )


def test_a_hole_between_ranges_fails(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 4))
    ingest(uri, read("t", 0, 6, 8))
    report = contiguity(uri)
    assert not report.ok
    assert report.holes == ["t[0] offsets [4, 6) between the ranges of versions 0 and 1"]
    assert report.summary().startswith("1 hole(s) between committed ranges (first: t[0]")


def test_a_range_nested_in_an_earlier_one_is_an_overlap_not_a_hole_after_it(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 10, []))  # offsets 0-9 all markers or aborted
    ingest(uri, read("t", 0, 2, 4, []), positions={("t", 0): 10})
    ingest(uri, read("t", 0, 10, 12))
    report = contiguity(uri)
    assert report.overlaps == ["t[0] offsets [2, 4) committed by versions 0 and 1"]
    assert (report.holes, report.position_mismatches) == ([], [])


def test_a_position_off_the_last_end_fails(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 4), positions={("t", 0): 3})
    report = contiguity(uri)
    assert report.position_mismatches == ["t[0] txn position 3 but the last range ends at 4"]
    assert not report.ok


def test_rows_missing_from_a_range_or_outside_every_range_or_repeated_fail(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 5, [0, 1, 2], records=4), read("t", 1, 0, 2))
    append(uri, rows("t", 0, [7]))
    append(uri, rows("t", 1, [1]))
    report = contiguity(uri)
    assert report.count_mismatches == [
        "t[0] range [0, 5) of version 0 committed 4 records, holds 3 rows",
        "t[1] range [0, 2) of version 0 committed 2 records, holds 3 rows",
    ]
    assert (report.outside_count, report.outside) == (1, ["t[0] offset 7"])
    assert (report.duplicate_count, report.duplicates) == (1, ["t[1] offset 1 x2"])
    assert report.summary() == (
        "2 range(s) whose row count differs (first: t[0] range [0, 5) of version 0 committed 4 "
        "records, holds 3 rows); 1 row(s) outside every committed range (first: t[0] offset 7); "
        "1 duplicated (topic, partition, offset) (first: t[1] offset 1 x2)"
    )


def test_an_acknowledged_loss_tiles_and_an_unacknowledged_one_is_a_hole(uri: str) -> None:
    ingest(uri, read("t", 0, 0, 5))
    ingest(uri, read("t", 0, 20, 23), lost=[offsets_span("t", 0, 5, 20)])
    report = contiguity(uri)
    assert report.ok, report.summary()
    assert (report.lost_offsets, report.acknowledged) == (
        15,
        ["t[0] offsets [5, 20) skipped by version 1"],
    )
    assert report.summary().endswith(
        "; 15 offsets in 1 range(s) were deleted by Kafka before they were ingested and "
        "acknowledged as lost (first: t[0] offsets [5, 20) skipped by version 1)"
    )
    ingest(uri, read("t", 0, 30, 31))
    assert contiguity(uri).holes == ["t[0] offsets [23, 30) between the ranges of versions 1 and 2"]


def test_a_declared_skip_tiles_and_a_row_inside_it_is_outside(uri: str) -> None:
    skip = offsets_span("t", 0, 0, 100, reason="declared start", declared="latest")
    ingest(uri, read("t", 0, 100, 103), skipped=[skip])
    report = contiguity(uri)
    assert report.ok, report.summary()
    assert report.skipped_offsets == 100
    assert report.declared_skips == [
        "t[0] offsets [0, 100) skipped by version 0 (declared start latest)"
    ]
    assert "100 offsets in 1 range(s) come before the stream's declared start" in report.summary()
    append(uri, rows("t", 0, [50]))
    broken = contiguity(uri)
    assert (broken.ok, broken.outside) == (False, ["t[0] offset 50"])


def test_rows_older_than_a_cleaned_up_log_are_counted_apart(uri: str, tmp_path: Path) -> None:
    ingest(uri, read("t", 0, 0, 3))
    ingest(uri, read("t", 0, 3, 5))
    ingest(uri, read("t", 0, 5, 6))
    DeltaTable(uri).create_checkpoint()
    for version in (0, 1):
        (tmp_path / "raw_events" / "_delta_log" / f"{version:020d}.json").unlink()
    report = contiguity(uri)
    assert report.ok, report.summary()
    assert (report.log_complete, report.rows_before_log, report.outside_count) == (False, 5, 0)
