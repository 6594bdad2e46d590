"""Partition bounds and the advisory group commit: one line when the broker is not there, and on
the session's real broker the last stable offset as the end, never the high watermark."""

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from eos_assets.lib.errors import BrokerError, TopicMissingError
from eos_assets.lib.ingest.ranges import OffsetRange
from eos_assets.lib.kafka.kafka_offsets import commit_advisory, high_watermarks, partition_bounds
from eos_assets.lib.ports import free_port
from eos_assets_tests.support.txn_producer import send_transaction


def test_no_broker_is_one_line_at_once() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.raises(BrokerError, match=rf"^Kafka at {bootstrap} is unreachable: start it"):
        partition_bounds({"bootstrap.servers": bootstrap}, ["orders"], timeout_s=10)
    assert time.monotonic() - began < 5
    assert commit_advisory({"bootstrap.servers": bootstrap}, "g", []) is True  # nothing to send


@pytest.fixture
def config(kafka_bootstrap: str, kafka_client_config: dict[str, str]) -> dict[str, str]:
    return {**kafka_client_config, "bootstrap.servers": kafka_bootstrap}


@pytest.fixture
def open_transaction(config: dict[str, str], make_topic) -> Iterator[str]:
    """A topic whose partition 0 holds 3 committed records and a marker, then 2 records of a
    transaction left open (aborted at the end of the test)."""
    topic = make_topic(2)
    send_transaction(config["bootstrap.servers"], topic, [(0, b"k", b"v")] * 3)
    producer = Producer({**config, "transactional.id": f"open-{uuid.uuid4().hex}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(2):
        producer.produce(topic, b"v", b"k", partition=0)
    producer.flush(30)
    yield topic
    producer.abort_transaction(30)


def test_the_end_is_the_last_stable_offset(config: dict[str, str], open_transaction: str) -> None:
    topic = open_transaction
    bounds = partition_bounds(config, [topic])
    assert bounds == {(topic, 0): (0, 4), (topic, 1): (0, 0)}
    assert high_watermarks(config, list(bounds)) == {(topic, 0): 6, (topic, 1): 0}


def test_a_missing_topic_is_named(config: dict[str, str]) -> None:
    with pytest.raises(TopicMissingError, match=r"^topic 'no-such-topic' does not exist on "):
        partition_bounds(config, ["no-such-topic"])


def test_the_advisory_commit_reaches_the_group(config: dict[str, str], make_topic) -> None:
    topic = make_topic(2)
    group = f"advisory-{uuid.uuid4().hex[:8]}"
    ends = [OffsetRange(topic, 0, 0, 3), OffsetRange(topic, 1, 2, 5)]
    assert commit_advisory(config, group, ends)
    consumer = Consumer({**config, "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 10)
    finally:
        consumer.close()
    assert [tp.offset for tp in committed] == [3, 5]
