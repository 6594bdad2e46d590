"""Which record each delivery report of a transaction is, without a callback per record."""

from typing import NoReturn

from confluent_kafka import KafkaError, Message, Producer

from eos_assets.devkit.events import TransactionPlan
from eos_assets.lib.errors import BrokerError
from eos_assets.lib.kafka.retry import transient

# What a record's report says when its transaction went into the state where it can only be
# aborted (a partition's leader died with the record in flight, say): librdkafka purges the
# transaction's queued and in-flight records.
_ABORTED_WITH_THE_TRANSACTION = frozenset(
    {
        KafkaError._PURGE_QUEUE,
        KafkaError._PURGE_INFLIGHT,
        KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
    }
)


class DeliveryFailed(BrokerError):
    """A record of the open transaction was not delivered.

    Attributes:
        errors: each failed report's error (empty when a report is missing).
    """

    def __init__(self, message: str, errors: list[KafkaError]) -> None:
        super().__init__(message)
        self.errors = errors

    @property
    def retriable(self) -> bool:
        """True when every failure is a broker going away or the transaction's own abort:
        aborted, the transaction can be sent again. A refused record (authorization, size)
        fails the same way again and is not."""
        return bool(self.errors) and all(
            not err.fatal()
            and (
                transient(err)
                or err.txn_requires_abort()
                or err.code() in _ABORTED_WITH_THE_TRANSACTION
            )
            for err in self.errors
        )


class ReportsUnclear(BrokerError):
    """The reports of the open transaction cannot be told apart (``reason`` says which premise
    failed). Nothing of the transaction is committed yet: aborted, it is sent again, and the
    next attempt's records are partitioned and reported anew.

    Attributes:
        reason: the premise that failed, with the key, partition or offset that broke it.
    """

    def __init__(self, topic: str, index: int, reason: str) -> None:
        super().__init__(
            f"cannot tell which record each delivery report of transaction {index} of {topic} "
            f"is ({reason}): check the broker; finished transactions are in the manifest"
        )
        self.reason = reason


class Deliveries:
    """The delivery reports of the open transaction's records, and each record's offset.

    Reports come through one callback and do not name their record: ``offsets`` attributes
    them. Every record has a key, and the partitioner sends each key to one partition; within a
    partition the idempotent producer keeps the order records were handed over in, and the
    reports come in that order. So the n-th report of a partition is the n-th record sent to it.
    ``offsets`` checks each premise and refuses to guess when one fails.
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.plan = TransactionPlan(-1, [], False)
        self.reports: list[Message] = []
        self.failures: list[KafkaError] = []

    def start(self, plan: TransactionPlan) -> None:
        """Collect the reports of ``plan``'s records (those of the last one are all in)."""
        self.plan, self.reports, self.failures = plan, [], []

    def report(self, err: KafkaError | None, msg: Message) -> None:
        """The delivery callback of every record."""
        if err is None:
            self.reports.append(msg)
        else:
            self.failures.append(err)

    def wait(self, producer: Producer, timeout_s: float) -> list[tuple[int, int]]:
        """Wait for every report; return (partition, offset) of each record, in order.

        Raises:
            DeliveryFailed: a record was not delivered.
            ReportsUnclear: the reports cannot be told apart.
        """
        # Flushed before an abort too, so aborted records get offsets the tests can look for.
        failed = producer.flush(timeout_s) or self.failures
        if not failed and len(self.reports) > len(self.plan.records):
            raise ReportsUnclear(
                self.topic, self.plan.index, "more delivery reports than records sent"
            )
        if failed or len(self.reports) != len(self.plan.records):
            reason = self.failures[0].str() if self.failures else "a delivery report missing"
            raise DeliveryFailed(
                f"delivery to {self.topic} failed in transaction {self.plan.index} ({reason}): "
                "check the broker and the topic; finished transactions are in the manifest",
                list(self.failures),
            )
        return self.offsets()

    def offsets(self) -> list[tuple[int, int]]:
        """(partition, offset) of each record of the plan.

        Raises:
            ReportsUnclear: a premise fails; its reason names it.
        """
        queues: dict[int, list[Message]] = {}
        where: dict[bytes | None, int] = {}
        for msg in self.reports:
            partition = msg.partition()
            if partition is None or partition < 0:
                self._unclear(f"a report of key {msg.key()!r} names no partition")
            if where.setdefault(msg.key(), partition) != partition:
                self._unclear(
                    f"key {msg.key()!r} reported from partitions {where[msg.key()]} and "
                    f"{partition}: were partitions added?"
                )
            queues.setdefault(partition, []).append(msg)
        taken = dict.fromkeys(queues, 0)
        last = dict.fromkeys(queues, -1)
        offsets: list[tuple[int, int]] = []
        for record in self.plan.records:
            key = record.key.encode()
            partition = where.get(key)
            if partition is None:
                self._unclear(f"no report of key {key!r}")
            queue = queues[partition]
            if taken[partition] == len(queue):
                self._unclear(f"fewer reports from partition {partition} than records sent to it")
            msg = queue[taken[partition]]
            offset = msg.offset()
            # Keys and increasing offsets: the reports came in the order the records went.
            if msg.key() != key:
                self._unclear(
                    f"report {taken[partition]} of partition {partition} is of key "
                    f"{msg.key()!r}, the record sent in its place of key {key!r}"
                )
            if offset is None or offset < 0:
                self._unclear(f"a report of partition {partition} without an offset")
            if offset <= last[partition]:
                self._unclear(
                    f"offset {offset} of partition {partition} reported after {last[partition]}"
                )
            taken[partition] += 1
            last[partition] = offset
            offsets.append((partition, offset))
        return offsets

    def _unclear(self, reason: str) -> NoReturn:
        raise ReportsUnclear(self.topic, self.plan.index, reason)
