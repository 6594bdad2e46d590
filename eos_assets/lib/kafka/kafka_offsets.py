"""Driver-side Kafka calls: partition bounds for planning and the advisory group commit."""

import logging
import time
from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from eos_assets.lib.errors import BrokerError, TopicMissingError
from eos_assets.lib.ingest.ranges import OffsetRange
from eos_assets.lib.kafka.kafka_admin import (
    check_reachable,
    not_authorized,
    quiet_logger,
    topic_metadata,
)
from eos_assets.lib.kafka.retry import RETRY_ENV, error_of, retry_seconds, transient, with_retry

log = logging.getLogger(__name__)
_quiet = quiet_logger(__name__)
_GROUP_DENIED = KafkaError.GROUP_AUTHORIZATION_FAILED


def _consumer(client_config: Mapping[str, str], group_id: str) -> Consumer:
    return Consumer(
        {
            **client_config,
            "group.id": group_id,
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
            "allow.auto.create.topics": "false",
            "logger": _quiet,
        }
    )


def partition_bounds(
    client_config: Mapping[str, str],
    topics: Sequence[str],
    timeout_s: float = 10.0,
    group_id: str = "eos-assets-planner",
    retry_s: float | None = None,
) -> dict[tuple[str, int], tuple[int, int]]:
    """``(low watermark, last stable offset)`` of every partition of ``topics``.

    With ``isolation.level=read_committed`` the broker reports the last stable offset as the
    end, never the high watermark: a range that ended inside an open transaction would never
    complete. A broker that dies meanwhile costs a retry: transient errors (a leader gone, a
    leadership moving) are retried for up to ``retry_s`` seconds (``EOS_KAFKA_RETRY_SECONDS``)
    in all: one budget for every partition, not one each.

    Raises:
        BrokerError: nothing listens at the bootstrap address, or a partition's offsets could
            not be read within the retries (the message names the partition and its leader).
        TopicMissingError: a topic does not exist.
    """
    bootstrap = client_config.get("bootstrap.servers", "?")
    # A refused connection fails here at once; librdkafka alone would retry until the timeout.
    check_reachable(bootstrap, client_config, timeout_s)
    consumer = _consumer(client_config, group_id)
    deadline = time.monotonic() + (retry_seconds() if retry_s is None else retry_s)
    try:
        bounds: dict[tuple[str, int], tuple[int, int]] = {}
        for topic in topics:
            info = topic_metadata(consumer, bootstrap, timeout_s, topic).topics.get(topic)
            denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
            if info is not None and info.error is not None and info.error.code() == denied:
                raise BrokerError(not_authorized(client_config, topic, "READ and DESCRIBE"))
            if info is None or info.error is not None or not info.partitions:
                raise TopicMissingError(topic, bootstrap)
            for partition in sorted(info.partitions):
                tp = TopicPartition(topic, partition)
                try:
                    low, end = with_retry(
                        lambda tp=tp: consumer.get_watermark_offsets(
                            tp, timeout=timeout_s, cached=False
                        ),
                        max(0.0, deadline - time.monotonic()),
                    )
                except KafkaException as exc:
                    reason = exc.args[0].str() if error_of(exc) else str(exc)
                    raise BrokerError(
                        f"cannot read the offsets of {topic}[{partition}] from {bootstrap} "
                        f"({reason}; {leader_of(consumer, topic, partition)}): check the brokers, "
                        f"{RETRY_ENV} sets how long a step retries"
                    ) from exc
                bounds[(topic, partition)] = (low, end)
        return bounds
    finally:
        consumer.close()


def leader_of(client: Consumer, topic: str, partition: int) -> str:
    """``leader: broker 2 at 127.0.0.1:9093``, or what the metadata says instead."""
    try:
        metadata = client.list_topics(topic, timeout=5)
    except KafkaException:
        return "no broker answers metadata"
    found = metadata.topics.get(topic)
    info = found.partitions.get(partition) if found is not None else None
    if info is None or info.leader < 0:
        return "the partition has no leader"
    host = metadata.brokers.get(info.leader)
    where = f" at {host.host}:{host.port}" if host is not None else ""
    return f"leader: broker {info.leader}{where}"


def commit_advisory(
    client_config: Mapping[str, str],
    group_id: str,
    ends: Iterable[OffsetRange],
    retry_s: float | None = None,
) -> bool:
    """Commit the new positions to the consumer group so external lag tools see them.

    The Delta table is the source of truth; a failure here loses nothing (the next run plans
    from Delta) and is logged, not raised. A coordinator that moves is retried for up to
    ``retry_s`` seconds; a missing ACL is a warning naming it.
    """
    offsets = [TopicPartition(r.topic, r.partition, r.end) for r in ends]
    if not offsets:
        return True
    consumer = _consumer(client_config, group_id)
    deadline = time.monotonic() + (retry_seconds() if retry_s is None else retry_s)
    try:
        while True:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                return True
            except KafkaException as exc:
                err = error_of(exc)
            # A group this client may not use never gets a coordinator ("waiting for
            # coordinator"); the denial itself arrives as a consumer event.
            events = [m.error() for m in consumer.consume(10, 0.2)]
            events.append(err)
            if any(e is not None and e.code() == _GROUP_DENIED for e in events):
                log.warning(
                    "advisory commit to group %s not authorized: grant READ on group %s to see "
                    "the positions in lag tools; Delta holds the offsets",
                    group_id,
                    group_id,
                )
                return False
            if err is None or not transient(err) or time.monotonic() > deadline:
                reason = err.str() if err is not None else "no error code"
                log.warning(
                    "advisory commit to group %s failed (%s); Delta holds the offsets",
                    group_id,
                    reason,
                )
                return False
            time.sleep(0.5)
    finally:
        consumer.close()


def high_watermarks(
    client_config: Mapping[str, str],
    tps: Iterable[tuple[str, int]],
    timeout_s: float = 10.0,
    group_id: str = "eos-assets-planner",
) -> dict[tuple[str, int], int]:
    """The high watermark of each partition: the end as a read_uncommitted reader sees it.

    Past the last stable offset it counts the records of transactions still open; a
    partition that does not answer is left out.
    """
    consumer = Consumer(
        {
            **client_config,
            "group.id": group_id,
            "enable.auto.commit": "false",
            "isolation.level": "read_uncommitted",
            "allow.auto.create.topics": "false",
            "logger": _quiet,
        }
    )
    highs: dict[tuple[str, int], int] = {}
    try:
        for topic, partition in tps:
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=timeout_s, cached=False
                )
            except KafkaException:
                continue
            highs[(topic, partition)] = high
    finally:
        consumer.close()
    return highs
