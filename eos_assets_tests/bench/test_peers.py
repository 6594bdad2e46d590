"""The bench's verdicts on its peers: record sets, window counts, the chart, the Java peer."""

from pathlib import Path

import pyarrow as pa

from eos_assets.bench import chart, compare, kstreams
from eos_assets.bench.report import Measurement


def _records(pairs: list[tuple[int, int]]) -> pa.Table:
    return pa.table(
        {
            "partition": pa.array([p for p, _ in pairs], pa.int32()),
            "offset": pa.array([o for _, o in pairs], pa.int64()),
        }
    )


def test_offset_diff_same_records_in_another_order() -> None:
    diff = compare.offset_diff(
        _records([(0, 1), (1, 1), (0, 2)]), _records([(0, 2), (0, 1), (1, 1)])
    )
    assert diff.same
    assert (diff.ours, diff.theirs) == (3, 3)


def test_offset_diff_counts_missing_extra_and_repeated() -> None:
    ours = _records([(0, 0), (0, 1), (1, 0), (1, 5)])
    # (1, 5) lost, (2, 0) never ours, (0, 1) written twice.
    theirs = _records([(0, 0), (0, 1), (0, 1), (1, 0), (2, 0)])
    diff = compare.offset_diff(ours, theirs)
    assert (diff.missing, diff.extra, diff.repeated) == (1, 1, 1)
    assert not diff.same


def test_window_diff_names_each_kind_of_difference() -> None:
    gold = {(0, "order_paid", "EUR"): 10, (0, "order_paid", ""): 3, (300, "order_paid", "EUR"): 4}
    peer = {(0, "order_paid", "EUR"): 9, (0, "order_paid", ""): 3, (600, "order_paid", "EUR"): 1}
    diff = compare.window_diff(gold, peer)
    assert (diff.windows, diff.same, diff.differ, diff.only_gold, diff.only_peer) == (3, 1, 1, 1, 1)
    assert diff.mismatched == 3
    assert diff.fewer_events == 17 - 13
    assert diff.missing_at_end == 0  # the window at 300 is missing before the peer's last, 600
    assert "3 of 3 windows differ" in diff.summary()
    assert diff.label("peer") == "peer\n(counted 24% fewer events)"


def test_window_diff_of_equal_counts_is_empty() -> None:
    counts = {(0, "order_created", "USD"): 2}
    diff = compare.window_diff(counts, dict(counts))
    assert (diff.mismatched, diff.fewer_events, diff.same) == (0, 0, 1)
    assert diff.label("peer") == "peer"


def test_chart_takes_points_from_lines_and_draws_a_png(tmp_path: Path) -> None:
    lines = [
        Measurement("peers", "a", 1.2, "x", data={"chart": [
            {"panel": "ingest", "system": "eos_assets exactly-once", "value": 1000.0},
            {"panel": "ingest", "system": "Spark Structured Streaming", "value": 800.0},
        ]}),
        Measurement("freshness", "p95", 40.0, "s", data={"p50": 20.0, "p95": 40.0}),
        Measurement("graph", "no chart", 3.0, "s"),
    ]  # fmt: skip
    points = chart.chart_points(lines)
    assert points["ingest"] == [
        ("eos_assets exactly-once", 1000.0),
        ("Spark Structured Streaming", 800.0),
    ]
    assert [v for _, v in points["latency"]] == [20.0, 40.0]
    png = chart.write_chart(lines, tmp_path / "bench.png")
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert chart.write_chart(lines[2:], tmp_path / "none.png") is None


def test_kafka_streams_peer_compiles(tmp_path: Path) -> None:
    classes = kstreams.compile_peer(tmp_path / "classes")
    assert (classes / f"{kstreams.MAIN}.class").exists()


def test_window_diff_tells_windows_missing_at_the_end() -> None:
    gold = {(0, "order_paid", "EUR"): 1, (300, "order_paid", "EUR"): 2, (600, "order_paid", ""): 3}
    diff = compare.window_diff(gold, {(0, "order_paid", "EUR"): 1})
    assert (diff.only_gold, diff.missing_at_end) == (2, 2)
    assert compare.window_diff(gold, {}).missing_at_end == 3
