"""malformed_rate on bronze tables written by hand: the share over the whole table, over the latest
ingest alone (from its commit), and the breakdowns by reason and partition."""

from pathlib import Path

from deltalake import DeltaTable

from eos_assets.lib.checks.malformed import MalformedReport, malformed_rate
from eos_assets.lib.ingest.commit_log import read_ingest_log
from eos_assets_tests.support.forged_log import append, ingest, read, rows


def measure(uri: str, max_rate: float) -> MalformedReport:
    dt = DeltaTable(uri)
    errors = dt.to_pyarrow_table(columns=["topic", "partition", "error"])
    return malformed_rate(read_ingest_log(dt), errors, max_rate)


def test_the_whole_table_rate_with_a_clean_latest_ingest(tmp_path: Path) -> None:
    uri = str(tmp_path / "raw_events")
    ingest(uri, read("t", 0, 0, 50, malformed=[3, 4]), read("t", 1, 0, 40, malformed=[9]))
    ingest(uri, read("t", 0, 50, 60))
    report = measure(uri, 0.05)
    assert (report.rows, report.malformed, report.rate) == (100, 3, 0.03)
    assert (report.latest_version, report.latest_records, report.latest_rate) == (1, 10, 0.0)
    assert report.by_code == {"invalid_json": 3}
    assert report.by_partition == {"t[0]": 0.033333, "t[1]": 0.025}
    assert report.ok
    strict = measure(uri, 0.01)
    assert not strict.ok
    assert strict.summary() == (
        "malformed 3.00% of 100 rows, 0.00% of the latest ingest (version 1): above the 1.00% "
        "threshold (EOS_MALFORMED_MAX_RATE); most common: invalid_json (3)"
    )


def test_a_fresh_breakage_shows_in_the_latest_ingest_before_it_is_diluted(tmp_path: Path) -> None:
    uri = str(tmp_path / "raw_events")
    ingest(uri, read("t", 0, 0, 1000))
    ingest(uri, read("t", 0, 1000, 1006, malformed=[1001, 1002]), read("t", 1, 0, 4, malformed=[0]))
    append(uri, rows("t", 0, [], None), {"eos.operation": "optimize"})  # not an ingest
    report = measure(uri, 0.01)
    assert report.rate is not None and report.rate < 0.01
    assert (report.latest_version, report.latest_records, report.latest_malformed) == (1, 10, 3)
    assert report.latest_rate == 0.3
    assert not report.ok


def test_reasons_are_counted_by_code_most_common_first(tmp_path: Path) -> None:
    uri = str(tmp_path / "raw_events")
    ingest(uri, read("t", 0, 0, 3))
    bad = [("missing_event_id: no field order_id", 2), ("invalid_amount: -1 is below 0", 1)]
    for error, n in bad:
        append(uri, rows("t", 0, range(n), error))
    report = measure(uri, 1.0)
    assert report.by_code == {"missing_event_id": 2, "invalid_amount": 1}
    assert list(report.by_code) == ["missing_event_id", "invalid_amount"]
    assert report.summary().endswith("most common: missing_event_id (2)")


def test_an_empty_table_has_no_rate_and_passes(tmp_path: Path) -> None:
    uri = str(tmp_path / "raw_events")
    append(uri, rows("t", 0, []))
    report = measure(uri, 0.01)
    assert (report.rate, report.latest_rate, report.latest_version) == (None, None, None)
    assert report.ok
    assert report.summary().startswith("malformed n/a of 0 rows, n/a of the latest ingest")
    assert report.metadata()["rate"] == 0.0


def test_a_rate_equal_to_the_threshold_passes() -> None:
    def report(latest_malformed: int) -> MalformedReport:
        return MalformedReport(100, 1, 3, 10, latest_malformed, max_rate=0.1)

    assert report(1).ok  # 1% and 10%: at most the threshold
    assert not report(2).ok
