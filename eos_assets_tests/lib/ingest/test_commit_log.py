"""read_ingest_log on Delta tables whose ingest commits were written by hand: the ranges, losses,
declared skips and positions it collects, and what it makes of a log cleaned up by a checkpoint."""

from pathlib import Path

from deltalake import DeltaTable

from eos_assets.lib.ingest.commit_log import read_ingest_log
from eos_assets_tests.support.forged_log import append, ingest, offsets_span, read, rows


def test_ranges_losses_skips_and_positions_of_every_ingest(tmp_path: Path) -> None:
    uri = str(tmp_path / "raw_events")
    ingest(uri, read("t", 0, 0, 5, [0, 1, 3, 4], malformed=[3]), read("t", 1, 0, 3))
    append(uri, rows("t", 0, [99]), {"eos.operation": "optimize"})  # no ranges: ignored
    ingest(
        uri,
        read("t", 0, 5, 9),
        lost=[offsets_span("t", 1, 3, 10)],
        skipped=[offsets_span("t", 2, 0, 7, reason="declared start", declared="latest")],
    )
    log = read_ingest_log(DeltaTable(uri))
    columns = ["version", "topic", "partition", "start", "end", "records", "malformed"]
    assert [tuple(r.values()) for r in log.ranges.select(columns).to_pylist()] == [
        (0, "t", 0, 0, 5, 4, 1),
        (0, "t", 1, 0, 3, 3, 0),
        (2, "t", 0, 5, 9, 4, 0),
    ]
    stamps = {h["version"]: h["timestamp"] for h in DeltaTable(uri).history()}
    assert log.ranges["committed_at_ms"].to_pylist() == [stamps[0], stamps[0], stamps[2]]
    assert log.lost.to_pylist() == [
        {"version": 2, "topic": "t", "partition": 1, "start": 3, "end": 10}
    ]
    assert log.skipped.to_pylist() == [
        {"version": 2, "topic": "t", "partition": 2, "start": 0, "end": 7, "declared": "latest"}
    ]
    # A partition known only from a loss or a skip still has its position read.
    assert log.positions == {("t", 0): 9, ("t", 1): 10, ("t", 2): 7}
    assert log.partitions() == [("t", 0), ("t", 1), ("t", 2)]
    assert (log.first_version, log.complete) == (0, True)


def test_a_table_without_ingest_commits_has_no_ranges(tmp_path: Path) -> None:
    uri = str(tmp_path / "raw_events")
    append(uri, rows("t", 0, [0, 1]))
    log = read_ingest_log(DeltaTable(uri))
    assert (log.ranges.num_rows, log.lost.num_rows, log.skipped.num_rows) == (0, 0, 0)
    assert (log.positions, log.complete) == ({}, True)


def test_a_log_cleaned_up_after_a_checkpoint_is_incomplete(tmp_path: Path) -> None:
    uri = str(tmp_path / "raw_events")
    ingest(uri, read("t", 0, 0, 3))
    ingest(uri, read("t", 0, 3, 6))
    ingest(uri, read("t", 0, 6, 8))
    DeltaTable(uri).create_checkpoint()
    for version in (0, 1):  # what a log cleanup past the retention removes
        (tmp_path / "raw_events" / "_delta_log" / f"{version:020d}.json").unlink()
    log = read_ingest_log(DeltaTable(uri))
    assert (log.first_version, log.complete) == (2, False)
    assert log.ranges.select(["version", "start", "end"]).to_pylist() == [
        {"version": 2, "start": 6, "end": 8}
    ]
    assert log.positions == {("t", 0): 8}  # the txn action survives in the checkpoint
