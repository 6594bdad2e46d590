"""The bench's verdicts on its peers: record sets, window counts, the chart, the Java peer."""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from eos_assets.bench import chart, compare, kstreams, peer_latency
from eos_assets.bench.peers import producer_perf_line
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
    ks = "Kafka Streams exactly_once_v2: event -> count"
    lines = [
        Measurement("peers", "a", 1.2, "x", data={"chart": [
            {"panel": "ingest", "system": "eos_assets exactly-once", "value": 1000.0},
            {"panel": "ingest", "system": "Spark Structured Streaming", "value": 800.0},
        ]}),
        Measurement("peers", "b", 3.0, "s", data={"chart": [
            {"panel": "latency", "system": f"{ks}, p50", "value": 1.5},
            {"panel": "latency", "system": f"{ks}, p95", "value": 3.0},
        ]}),
        # Ours come from the freshness line's data, not from chart points it may carry.
        Measurement("freshness", "p95", 40.0, "s", data={"p50": 20.0, "p95": 40.0, "chart": [
            {"panel": "latency", "system": "eos_assets other, p50", "value": 99.0},
        ]}),
        Measurement("graph", "no chart", 3.0, "s"),
    ]  # fmt: skip
    points = chart.chart_points(lines)
    assert points["ingest"] == [
        ("eos_assets exactly-once", 1000.0),
        ("Spark Structured Streaming", 800.0),
    ]
    assert chart.latency_rows(points["latency"]) == [
        ("eos_assets: event -> KPI in DuckDB", {"p50": 20.0, "p95": 40.0}),
        (ks, {"p50": 1.5, "p95": 3.0}),
    ]
    png = chart.write_chart(lines, tmp_path / "bench.png")
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert chart.write_chart(lines[3:], tmp_path / "none.png") is None


def test_ranked_latency_credits_the_nth_event_to_the_first_count_of_n() -> None:
    win, other = (0, "order_paid", "EUR"), (300_000_000, "order_paid", "")
    events = {win: np.array([10.0, 11.0, 12.0]), other: np.array([20.0, 21.0])}
    # win: counts 2 at t=13, then 3 at t=15; other: written once with 1 of its 2 events.
    seen = {win: [(13.0, 2), (15.0, 3)], other: [(30.0, 1)]}
    lat = peer_latency.ranked(events, seen)
    assert sorted(lat.seconds.tolist()) == [2.0, 3.0, 3.0, 10.0]
    assert (lat.never_visible, lat.events) == (1, 5)
    # A count that goes back (a stale update read late) does not undo what was visible.
    lat = peer_latency.ranked({win: np.array([1.0, 2.0])}, {win: [(3.0, 2), (4.0, 1)]})
    assert lat.seconds.tolist() == [2.0, 1.0] and lat.never_visible == 0
    assert peer_latency.ranked(events, {}).stats() == {"p50": None, "p95": None, "max": None}


def test_window_key_is_the_five_minute_window_of_a_valid_event() -> None:
    event = {"event_time": "2026-11-21T00:07:30.250000+00:00", "event_type": "order_paid",
             "currency": None, "event_id": "e1"}  # fmt: skip
    us = 1_795_219_200_000_000 + 300_000_000  # 2026-11-21T00:05:00Z
    assert peer_latency.window_key(json.dumps(event).encode()) == (us, "order_paid", "")
    assert peer_latency.window_key(b"{not json") is None
    assert peer_latency.window_key(json.dumps({"event_type": "order_paid"}).encode()) is None


def test_kafka_streams_peer_compiles(tmp_path: Path) -> None:
    classes = kstreams.compile_peer(tmp_path / "classes")
    assert (classes / f"{kstreams.MAIN}.class").exists()


def test_window_diff_tells_windows_missing_at_the_end() -> None:
    gold = {(0, "order_paid", "EUR"): 1, (300, "order_paid", "EUR"): 2, (600, "order_paid", ""): 3}
    diff = compare.window_diff(gold, {(0, "order_paid", "EUR"): 1})
    assert (diff.only_gold, diff.missing_at_end) == (2, 2)
    assert compare.window_diff(gold, {}).missing_at_end == 3


def test_a_failed_kafka_streams_peer_names_its_root_cause() -> None:
    trace = "\n".join([
        "ERROR stream-thread [x] Error encountered sending record to topic t-repartition",
        "org.apache.kafka.streams.errors.StreamsException: Error encountered sending record",
        "\tat org.apache.kafka.streams.processor.internals.RecordCollectorImpl.send(R.java:1)",
        "Caused by: org.apache.kafka.common.errors.InvalidTimestampException: too far ahead",
        "\t... 17 more",
        'Exception in thread "main" java.lang.IllegalStateException: Kafka Streams stopped: ERROR',
        "\tat WindowCountPeer.main(WindowCountPeer.java:165)",
    ])  # fmt: skip
    cause = kstreams._cause(trace)
    assert cause == "org.apache.kafka.common.errors.InvalidTimestampException: too far ahead"
    assert kstreams._cause("just one line") == "just one line"


def test_producer_line_compares_the_best_round_of_each_side() -> None:
    line = producer_perf_line([90_000.0, 110_000.0], [250_000.0, 200_000.0], 1_000_000, 2)
    assert line.value == 110_000 / 250_000
    assert line.met is False
    assert "90,000/250,000, 110,000/200,000" in line.detail
