"""The exactly-once bronze ingest against a real broker, a real SparkSession and real Delta."""

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.contract.contract import Malformed, error_code
from eos_assets.lib.contract.schema import bronze_schema
from eos_assets.lib.delta import delta_io
from eos_assets.lib.ingest.ingest import IngestOptions, IngestOutcome, ingest_bronze
from eos_assets.lib.kafka.kafka_tools import group_lag
from eos_assets_tests.support.records import batch, bronze, committed_truth, event, rows
from eos_assets_tests.support.txn_producer import send_transaction


@pytest.fixture
def table(lake_root: str) -> str:
    return str(Path(lake_root) / "bronze" / "raw_events")


def run(spark: SparkSession, uri: str, bootstrap: str, topic: str, **kw: Any) -> IngestOutcome:
    options = IngestOptions(**kw)
    config = {"bootstrap.servers": bootstrap}
    return ingest_bronze(spark, uri, [topic], config, options, contract=ORDERS.contract)


@pytest.mark.parametrize("read_here_below", [0, 1000], ids=["in-spark-tasks", "in-this-process"])
def test_committed_once_aborted_never_and_rerun_adds_nothing(
    spark: SparkSession,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    table: str,
    read_here_below: int,
) -> None:
    topic = make_topic(partitions=3)
    sent = [
        send_transaction(kafka_bootstrap, topic, batch(60, 3)),
        send_transaction(kafka_bootstrap, topic, batch(30, 3, first=60), commit=False),
        send_transaction(kafka_bootstrap, topic, batch(45, 3, first=90)),
    ]
    outcome = run(spark, table, kafka_bootstrap, topic, read_here_below=read_here_below)
    got = rows(table)
    assert len(got) == len(set(got)) == 105
    assert set(got) == committed_truth(sent)
    assert outcome.records == 105 and outcome.malformed == 0
    assert outcome.version == 1
    # The ingest's job description does not stick to the later jobs of the run.
    assert spark.sparkContext.getLocalProperty("spark.job.description") is None

    again = run(spark, table, kafka_bootstrap, topic)
    assert again.version is None and again.records == 0
    assert DeltaTable(table).version() == 1
    assert len(rows(table)) == 105


def test_kafka_consumer_groups_shows_the_group_at_lag_zero_after_an_ingest(
    spark: SparkSession, kafka_bootstrap: str, make_topic: Callable[..., str], table: str
) -> None:
    """Kafka's own tool (from the installed jars) sees the advisory commit of the positions."""
    topic = make_topic(partitions=3)
    send_transaction(kafka_bootstrap, topic, batch(60, 3))
    send_transaction(kafka_bootstrap, topic, batch(30, 3, first=60), commit=False)
    before = group_lag(kafka_bootstrap, "eos-assets")
    assert not [tp for tp in before if tp[0] == topic], "no offsets before the first ingest"
    outcome = run(spark, table, kafka_bootstrap, topic)
    assert outcome.advisory_committed and outcome.records == 60
    lags = {
        tp: lag for tp, lag in group_lag(kafka_bootstrap, "eos-assets").items() if tp[0] == topic
    }
    assert lags == {(topic, p): 0 for p in range(3)}
    # Lag counts offsets: one more committed transaction shows up as lag until the next ingest.
    send_transaction(kafka_bootstrap, topic, batch(3, 3, first=90))
    assert all(group_lag(kafka_bootstrap, "eos-assets")[(topic, p)] for p in range(3))
    run(spark, table, kafka_bootstrap, topic)
    assert {group_lag(kafka_bootstrap, "eos-assets")[(topic, p)] for p in range(3)} == {0}


