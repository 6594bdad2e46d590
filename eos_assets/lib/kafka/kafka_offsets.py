"""Driver-side Kafka calls: partition bounds for planning and the advisory group commit."""

import logging
from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from eos_assets.lib.errors import BrokerError, TopicMissingError
from eos_assets.lib.ingest.ranges import OffsetRange
from eos_assets.lib.kafka.kafka_admin import check_reachable, quiet_logger, topic_metadata

log = logging.getLogger(__name__)
_quiet = quiet_logger(__name__)


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
) -> dict[tuple[str, int], tuple[int, int]]:
    """``(low watermark, last stable offset)`` of every partition of ``topics``.

    With ``isolation.level=read_committed`` the broker reports the last stable offset as the
    end, never the high watermark: a range that ended inside an open transaction would never
    complete.

    Raises:
        BrokerError: nothing listens at the bootstrap address or the broker does not answer.
        TopicMissingError: a topic does not exist.
    """
    bootstrap = client_config.get("bootstrap.servers", "?")
    # A refused connection fails here at once; librdkafka alone would retry until the timeout.
    check_reachable(bootstrap, client_config, timeout_s)
    consumer = _consumer(client_config, group_id)
    try:
        bounds: dict[tuple[str, int], tuple[int, int]] = {}
        for topic in topics:
            info = topic_metadata(consumer, bootstrap, timeout_s, topic).topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise TopicMissingError(topic, bootstrap)
            for partition in sorted(info.partitions):
                tp = TopicPartition(topic, partition)
                try:
                    low, end = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
                except KafkaException as exc:
                    raise BrokerError(
                        f"cannot read the offsets of {topic}[{partition}] from {bootstrap} "
                        f"({exc.args[0].str()}): check the broker"
                    ) from exc
                bounds[(topic, partition)] = (low, end)
        return bounds
    finally:
        consumer.close()


def commit_advisory(
    client_config: Mapping[str, str], group_id: str, ends: Iterable[OffsetRange]
) -> bool:
    """Commit the new positions to the consumer group so external lag tools see them.

    The Delta table is the source of truth; a failure here loses nothing (the next run plans
    from Delta) and is logged, not raised.
    """
    offsets = [TopicPartition(r.topic, r.partition, r.end) for r in ends]
    if not offsets:
        return True
    consumer = _consumer(client_config, group_id)
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
        return True
    except KafkaException as exc:
        err = exc.args[0]
        reason = err.str() if isinstance(err, KafkaError) else str(err)
        log.warning(
            "advisory commit to group %s failed (%s); Delta holds the offsets", group_id, reason
        )
        return False
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
