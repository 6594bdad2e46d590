"""The demo and test producer: idempotent, transactional, and honest about what it sent.

It sends the demo events of one stream: orders (``events.py``) or page views
(``page_views.py``). Every record sent is written to a manifest (see ``manifest.py``) with its
outcome and offset.
"""

import contextlib
import gc
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Producer

from eos_assets.devkit import events, page_views
from eos_assets.devkit.deliveries import Deliveries, DeliveryFailed, ReportsUnclear
from eos_assets.devkit.events import Mix, TransactionPlan
from eos_assets.devkit.manifest import ManifestWriter, ProduceSummary, read_manifest, summary_path
from eos_assets.lib.errors import BrokerError, ConfigError
from eos_assets.lib.kafka.kafka_admin import check_reachable, ensure_topic, not_authorized
from eos_assets.lib.kafka.retry import error_of, retry_seconds, with_retry
from eos_assets.lib.schema_registry import RegistryConfig

# The manifest helpers are re-exported: callers of produce() read what it wrote from here too.
__all__ = ["ProduceOptions", "ProduceSummary", "produce", "read_manifest", "summary_path"]

log = logging.getLogger(__name__)

_TIMEOUT_S = 60.0
_POLL_EVERY = 1000  # records handed over between two polls for delivery reports, unpaced

# The streams whose demo events the producer can send, and how each plans its transactions.
Planner = Callable[[int, datetime, int, int, Mix], Iterator[TransactionPlan]]
PLANNERS: dict[str, Planner] = {
    "orders": events.plan_transactions,
    "page_views": page_views.plan_transactions,
}
FORMATS = ("json", "avro")


@dataclass(frozen=True)
class ProduceOptions:
    """What to produce. Records are deterministic given ``seed``, ``start_time`` and the rest.

    Attributes:
        stream: whose demo events: ``orders`` or ``page_views`` (``PLANNERS``).
        topic: where to send them; a topic named after one stream takes only its events.
        count: records sent in all: valid, duplicate, late, malformed, aborted ones included.
        rate: records per second; 0 sends as fast as possible.
        partitions: partitions of the topic when it has to be created (an existing one stays).
        seed: seed of every random choice, event ids included; None draws one (see summary).
        transaction_size: records per transaction (the last one may be smaller).
        duplicate_ratio: records re-sending an event committed in an earlier transaction.
        late_ratio: valid events whose event time lies ``late_by`` before the stream's clock.
        abort_ratio: transactions aborted instead of committed.
        malformed_ratio: records with one contract defect, spread over the stream's codes
            (``events.CODES``, ``page_views.CODES``).
        start_time: event time of the stream's start (default: now, UTC).
        transactional_id: the producer's identity, kept for every transaction (aborts
            included): a restarted producer of the same id fences the one it replaces and
            aborts what that one left open. Default ``eos-producer-<topic>``; producers that
            run side by side need ids of their own.
        transaction_timeout_ms: how long the broker lets a transaction stay open before it
            aborts it (a producer that died inside one holds readers back that long).
        format: ``json`` values, or ``avro`` records framed for ``registry``
            (``avro_values.py``): the same events for the same seed.
        registry: the schema registry of ``avro``; the stream's schema is registered under
            ``<topic>-value``.
    """

    stream: str = "orders"
    topic: str = "orders"
    count: int = 1000
    rate: float = 0.0
    partitions: int = 6
    seed: int | None = None
    transaction_size: int = 500
    duplicate_ratio: float = 0.0
    late_ratio: float = 0.0
    late_by: timedelta = timedelta(hours=2)
    abort_ratio: float = 0.0
    malformed_ratio: float = 0.0
    start_time: datetime | None = None
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    format: str = "json"
    registry: RegistryConfig | None = None

    def validate(self) -> None:
        """Raise ConfigError, with the offending option, when the options make no sense."""
        ratios = ("duplicate_ratio", "late_ratio", "abort_ratio", "malformed_ratio")
        for name in ratios:
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be between 0 and 1: got {getattr(self, name)}")
        if self.duplicate_ratio + self.late_ratio + self.malformed_ratio > 1.0:
            raise ConfigError("duplicate, late and malformed ratios add up to more than 1")
        if self.count < 0 or self.rate < 0 or self.partitions < 1 or self.transaction_size < 1:
            raise ConfigError("count and rate must be >= 0, partitions and transaction size >= 1")
        if self.stream not in PLANNERS:
            known = ", ".join(PLANNERS)
            raise ConfigError(f"unknown stream {self.stream!r}: produce one of {known}")
        if not self.topic or self.transactional_id == "":
            raise ConfigError("topic and transactional id must not be empty")
        if self.topic in PLANNERS and self.topic != self.stream:
            raise ConfigError(
                f"topic {self.topic!r} is the {self.topic} stream's: send {self.stream} events "
                f"to a topic of their own, e.g. {self.stream}"
            )
        if self.transaction_timeout_ms < 1000:
            raise ConfigError("transaction_timeout_ms must be at least 1000")
        if self.format not in FORMATS:
            raise ConfigError(f"unknown format {self.format!r}: produce {' or '.join(FORMATS)}")
        if self.format == "avro" and self.registry is None:
            raise ConfigError("avro values need a schema registry: pass its address")

    def identity(self) -> str:
        """The ``transactional.id`` this producer uses."""
        return self.transactional_id or f"eos-producer-{self.topic}"


