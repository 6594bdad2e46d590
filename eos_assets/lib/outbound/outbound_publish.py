"""Publish every new revision of ``gold/window_aggregates`` to a Kafka topic, exactly once.

The rows each Delta version changed (``outbound_changes.py``) are sent in a Kafka transaction
together with the publisher's new position (the last Delta version covered) in the position
topic (``outbound_position.py``). A read_committed consumer sees the records and the position
move together or not at all, so a crash anywhere neither repeats nor skips a revision: every
run of a publisher has the same ``transactional.id``, so the next run's ``init_transactions``
fences the crashed or hung one (aborting its open transaction), then reads the committed
position and continues after it.

Record key: the window (``window_start`` and the stream's dimensions, ``windows.key_columns``)
as compact JSON; a key always lands in the same partition, in Delta version order. Value: the
row as JSON (times in ISO 8601 UTC) plus ``delta_version``. A window's states are its
revisions (+1 at each recomputation) and, within a revision, the moment it becomes final
(``is_final``); each state is published once.
"""

import contextlib
import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer

from eos_assets.lib import faults
from eos_assets.lib.contract.stream_shape import WindowShape
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived.windows import key_columns
from eos_assets.lib.errors import BrokerError
from eos_assets.lib.kafka import kafka_acl
from eos_assets.lib.kafka.kafka_admin import not_authorized
from eos_assets.lib.kafka.retry import with_retry
from eos_assets.lib.outbound import outbound_changes, outbound_position
from eos_assets.lib.outbound.outbound_position import Position, Session

BEFORE_SEND = "agg_out_before_send"
AFTER_SEND = "agg_out_after_send"  # records and position sent, transaction open
AFTER_COMMIT = "agg_out_after_commit"
CRASH_POINTS = (BEFORE_SEND, AFTER_SEND, AFTER_COMMIT)

_TIMEOUT_S = 60.0
_FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


@dataclass
class PublishOutcome:
    """What one run published."""

    transactional_id: str
    table_version: int
    first_version: int | None = None
    last_version: int | None = None
    records: int = 0
    transactions: int = 0
    skipped_versions: dict[int, str] = field(default_factory=dict)
    seconds: float = 0.0


def publisher_id(topic: str, table_uri: str) -> str:
    """The publisher of ``table_uri`` into ``topic``: its position key and ``transactional.id``."""
    digest = hashlib.sha256(table_uri.encode()).hexdigest()[:12]
    return f"eos-out.{topic}.{digest}"


def identity(shape: WindowShape) -> tuple[str, ...]:
    """The columns that tell one published state of a window from another."""
    return (*key_columns(shape), "revision", "is_final")


def publish_windows(
    shape: WindowShape,
    table_uri: str,
    config: Mapping[str, str],
    topic: str,
    partitions: int = 3,
    max_records_per_transaction: int = 10_000,
    storage_options: Mapping[str, str] | None = None,
) -> PublishOutcome:
    """Publish the window revisions committed after the last published version.

    ``shape`` names the window key (start and dimensions) the records are keyed by.

    Raises:
        BrokerError: Kafka refused, or a newer publisher fenced this one.
        EosError: a log entry or a rewritten file of an unpublished version is gone.
    """
    clock = time.monotonic()
    table = delta_io.load(table_uri, storage_options)
    schema = pa.schema(table.schema().to_arrow())  # type: ignore[arg-type]
    outbound_position.ensure_topics(config, topic, partitions)
    session = outbound_position.start(config, topic, publisher_id(topic, table_uri))
    current = table.version()
    outcome = PublishOutcome(session.transactional_id, current)
    first = 0 if session.position.version is None else session.position.version + 1
    faults.crash_point(BEFORE_SEND)
    pending: list[tuple[bytes, bytes]] = []
    key = key_columns(shape)
    for change in outbound_changes.changes(table_uri, first, current, schema, identity(shape)):
        if not change.rows:
            outcome.skipped_versions[change.version] = change.operation or "no data change"
        pending += [_record(row, key, change.version) for row in change.rows]
        last = change.version == current
        if len(pending) >= max_records_per_transaction or last:
            _transaction(session, config, topic, table_uri, pending, change.version)
            outcome.first_version = (
                first if outcome.first_version is None else outcome.first_version
            )
            outcome.last_version = change.version
            outcome.records += len(pending)
            outcome.transactions += 1
            pending = []
    outcome.seconds = time.monotonic() - clock
    return outcome


