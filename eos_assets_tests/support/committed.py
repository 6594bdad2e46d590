"""What a read_committed consumer sees of a topic: every record, read to the end, and how many
records open transactions hold back from it."""

import logging
import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, TopicPartition

# (partition, offset, key, value) of one record read back.
ReadRecord = tuple[int, int, bytes | None, bytes | None]

_quiet = logging.getLogger("eos_assets_tests.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def read_committed_records(
    config: Mapping[str, str],
    topic: str,
    starts: dict[int, int] | None = None,
    timeout: float = 30.0,
) -> list[ReadRecord]:
    """Read ``topic`` to its end as read_committed, with the client properties ``config``.

    ``starts`` maps partitions to first offsets (default: every partition from its beginning);
    partitions not in a given ``starts`` are not read.
    """
    consumer = Consumer(
        {
            **config,
            "group.id": f"test-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "logger": _quiet,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        if starts is None:
            starts = {p: 0 for p in partitions}
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10, cached=False)[1]
            for p in starts
        }
        pending = {p for p in starts if starts[p] < ends[p]}
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(pending)])
        records: list[ReadRecord] = []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {sorted(pending)} did not finish")
            for msg in consumer.consume(1000, 0.2):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                elif err is not None:
                    raise RuntimeError(err.str())
                else:
                    partition, offset = msg.partition(), msg.offset()
                    assert partition is not None and offset is not None
                    records.append((partition, offset, msg.key(), msg.value()))
            for tp in consumer.position([TopicPartition(topic, p) for p in pending]):
                if tp.offset >= ends[tp.partition]:
                    pending.discard(tp.partition)
        return records
    finally:
        consumer.close()


def open_records(bootstrap: str, topic: str) -> int:
    """Records past the last stable offset of every partition of ``topic``: what open
    transactions hold back from read_committed readers."""
    total = 0
    # The stable offsets first: a commit between the two reads cannot make the count negative.
    for isolation, sign in (("read_committed", -1), ("read_uncommitted", 1)):
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "open", "isolation.level": isolation}
        )
        try:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            for p in partitions:
                tp = TopicPartition(topic, p)
                total += sign * consumer.get_watermark_offsets(tp, 10, cached=False)[1]
        finally:
            consumer.close()
    return total
