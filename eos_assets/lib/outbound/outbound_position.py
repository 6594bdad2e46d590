"""How far a publisher got, kept in Kafka next to the records; who may publish is Kafka's call.

Topic ``<topic>.position`` (compacted, one partition) holds one record per publisher (key: the
publisher id, value: the last Delta version published). It is written only inside the
publisher's Kafka transactions, in the same transaction as the records it covers, so a
read_committed reader sees records and position move together or not at all.

Every run of a publisher uses the same ``transactional.id``, the publisher id. Its
``init_transactions`` is the fencing: the broker bumps the id's producer epoch, aborts the
transaction an earlier run left open (killed, hung or paused inside it) and refuses that run's
later sends and commit (``PRODUCER_FENCED``). Only then does the publisher read its position:
no earlier run can move it any more, and a later run fences this one in turn.

The position is read to the end of the partition as it was after ``init_transactions``, not
only to its last stable offset: a read_committed reader stops at the first open transaction,
and another publisher sharing the position topic (another table published into the same
topic) may hold one open below this publisher's last committed position. Stopping there would
miss that position and publish its versions again; so the read waits until that transaction
ends (committed, aborted, or expired after its ``transaction.timeout.ms``).

A broker that dies meanwhile costs a retry (``EOS_KAFKA_RETRY_SECONDS``): the initialization of
the transactional id and the offset reads are retried while Kafka moves the leaderships and the
transaction coordinator of a dead broker to a live one.
"""

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from eos_assets.lib.errors import BrokerError
from eos_assets.lib.kafka import kafka_admin
from eos_assets.lib.kafka.retry import transient, with_retry

TIMEOUT_S = 30.0
# Long enough for another producer's transaction on the position topic to end: librdkafka's
# default transaction.timeout.ms is 60 s, and the broker looks for expired ones every 10 s.
_READ_LIMIT_S = 90.0
# A fenced or finished client may log the broker's disconnects.
_quiet = kafka_admin.quiet_logger(__name__)
_NO_TOPIC = (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART)
_GROUP_DENIED = KafkaError.GROUP_AUTHORIZATION_FAILED

LogRecord = tuple[int, bytes | None, bytes | None]


@dataclass(frozen=True)
class Position:
    """The last position a publisher committed (``version`` None: nothing published yet)."""

    version: int | None = None


@dataclass
class Session:
    """A publisher whose transactional id is initialized (earlier runs fenced), and its position."""

    producer: Producer
    transactional_id: str
    position: Position


def position_topic(topic: str) -> str:
    """The topic holding the positions of the publishers of ``topic``."""
    return f"{topic}.position"


def ensure_topics(config: Mapping[str, str], topic: str, partitions: int) -> None:
    """Create ``topic`` and its compacted position topic unless they exist.

    Raises:
        BrokerError: a topic cannot be created.
    """
    bootstrap = config["bootstrap.servers"]
    kafka_admin.ensure_topic(bootstrap, topic, partitions, config)
    compacted = {"cleanup.policy": "compact"}
    kafka_admin.ensure_topic(
        bootstrap, position_topic(topic), 1, config, TIMEOUT_S, topic_config=compacted
    )


def start(config: Mapping[str, str], topic: str, publisher: str) -> Session:
    """Initialize the publisher's transactional id (fencing its earlier runs), read its position.

    Raises:
        BrokerError: Kafka refused or timed out.
    """
    producer = transactional_producer(config, publisher)
    records = read_log(config, position_topic(topic), committed=True, to_end=True)
    return Session(producer, publisher, scan(records, publisher))


def position_record(position: Position) -> bytes:
    """The value of a position record."""
    return json.dumps({"version": position.version}).encode()


def scan(records: list[LogRecord], publisher: str) -> Position:
    """The last position of ``publisher`` among ``records`` (other keys are ignored)."""
    position = Position()
    for _offset, key, value in records:
        if key == publisher.encode() and value is not None:
            position = Position(json.loads(value)["version"])
    return position


def read_log(
    config: Mapping[str, str], topic: str, committed: bool, to_end: bool = False
) -> list[LogRecord]:
    """Every record of partition 0 of ``topic``, read with read_committed when ``committed``.

    A committed read stops at the last stable offset, unless ``to_end``: then it reads to the
    end of the log as it is now, waiting for the transactions open there to end.
    """
    isolation = "read_committed" if committed and not to_end else "read_uncommitted"
    low, end = _bounds(config, topic, isolation)
    if end <= low:
        return []
    consumer = Consumer(
        {
            **config,
            "group.id": f"eos-position-{uuid.uuid4().hex}",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
            "logger": _quiet,
        }
    )
    tp = TopicPartition(topic, 0)
    records: list[LogRecord] = []
    try:
        consumer.assign([TopicPartition(topic, 0, low)])
        deadline = time.monotonic() + _READ_LIMIT_S
        while consumer.position([tp])[0].offset < end:
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"{topic} was not read to offset {end} in {_READ_LIMIT_S:g} s: a transaction "
                    "open there for that long holds read_committed readers back; check the "
                    "broker and the producers writing to it"
                )
            for msg in consumer.consume(1000, 0.1):
                err = msg.error()
                if err is not None and (transient(err) or err.code() == _GROUP_DENIED):
                    # A leader that died: the consumer fetches from the next one. A denied
                    # group: the client looks its group up, but this read never uses it.
                    continue
                if err is not None:
                    raise BrokerError(f"cannot read {topic} ({err.str()}): check the broker")
                offset = msg.offset()
                if offset is not None and offset < end:
                    records.append((offset, msg.key(), msg.value()))
        return records
    finally:
        consumer.close()


def transactional_producer(config: Mapping[str, str], tid: str) -> Producer:
    """A producer with ``tid``, initialized: any earlier producer of ``tid`` is fenced."""
    producer = Producer(
        {
            **config,
            "transactional.id": tid,
            "enable.idempotence": True,
            "acks": "all",
            "logger": _quiet,
        }
    )
    try:
        # Allowed again after a retriable error (a coordinator that died, say).
        with_retry(lambda: producer.init_transactions(TIMEOUT_S))
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            rights = "WRITE and DESCRIBE"
            raise BrokerError(
                kafka_admin.not_authorized(config, tid, rights, "transactional id")
            ) from exc
        raise BrokerError(
            f"cannot initialize transactional id {tid} ({exc.args[0].str()}): check the broker"
        ) from exc
    return producer


def _bounds(config: Mapping[str, str], topic: str, isolation: str) -> tuple[int, int]:
    """(low watermark, end) of partition 0: the end is the last stable offset when
    ``isolation`` is read_committed, else the high watermark; (0, 0) without the topic."""
    consumer = Consumer(
        {
            **config,
            "group.id": f"eos-position-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "logger": _quiet,
        }
    )

    def read() -> tuple[int, int]:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT_S, cached=False)
        except KafkaException as exc:
            if exc.args[0].code() in _NO_TOPIC:
                return 0, 0  # nothing was ever published
            raise

    try:
        return with_retry(read)
    except KafkaException as exc:
        raise BrokerError(f"cannot read {topic} ({exc.args[0].str()}): check the broker") from exc
    finally:
        consumer.close()
