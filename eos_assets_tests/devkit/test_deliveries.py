"""Delivery reports told apart without a callback per record: each one reaches its own record,
and a report sequence that breaks a premise is refused rather than guessed at."""

import pytest
from confluent_kafka import KafkaError, Message

from eos_assets.devkit.deliveries import Deliveries, DeliveryFailed, ReportsUnclear
from eos_assets.devkit.events import Record, TransactionPlan

KEYS = ["o-1", "o-2", "o-1", "o-3", "o-2", "o-1"]  # o-1 and o-3 on partition 0, o-2 on 1


def deliveries(keys: list[str]) -> Deliveries:
    records = [Record(key, f"v{i}".encode(), "valid", None, None) for i, key in enumerate(keys)]
    plan = TransactionPlan(0, records, False)
    found = Deliveries("t")
    found.start(plan)
    return found


def report(found: Deliveries, key: str, partition: int, offset: int) -> None:
    msg = Message(topic="t", partition=partition, offset=offset, key=key.encode())
    found.report(None, msg)


def test_each_report_reaches_the_record_sent_in_its_place() -> None:
    found = deliveries(KEYS)
    # Partition 1's batch is acknowledged first, and another producer's records sit between
    # this one's on partition 0 (offsets 11, 12 taken).
    for key, offset in (("o-2", 40), ("o-2", 41)):
        report(found, key, 1, offset)
    for key, offset in (("o-1", 10), ("o-1", 13), ("o-3", 14), ("o-1", 15)):
        report(found, key, 0, offset)
    assert found.offsets() == [(0, 10), (1, 40), (0, 13), (0, 14), (1, 41), (0, 15)]


def test_a_key_in_two_partitions_is_refused() -> None:
    found = deliveries(["o-1", "o-1"])
    report(found, "o-1", 0, 1)
    report(found, "o-1", 1, 1)
    with pytest.raises(ReportsUnclear, match="from partitions 0 and 1"):
        found.offsets()


def test_reports_out_of_offset_order_are_refused() -> None:
    found = deliveries(["o-1", "o-1"])
    report(found, "o-1", 0, 2)  # came first, yet its offset is the later one
    report(found, "o-1", 0, 1)
    with pytest.raises(ReportsUnclear, match="offset 1 of partition 0 reported after 2"):
        found.offsets()


def test_a_report_of_another_key_in_a_records_place_is_refused() -> None:
    found = deliveries(["o-1", "o-3"])
    report(found, "o-3", 0, 1)
    report(found, "o-1", 0, 2)
    with pytest.raises(ReportsUnclear, match="is of key b'o-3', the record sent in its place"):
        found.offsets()


def test_a_report_without_an_offset_is_refused() -> None:
    found = deliveries(["o-1"])
    found.report(None, Message(topic="t", partition=0, key=b"o-1"))
    with pytest.raises(ReportsUnclear, match="without an offset"):
        found.offsets()


def test_a_stale_report_in_a_records_place_is_refused() -> None:
    """A report of another transaction's record counted here: one key has none."""
    found = deliveries(["o-1", "o-3"])
    report(found, "o-1", 0, 1)
    report(found, "o-2", 1, 5)
    with pytest.raises(ReportsUnclear, match="no report of key b'o-3'"):
        found.offsets()


def test_a_transaction_purged_with_its_abort_is_sent_again_a_refused_record_is_not() -> None:
    """A leader that died with the records in flight breaks the idempotent producer's
    sequence and the transaction's queued records are purged: aborted, it can be sent again.
    A record the broker refuses, or a fenced producer, fails the same way every time."""

    def failed(*errors: KafkaError) -> DeliveryFailed:
        return DeliveryFailed("delivery failed", list(errors))

    broken = KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, txn_requires_abort=True)
    purged = KafkaError(KafkaError._PURGE_QUEUE)
    assert failed(broken, purged, purged).retriable
    assert failed(KafkaError(KafkaError._MSG_TIMED_OUT)).retriable
    assert not failed(purged, KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)).retriable
    assert not failed(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)).retriable
    assert not failed(KafkaError(KafkaError._FENCED, fatal=True)).retriable
    assert not failed().retriable  # a report missing: nothing says why
