"""A minimal transactional producer for tests: writes exactly what a test asks and records the
offsets Kafka assigned, independently of the product's own producer."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Message, Producer


@dataclass
class Sent:
    """Records of one transaction with the (partition, offset) Kafka gave them."""

    committed: bool
    records: list[tuple[int, int, bytes | None, bytes | None]] = field(default_factory=list)


def send_transaction(
    bootstrap: str,
    topic: str,
    messages: Sequence[tuple[int, bytes | None, bytes | None]],
    commit: bool = True,
) -> Sent:
    """Send ``(partition, key, value)`` messages in one transaction, commit or abort it.

    Every call is a producer of its own, under a new ``transactional.id``.
    """
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"test-{uuid.uuid4().hex}",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        }
    )
    sent = Sent(committed=commit)
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            sent.records.append((msg.partition() or 0, msg.offset() or 0, msg.key(), msg.value()))

    producer.init_transactions(30)
    producer.begin_transaction()
    for partition, key, value in messages:
        producer.produce(topic, value=value, key=key, partition=partition, on_delivery=on_delivery)
    producer.flush(30)
    if errors:
        raise RuntimeError(f"delivery failed: {errors[:3]}")
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    return sent
