"""Who may publish to an output topic, and how far it got, kept in Kafka next to the records.

Topic ``<topic>.position`` (compacted, one partition) holds, per publisher id:

- **claims** (key ``<publisher>/claim/<transactional id>``): written with a plain idempotent
  producer, acknowledged by every replica, *before* a publisher uses that transactional id;
- **the position** (key ``<publisher>``): the last Delta version published, written only inside
  the publisher's Kafka transactions, in the same transaction as the records it covers.

A publisher starts by claiming a fresh transactional id, then fences every id claimed since the
claim of the last committed position and before its own (``init_transactions`` with an id
aborts the transaction it left open and refuses its later commits), then initializes its own
id, and only then reads the position with read_committed. Every earlier publisher is fenced by
then, so the position cannot move under it; a later one fences it in turn and its commits fail.

Why not one stable transactional id: re-initializing the id after a crash fences the zombie,
but the publisher then commits under the producer id of the aborted transaction, and the
embedded broker (noida-db) reports that abort to any read_committed fetch starting after its
marker, so a consumer resuming there would skip every later record. A fresh, claimed id per
publisher run never commits after an abort of its own producer id.
"""

import json
import logging
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from eos_assets.lib import kafka_admin
from eos_assets.lib.errors import BrokerError

TIMEOUT_S = 30.0
_READ_LIMIT_S = 60.0
# A fenced or finished client may log the broker's disconnects; callers raise one clear line.
_quiet = logging.getLogger(f"{__name__}.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False
_NO_TOPIC = (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART)


@dataclass(frozen=True)
class Position:
    """The last position a publisher committed (``version`` None: nothing published yet)."""

    version: int | None = None
    claim_offset: int | None = None
    transactional_id: str | None = None


@dataclass
class Session:
    """A publisher that claimed its id, fenced the earlier ones and read its position."""

    producer: Producer
    transactional_id: str
    claim_offset: int
    position: Position
    fenced: list[str] = field(default_factory=list)


def position_topic(topic: str) -> str:
    """The topic holding the claims and positions of the publishers of ``topic``."""
    return f"{topic}.position"


def ensure_topics(config: Mapping[str, str], topic: str, partitions: int) -> None:
    """Create ``topic`` and its compacted position topic unless they exist.

    Raises:
        BrokerError: a topic cannot be created.
    """
    bootstrap = config["bootstrap.servers"]
    kafka_admin.ensure_topic(bootstrap, topic, partitions, config)
    name = position_topic(topic)
    admin = AdminClient(dict(config), logger=_quiet)
    if name in admin.list_topics(timeout=TIMEOUT_S).topics:
        return
    spec = NewTopic(name, 1, config={"cleanup.policy": "compact"})
    try:
        admin.create_topics([spec], request_timeout=TIMEOUT_S)[name].result(TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise BrokerError(
                f"cannot create topic {name} on Kafka at {bootstrap} ({exc.args[0].str()}): "
                "create it (one partition, cleanup.policy=compact) or grant the right to"
            ) from exc
    kafka_admin.ensure_topic(bootstrap, name, 1, config)


def start(config: Mapping[str, str], topic: str, publisher: str) -> Session:
    """Claim a transactional id, fence the earlier publishers, and read the position.

    Raises:
        BrokerError: Kafka refused or timed out.
    """
    name = position_topic(topic)
    tid = f"{publisher}.{secrets.token_hex(6)}"
    offset = _claim(config, name, publisher, tid)
    claims = scan(read_log(config, name, committed=False), publisher)[0]
    committed = scan(read_log(config, name, committed=True), publisher)[1]
    since = committed.claim_offset if committed.claim_offset is not None else -1
    stale = [t for o, t in claims if since <= o < offset and t != tid]
    for other in stale:
        transactional_producer(config, other)  # init_transactions fences it
    producer = transactional_producer(config, tid)
    position = scan(read_log(config, name, committed=True), publisher)[1]
    return Session(producer, tid, offset, position, stale)


def position_record(position: Position) -> bytes:
    """The value of a position record."""
    return json.dumps(
        {
            "version": position.version,
            "claim_offset": position.claim_offset,
            "transactional_id": position.transactional_id,
        }
    ).encode()


def scan(
    records: list[tuple[int, bytes | None, bytes | None]], publisher: str
) -> tuple[list[tuple[int, str]], Position]:
    """The claims (offset, transactional id) and the last position of ``publisher``."""
    claims: list[tuple[int, str]] = []
    position = Position()
    prefix = f"{publisher}/claim/".encode()
    for offset, key, value in records:
        if key is not None and key.startswith(prefix) and value is not None:
            claims.append((offset, key[len(prefix) :].decode()))
        elif key == publisher.encode() and value is not None:
            data: dict[str, Any] = json.loads(value)
            position = Position(data["version"], data["claim_offset"], data["transactional_id"])
    return claims, position


def read_log(
    config: Mapping[str, str], topic: str, committed: bool
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of partition 0 of ``topic``, to its last stable offset when ``committed``."""
    isolation = "read_committed" if committed else "read_uncommitted"
    consumer = Consumer(
        {
            **config,
            "group.id": f"eos-position-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "receive.message.max.bytes": 500_000_000,
            "logger": _quiet,
        }
    )
    try:
        tp = TopicPartition(topic, 0)
        try:
            low, end = consumer.get_watermark_offsets(tp, TIMEOUT_S, cached=False)
        except KafkaException as exc:
            if exc.args[0].code() in _NO_TOPIC:
                return []  # nothing was ever published
            raise BrokerError(
                f"cannot read {topic} ({exc.args[0].str()}): check the broker"
            ) from exc
        records: list[tuple[int, bytes | None, bytes | None]] = []
        if end <= low:
            return records
        consumer.assign([TopicPartition(topic, 0, low)])
        deadline = time.monotonic() + _READ_LIMIT_S
        while consumer.position([tp])[0].offset < end:
            if time.monotonic() > deadline:
                raise BrokerError(f"{topic} was not read to offset {end} in time: check the broker")
            for msg in consumer.consume(1000, 0.1):
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    raise BrokerError(f"cannot read {topic} ({err.str()}): check the broker")
                offset = msg.offset()
                if err is None and offset is not None and offset < end:
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
        producer.init_transactions(TIMEOUT_S)
    except KafkaException as exc:
        raise BrokerError(
            f"cannot initialize transactional id {tid} ({exc.args[0].str()}): check the broker"
        ) from exc
    return producer


def _claim(config: Mapping[str, str], topic: str, publisher: str, tid: str) -> int:
    producer = Producer({**config, "enable.idempotence": True, "acks": "all", "logger": _quiet})
    offsets: list[int] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is None and msg.offset() is not None:
            offsets.append(msg.offset())

    key = f"{publisher}/claim/{tid}".encode()
    producer.produce(topic, key=key, value=b"{}", partition=0, on_delivery=delivered)
    if producer.flush(TIMEOUT_S) or not offsets:
        raise BrokerError(f"cannot write the claim of {tid} to {topic}: check the broker")
    return offsets[0]