def produce(
    bootstrap: str,
    options: ProduceOptions,
    manifest_path: Path,
    client_config: Mapping[str, str] | None = None,
) -> ProduceSummary:
    """Produce ``options.count`` records in transactions and write the manifest and summary.

    One ``transactional.id`` (``options.identity()``) for the whole run: its
    ``init_transactions`` fences an earlier producer of the same id and aborts the transaction
    that one left open, the standard zombie fencing of Kafka's transactions.

    Raises:
        BrokerError: Kafka is unreachable, a delivery fails or a transaction cannot finish;
            the manifest then holds every transaction whose outcome is known.
        ConfigError: the options are invalid.
    """
    options.validate()
    config = dict(client_config or {})
    if config.get("partitioner") == "random":
        raise ConfigError(
            "the producer needs a partitioner that sends each key to one partition: "
            "unset EOS_KAFKA_PARTITIONER or pick a hashing one (consistent_random, murmur2)"
        )
    check_reachable(bootstrap, config)
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**63)
    start = options.start_time or datetime.now(UTC).replace(microsecond=0)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)  # event times are UTC; so is a time without a zone
    summary = ProduceSummary(
        topic=options.topic,
        partitions=ensure_topic(bootstrap, options.topic, options.partitions, config),
        seed=seed,
        start_time=start.isoformat(),
        manifest=str(manifest_path),
    )
    mix = Mix(
        options.duplicate_ratio,
        options.late_ratio,
        options.malformed_ratio,
        options.abort_ratio,
        options.late_by,
    )
    plan_transactions = PLANNERS[options.stream]
    plans = plan_transactions(seed, start, options.count, options.transaction_size, mix)
    if options.format == "avro":
        plans = _as_avro(options, plans)
    summary.transactional_id = options.identity()
    config["transaction.timeout.ms"] = str(options.transaction_timeout_ms)
    pacer = _Pacer(options.rate)
    deliveries = Deliveries(options.topic)
    with ManifestWriter(manifest_path, summary) as manifest, _no_collections():
        producer: Producer | None = None
        sending_from = 0.0  # once the producer is ready: its connection and init not counted
        ahead = _Lookahead(plans)
        plan = ahead.advance()
        while plan is not None:
            if producer is None:
                producer = _producer(bootstrap, summary.transactional_id, config, deliveries)
                sending_from = time.monotonic()
            offsets, attempts = _transaction(
                producer, options.topic, plan, pacer, deliveries, ahead.draw
            )
            summary.transactions_sent_again += attempts - 1
            manifest.add(plan, summary.transactional_id, offsets)
            plan = ahead.advance()
        now = time.monotonic()
        return manifest.finish(now - pacer.began, now - (sending_from or now))