def _transaction(
    session: Session,
    config: Mapping[str, str],
    topic: str,
    table_uri: str,
    records: list[tuple[bytes, bytes]],
    version: int,
) -> None:
    """Send ``records`` and the position ``version`` in one Kafka transaction."""
    producer = session.producer
    failures: list[KafkaError] = []
    refused: list[str] = []  # topics this user may not write

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failures.append(err)
            if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                refused.append(msg.topic() or topic)

    position = Position(version)
    try:
        producer.begin_transaction()
        for key, value in records:
            _produce(producer, topic, key, value, delivered)
        publisher = publisher_id(topic, table_uri).encode()
        value = outbound_position.position_record(position)
        _produce(producer, outbound_position.position_topic(topic), publisher, value, delivered)
        if producer.flush(_TIMEOUT_S) or failures:
            if failures and all(f.code() == KafkaError._PURGE_QUEUE for f in failures):
                # The transaction failed as a whole (a partition it was refused) and purged
                # its records: its commit, which commits nothing then, raises the cause.
                producer.commit_transaction(_TIMEOUT_S)
            raise BrokerError(
                f"delivery to {topic} failed ({failures[0].str() if failures else 'timeout'}): "
                "check the broker; nothing of this transaction is visible"
            )
        faults.crash_point(AFTER_SEND)
        # A coordinator that dies meanwhile costs a retry: committing the same transaction
        # again is allowed after a retriable error, and commits it once.
        with_retry(lambda: producer.commit_transaction(_TIMEOUT_S))
    except (KafkaException, SystemError) as exc:
        error = _kafka_error(exc)
        if error is None:
            _abort(producer)
            raise
        if error.code() in _FENCED:
            raise BrokerError(
                f"a newer publisher of {topic} fenced this one ({error.str()}): it carries on, "
                "nothing of this run's open transaction is visible"
            ) from exc
        _abort(producer)
        if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            ours = [topic, outbound_position.position_topic(topic)]
            denied = [*refused, *kafka_acl.unwritable(config, ours), topic][0]
            raise BrokerError(not_authorized(config, denied, "WRITE and DESCRIBE")) from exc
        raise BrokerError(f"cannot publish to {topic} ({error.str()}): check the broker") from exc
    except BaseException:
        # Left open, the transaction would hold back every read_committed reader of the topic
        # until the next run fences it or the broker times it out (transaction.timeout.ms).
        _abort(producer)
        raise
    session.position = position
    faults.crash_point(AFTER_COMMIT)


def _kafka_error(exc: BaseException) -> KafkaError | None:
    """The Kafka error behind ``exc``: its own, or the one a delivery callback left pending
    when the client raised it from inside ``flush`` (which then surfaces as a SystemError
    caused by the KafkaException)."""
    for candidate in (exc, exc.__cause__, exc.__context__):
        if isinstance(candidate, KafkaException) and candidate.args:
            error = candidate.args[0]
            if isinstance(error, KafkaError):
                return error
    return None


def _produce(producer: Producer, topic: str, key: bytes, value: bytes, callback: Any) -> None:
    while True:
        try:
            producer.produce(topic, key=key, value=value, on_delivery=callback)
            return
        except BufferError:  # local queue full: let deliveries drain it
            producer.poll(0.05)


def _abort(producer: Producer) -> None:
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(_TIMEOUT_S)


def _record(row: Mapping[str, Any], key: tuple[str, ...], version: int) -> tuple[bytes, bytes]:
    values = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
    record_key = json.dumps({k: values[k] for k in key}, separators=(",", ":")).encode()
    value = json.dumps({**values, "delta_version": version}, separators=(",", ":"))
    return record_key, value.encode()


@dataclass(frozen=True)
class Lag:
    """How far the publisher of a table is behind it."""

    published: int | None
    current: int
    behind: list[int]


def lag(
    table_uri: str,
    config: Mapping[str, str],
    topic: str,
    storage_options: Mapping[str, str] | None = None,
) -> Lag:
    """The data-changing versions of the table after the committed position of its publisher."""
    current = delta_io.load(table_uri, storage_options).version()
    records = outbound_position.read_log(
        config, outbound_position.position_topic(topic), committed=True
    )
    published = outbound_position.scan(records, publisher_id(topic, table_uri)).version
    first = 0 if published is None else published + 1
    return Lag(published, current, outbound_changes.data_versions(table_uri, first, current))