def test_second_batch_continues_where_the_first_ended_and_ranges_tile(
    spark: SparkSession, kafka_bootstrap: str, make_topic: Callable[..., str], table: str
) -> None:
    topic = make_topic(partitions=2)
    sent = [send_transaction(kafka_bootstrap, topic, batch(40, 2))]
    first = run(spark, table, kafka_bootstrap, topic)
    sent.append(send_transaction(kafka_bootstrap, topic, batch(20, 2, first=40), commit=False))
    sent.append(send_transaction(kafka_bootstrap, topic, batch(30, 2, first=60)))
    second = run(spark, table, kafka_bootstrap, topic)
    assert (first.records, second.records) == (40, 30)
    assert set(rows(table)) == committed_truth(sent) and len(rows(table)) == 70

    dt = DeltaTable(table)
    history = [h for h in reversed(dt.history()) if h.get("eos.operation") == "ingest"]
    by_partition: dict[int, list[dict]] = {}
    for h in history:
        for r in h["eos.ranges"]:
            by_partition.setdefault(r["partition"], []).append(r)
    for partition, ranges in by_partition.items():
        assert ranges[0]["start"] == 0
        assert all(a["end"] == b["start"] for a, b in itertools.pairwise(ranges))
        assert dt.transaction_version(f"eos:{topic}:{partition}") == ranges[-1]["end"]
        # The second range holds an aborted transaction and two markers: gaps, not data.
        assert (
            ranges[1]["records"] == 15
            and ranges[1]["gaps"] == ranges[1]["end"] - ranges[1]["start"] - 15
        )
        assert ranges[1]["gaps"] >= 10
    t = bronze(table)
    for partition in by_partition:
        offsets = [
            o
            for p, o in zip(t["partition"].to_pylist(), t["offset"].to_pylist(), strict=True)
            if p == partition
        ]
        last_end = by_partition[partition][-1]["end"]
        assert all(0 <= o < last_end for o in offsets)


def test_max_records_caps_each_run_and_runs_catch_up_exactly_once(
    spark: SparkSession, kafka_bootstrap: str, make_topic: Callable[..., str], table: str
) -> None:
    topic = make_topic(partitions=2)
    sent = [send_transaction(kafka_bootstrap, topic, batch(50, 2)) for _ in range(2)]
    counts = []
    while True:
        outcome = run(spark, table, kafka_bootstrap, topic, max_records=30)
        if outcome.version is None:
            break
        counts.append(sum(r["end"] - r["start"] for r in outcome.ranges()))
    assert all(c <= 30 for c in counts) and len(counts) >= 4
    got = rows(table)
    assert len(got) == len(set(got)) == 100 and set(got) == committed_truth(sent)


def test_malformed_records_are_kept_flagged_and_counted(
    spark: SparkSession, kafka_bootstrap: str, make_topic: Callable[..., str], table: str
) -> None:
    topic = make_topic(partitions=1)
    bad = [
        (0, b"k1", b"\xff\xfe not utf-8"),
        (0, b"k2", b"{not json"),
        (0, b"k3", b'["an", "array"]'),
        (
            0,
            b"k4",
            json.dumps(
                {"event_type": "order_paid", "event_time": "2026-11-21T10:00:00Z", "amount": 1}
            ).encode(),
        ),
        (0, None, event(1, event_type="order_teleported")),
        (0, b"k6", event(2).replace(b"2026-11-21T10:00:00.123Z", b"yesterday")),
        (0, b"k7", event(3).replace(b'"amount": 13.5', b'"amount": "lots"')),
    ]
    send_transaction(kafka_bootstrap, topic, [*batch(5, 1), *bad])
    outcome = run(spark, table, kafka_bootstrap, topic)
    assert (outcome.records, outcome.malformed) == (12, 7)
    t = bronze(table).sort_by("offset")
    codes = [error_code(e) for e in t["error"].to_pylist()]
    assert codes == [None] * 5 + [
        Malformed.INVALID_UTF8,
        Malformed.INVALID_JSON,
        Malformed.NOT_AN_OBJECT,
        Malformed.MISSING_EVENT_ID,
        "unknown_event_type",
        Malformed.INVALID_EVENT_TIME,
        "invalid_amount",
    ]
    assert t["value"].to_pylist()[5:] == [v for _, _, v in bad]


def test_a_commit_from_a_stale_snapshot_with_the_same_txn_fails(table: str) -> None:
    """The conflict the protocol relies on: a racing writer cannot commit a range twice."""
    schema = bronze_schema(ORDERS.contract)
    delta_io.ensure_table(table, schema)
    mine, theirs = delta_io.load(table), delta_io.load(table)
    assert delta_io.positions(mine, ["eos:t:0"]) == {"eos:t:0": None}
    delta_io.commit_files(theirs, [], schema, {"eos:t:0": 10}, {"eos.run_id": "theirs"})
    with pytest.raises(delta_io.CommitFailedError):
        delta_io.commit_files(mine, [], schema, {"eos:t:0": 10}, {"eos.run_id": "mine"})
    assert delta_io.load(table).transaction_version("eos:t:0") == 10
    assert delta_io.find_commit(table, "eos.run_id", "theirs") == 1