def _as_avro(
    options: ProduceOptions, plans: Iterator[TransactionPlan]
) -> Iterator[TransactionPlan]:
    """``plans`` with Avro values, the shipped stream's schema registered for the topic."""
    # Imported here: the declaration brings Dagster, which JSON producers never wait for.
    from eos_assets import examples
    from eos_assets.declaration import read_declaration
    from eos_assets.devkit.avro_values import AvroValues

    assert options.registry is not None  # validate() saw to it
    model = read_declaration(examples.shipped(options.stream))
    return AvroValues.registered(model, options.registry, options.topic).transcode(plans)


class _NoCollections:
    """Pauses the cyclic garbage collector while producing. Each record allocates several
    objects it tracks (its tuple, its order's, the lists holding them), none of them in a
    cycle: reference counting frees them all, and the collector's passes, which find nothing,
    took 5-6 % of a producer's CPU even at one youngest pass per 50,000 allocations. Producers
    in several threads share the pause: the last one to end resumes the collector if it ran
    before the first one began."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.producing = 0
        self.enabled = gc.isenabled()

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self.lock:
            if self.producing == 0:
                self.enabled = gc.isenabled()
                gc.disable()
            self.producing += 1
        try:
            yield
        finally:
            with self.lock:
                self.producing -= 1
                if self.producing == 0 and self.enabled:
                    gc.enable()


_no_collections = _NoCollections()


class _Lookahead:
    """The plans, the next one drawn while this transaction's records travel: the broker's
    round trips overlap the Python work of drawing it."""

    def __init__(self, plans: Iterator[TransactionPlan]) -> None:
        self.plans = plans
        self.drawn: list[TransactionPlan | None] = []

    def draw(self) -> None:
        """Draw the next plan, once."""
        if not self.drawn:
            self.drawn.append(next(self.plans, None))

    def advance(self) -> TransactionPlan | None:
        """The next plan (None after the last)."""
        self.draw()
        return self.drawn.pop()


def _transaction(
    producer: Producer,
    topic: str,
    plan: TransactionPlan,
    pacer: "_Pacer",
    deliveries: Deliveries,
    draw: Callable[[], None],
) -> tuple[list[tuple[int, int]], int]:
    """Send ``plan``'s records in a transaction and end it as planned; return each record's
    (partition, offset) and the attempts it took.

    A broker that dies with records in flight can leave the transaction where it can only be
    aborted (the idempotent producer's sequence broken, its records purged). Such a
    transaction is aborted and sent again, for up to ``EOS_KAFKA_RETRY_SECONDS``: none of its
    records is in a committed transaction until an attempt commits, and the manifest holds
    only the attempt that finished. Kafka's own transactional clients leave this to the
    application; here the plan is known, so sending it again is safe.

    Raises:
        BrokerError: a failure that another attempt would repeat, or the time ran out.
    """
    deadline = time.monotonic() + retry_seconds()
    attempts = 0
    while True:
        attempts += 1
        try:
            _send(producer, topic, plan, pacer, deliveries)
            draw()
            offsets = deliveries.wait(producer, _TIMEOUT_S)
            _finish(producer, plan)
            return offsets, attempts
        except BrokerError as exc:
            if not _abortable(exc) or time.monotonic() > deadline:
                _abort_quietly(producer)
                raise
            log.warning("transaction %d aborted, to be sent again: %s", plan.index, exc)
            try:
                with_retry(lambda: producer.abort_transaction(_TIMEOUT_S))
                # The purged records' reports are served now, not among the next attempt's.
                producer.flush(_TIMEOUT_S)
            except KafkaException as failed:
                raise BrokerError(
                    f"transaction {plan.index} can only be aborted and its abort failed "
                    f"({_reason(failed)}): check the broker; finished transactions are in "
                    "the manifest"
                ) from exc
        except BaseException:
            _abort_quietly(producer)
            raise


def _abortable(exc: BrokerError) -> bool:
    """True when the failed transaction can be aborted and sent again."""
    if isinstance(exc, DeliveryFailed):
        return exc.retriable
    if isinstance(exc, ReportsUnclear):
        return True
    cause = exc.__cause__
    err = error_of(cause) if isinstance(cause, KafkaException) else None
    return err is not None and err.txn_requires_abort() and not err.fatal()


def _abort_quietly(producer: Producer) -> None:
    # Left open, the transaction would hold back the partition's last stable offset, and
    # every read_committed reader, until the broker times it out.
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(10)


def _producer(
    bootstrap: str, transactional_id: str, config: dict[str, str], deliveries: Deliveries
) -> Producer:
    producer = Producer(
        {
            "linger.ms": 5,  # unless the client config says otherwise
            **config,
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "transactional.id": transactional_id,
            # One callback for every record: a callable of its own per record costs more.
            "on_delivery": deliveries.report,
        }
    )
    try:
        with_retry(lambda: producer.init_transactions(_TIMEOUT_S))
    except KafkaException as exc:
        err = exc.args[0]
        if (
            isinstance(err, KafkaError)
            and err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        ):
            where = {**config, "bootstrap.servers": bootstrap}
            denied = not_authorized(where, transactional_id, "WRITE", "transactional id")
            raise BrokerError(denied) from exc
        raise BrokerError(
            f"cannot start transactional producer {transactional_id} ({_reason(exc)}): "
            "check the broker and the EOS_KAFKA_* settings"
        ) from exc
    return producer


class _Pacer:
    """Holds the run to ``rate`` records per second (0: as fast as possible)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.sent = 0
        self.began = time.monotonic()

    def wait(self, producer: Producer) -> None:
        self.sent += 1
        if self.rate <= 0:
            return
        due = self.began + self.sent / self.rate
        while (wait := due - time.monotonic()) > 0:
            producer.poll(0)  # delivery reports keep flowing at low rates too
            # A Python sleep, not poll(wait): a signal inside poll surfaces as a SystemError
            # (confluent-kafka 2.16), here it is a clean KeyboardInterrupt.
            time.sleep(min(wait, 0.05))


def _send(
    producer: Producer, topic: str, plan: TransactionPlan, pacer: _Pacer, deliveries: Deliveries
) -> None:
    """Begin a transaction and hand its records to the client; their reports come later.

    Unpaced, records go in runs of ``_POLL_EVERY`` with one poll after each: the loop over a
    run does nothing but hand records over, the one per-record step of the client's own.
    """
    deliveries.start(plan)
    producer.begin_transaction()
    records, produce, poll = plan.records, producer.produce, producer.poll
    at, count, paced = 0, len(records), pacer.rate > 0
    while at < count:
        start = at
        end = start + 1 if paced else min(count, start + _POLL_EVERY)
        try:
            for at in range(start, end):
                record = records[at]
                produce(topic, record[1], record[0])  # its value and key
        except BufferError:  # local queue full: let deliveries drain it, then send it again
            poll(0.05)
            continue
        except KafkaException as exc:  # refused before sending (size, unknown topic)
            raise BrokerError(
                f"cannot send to {topic} in transaction {plan.index} ({_reason(exc)}): "
                "check the topic and the EOS_KAFKA_* settings"
            ) from exc
        at = end
        poll(0)  # serve the delivery reports so far
        if paced:
            pacer.wait(producer)


def _finish(producer: Producer, plan: TransactionPlan) -> None:
    """Commit or abort the open transaction. A coordinator that dies meanwhile costs a retry:
    librdkafka finds the new one, and ending the same transaction again is allowed after a
    retriable error (``EOS_KAFKA_RETRY_SECONDS``)."""
    end = producer.abort_transaction if plan.abort else producer.commit_transaction
    try:
        with_retry(lambda: end(_TIMEOUT_S))
    except KafkaException as exc:
        raise BrokerError(
            f"transaction {plan.index} did not finish ({_reason(exc)}): "
            "check the broker; finished transactions are in the manifest"
        ) from exc


def _reason(exc: KafkaException) -> str:
    err = exc.args[0]
    return err.str() if isinstance(err, KafkaError) else str(err)
