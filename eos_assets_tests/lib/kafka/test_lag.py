"""Lag of a table behind Kafka: the arithmetic of PartitionLag, positions read from a Delta table
written by hand, and on the session's real broker the lag and age of each partition."""

import time
from pathlib import Path

from eos_assets.lib.ingest.ranges import OffsetRange
from eos_assets.lib.kafka.lag import PartitionLag, measure_lag, pin_reason, table_positions
from eos_assets.lib.kafka.starts import EARLIEST, LATEST
from eos_assets_tests.support.forged_log import ingest, offsets_span, read
from eos_assets_tests.support.txn_producer import send_transaction


def test_lag_loss_and_an_open_transaction() -> None:
    lg = PartitionLag("t", 0, position=5, low=12, end=20, start=12, high=23)
    assert (lg.key, lg.lag, lg.held_back) == ("t:0", 8, 3)
    assert lg.lost == OffsetRange("t", 0, 5, 12)
    assert lg.stall_reason() == (
        "an open transaction holds t[0] at offset 20 (3 offsets behind it): its producer has not "
        "committed or aborted; the broker aborts it after the producer's transaction.timeout.ms"
    )
    caught_up = PartitionLag("t", 1, position=20, low=0, end=20, start=20)
    assert (caught_up.lost, caught_up.held_back, caught_up.stall_reason()) == (None, 0, "")


def test_the_age_of_the_oldest_pending_record() -> None:
    pending = PartitionLag("t", 0, 0, 0, 4, 0, oldest_ms=1_000_000, measured=True)
    assert pending.age_s(1_090.5) == 90.5
    assert PartitionLag("t", 0, 4, 0, 4, 4).age_s(1_090.5) == 0.0  # nothing pending
    markers = PartitionLag("t", 0, 2, 0, 4, 2, measured=True)
    assert markers.age_s(1_090.5) == 0.0  # only markers or aborted records pending
    assert PartitionLag("t", 0, 2, 0, 4, 2).age_s(1_090.5) is None  # Kafka did not answer


def test_positions_come_from_the_table(tmp_path: Path) -> None:
    uri = str(tmp_path / "raw_events")
    tps = [("t", 0), ("t", 1), ("t", 2)]
    assert table_positions(uri, tps) == dict.fromkeys(tps)  # no table yet
    ingest(uri, read("t", 0, 0, 7), lost=[offsets_span("t", 1, 0, 3)])
    assert table_positions(uri, tps) == {("t", 0): 7, ("t", 1): 3, ("t", 2): None}


def test_only_partitions_never_read_under_a_later_start_need_pinning() -> None:
    read_before = PartitionLag("t", 0, 5, 0, 5, 5)
    assert pin_reason([read_before]) == ""
    fresh = PartitionLag("t", 3, None, 0, 9, 9, unpinned=True)
    assert pin_reason([read_before, fresh]) == (
        "1 partition(s) never read (first: t[3]): an ingest decides their declared start and "
        "pins it"
    )


def test_lag_and_age_on_a_real_broker(
    kafka_bootstrap: str, kafka_client_config: dict[str, str], make_topic, tmp_path: Path
) -> None:
    topic = make_topic(3)
    send_transaction(kafka_bootstrap, topic, [(0, b"k", b"v")] * 3)  # 0-2, marker 3
    send_transaction(kafka_bootstrap, topic, [(1, b"k", b"v")] * 2, commit=False)  # 0-1, marker 2
    uri = str(tmp_path / "raw_events")
    ingest(uri, read(topic, 0, 0, 1))
    config = {**kafka_client_config, "bootstrap.servers": kafka_bootstrap}
    lags = {lg.partition: lg for lg in measure_lag(config, [topic], uri, start=EARLIEST)}
    assert [(lg.position, lg.start, lg.end, lg.lag) for lg in lags.values()] == [
        (1, 1, 4, 3),
        (None, 0, 3, 3),  # never read: from the low watermark
        (None, 0, 0, 0),
    ]
    age = lags[0].age_s(time.time())
    assert lags[0].measured and age is not None and 0 < age < 120  # offset 1, written just now
    assert (lags[1].measured, lags[1].oldest_ms) == (True, None)  # only aborted records
    assert not any(lg.unpinned for lg in lags.values())
    latest = measure_lag(config, [topic], uri, with_age=False, start=LATEST)
    assert [(lg.start, lg.lag, lg.unpinned) for lg in latest] == [
        (1, 3, False),
        (3, 0, True),  # never read under "latest": starts at the end, still to be pinned
        (0, 0, True),
    ]
    assert pin_reason(latest).startswith("2 partition(s) never read (first: ")
