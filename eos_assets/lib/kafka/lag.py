"""Consumer lag of ``bronze/raw_events``, measured from Delta (the source of truth) and Kafka.

Lag of a topic-partition = last stable offset - the next offset recorded in the table's ``txn``
action (for a partition never read: where the stream's declared start puts it, ``lib.starts``;
the low watermark for earliest): offsets, markers included. Its age
is the age of the oldest committed record not yet in bronze, read as one ``read_committed``
message at the table's position; when only markers or aborted records are pending, no data is
late and the age is 0. Kafka group offsets are never read.
"""

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition
from deltalake.exceptions import TableNotFoundError

from eos_assets.lib.delta import delta_io
from eos_assets.lib.delta.txn_ids import partition_app
from eos_assets.lib.ingest.ranges import PartitionPlan, start_offsets
from eos_assets.lib.ingest.reader import reader_config
from eos_assets.lib.kafka.kafka_admin import quiet_logger
from eos_assets.lib.kafka.kafka_offsets import high_watermarks, partition_bounds
from eos_assets.lib.kafka.starts import EARLIEST, never_read_starts

_quiet = quiet_logger(__name__)


@dataclass(frozen=True)
class PartitionLag(PartitionPlan):
    """Where one topic-partition stands between Kafka and the table (for a partition never
    read, ``start`` is its declared start), and how old its lag is.

    Attributes:
        oldest_ms: Kafka timestamp of the oldest committed record not yet in bronze (None when
            there is none, or it was not measured).
        measured: True when Kafka answered the age read (so None above means "none pending").
        high: high watermark (None: not measured); offsets between ``end`` and it belong to
            transactions still open, which read_committed readers wait for.
    """

    oldest_ms: int | None = None
    measured: bool = False
    high: int | None = None
    # Never read and declared to start later than earliest: the next ingest decides the start
    # and pins it, so one must run even when nothing lies between the start and the end.
    unpinned: bool = False

    @property
    def key(self) -> str:
        """``topic:partition``."""
        return f"{self.topic}:{self.partition}"

    @property
    def held_back(self) -> int:
        """Offsets past the last stable offset: records of transactions still open."""
        return max(0, self.high - self.end) if self.high is not None else 0

    def stall_reason(self) -> str:
        """Why the last stable offset may not move: one line, empty when nothing is held back."""
        if not self.held_back:
            return ""
        return (
            f"an open transaction holds {self.topic}[{self.partition}] at offset {self.end} "
            f"({self.held_back} offsets behind it): its producer has not committed or aborted; "
            "the broker aborts it after the producer's transaction.timeout.ms"
        )

    def age_s(self, now: float) -> float | None:
        """Seconds since the oldest pending record was written; 0 without one, None unknown."""
        if self.lag == 0:
            return 0.0
        if self.oldest_ms is None:
            return 0.0 if self.measured else None
        return max(0.0, now - self.oldest_ms / 1000)


def table_positions(
    table_uri: str,
    tps: Sequence[tuple[str, int]],
    storage_options: Mapping[str, str] | None = None,
) -> dict[tuple[str, int], int | None]:
    """The ``txn`` position of each partition (all None when the table does not exist yet)."""
    try:
        dt = delta_io.load(table_uri, storage_options)
    except TableNotFoundError:
        return dict.fromkeys(tps)
    return {tp: dt.transaction_version(partition_app(*tp)) for tp in tps}


def measure_lag(
    client_config: Mapping[str, str],
    topics: Sequence[str],
    table_uri: str,
    storage_options: Mapping[str, str] | None = None,
    with_age: bool = True,
    timeout_s: float = 5.0,
    start: str = EARLIEST,
) -> list[PartitionLag]:
    """Lag of every partition of ``topics`` behind the table, with ages if ``with_age``.

    ``start`` is the stream's declared start: a partition never read lags from there.

    Raises:
        BrokerError: the broker does not answer or a topic does not exist.
        EosError: the table is ahead of a topic (recreated topic or another cluster), or
            ``start`` is not a valid start.
    """
    bounds = partition_bounds(client_config, topics)
    positions = table_positions(table_uri, list(bounds), storage_options)
    firsts = never_read_starts(client_config, start, bounds, positions, timeout_s)
    plans = start_offsets(positions, bounds, firsts)
    highs = high_watermarks(client_config, list(bounds), timeout_s)
    lags = [
        PartitionLag(
            p.topic, p.partition, p.position, p.low, p.end, p.start,
            high=highs.get((p.topic, p.partition)),
            unpinned=p.position is None and start != EARLIEST,
        )
        for p in plans
    ]  # fmt: skip
    return with_ages(client_config, lags, timeout_s) if with_age else lags


def pin_reason(lags: Sequence[PartitionLag]) -> str:
    """Why an ingest should run although nothing is pending: partitions whose declared start
    is not decided yet (empty when there are none)."""
    unpinned = [lg for lg in lags if lg.unpinned]
    if not unpinned:
        return ""
    first = unpinned[0]
    return (
        f"{len(unpinned)} partition(s) never read (first: {first.topic}[{first.partition}]): "
        "an ingest decides their declared start and pins it"
    )


def with_ages(
    client_config: Mapping[str, str], lags: Sequence[PartitionLag], timeout_s: float = 5.0
) -> list[PartitionLag]:
    """``lags`` with the Kafka timestamp of each lagging partition's oldest pending record."""
    oldest = oldest_timestamps(client_config, [lg for lg in lags if lg.lag > 0], timeout_s)
    return [
        dataclasses.replace(lg, oldest_ms=oldest.get(lg.key), measured=lg.key in oldest)
        for lg in lags
    ]


def oldest_timestamps(
    client_config: Mapping[str, str], lags: Sequence[PartitionLag], timeout_s: float
) -> dict[str, int | None]:
    """Kafka timestamp (ms) of the first committed record in ``[start, end)`` of each partition.

    None for a partition whose pending offsets hold no committed record (only markers or
    aborted records); a partition that does not answer within ``timeout_s`` is left out.
    """
    if not lags:
        return {}
    config = {
        **reader_config(client_config),
        "group.id": "eos-assets-lag",
        # Real brokers then answer with little data; one record is all this needs.
        "fetch.max.bytes": "1048576",
        "max.partition.fetch.bytes": "65536",
        "logger": _quiet,
    }
    consumer = Consumer(config)
    found: dict[str, int | None] = {}
    by_tp = {(lg.topic, lg.partition): lg for lg in lags}
    pending = set(by_tp)
    try:
        consumer.assign([TopicPartition(t, p, by_tp[(t, p)].start) for t, p in sorted(pending)])
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.1):
                tp = (msg.topic() or "", msg.partition() or 0)
                if tp not in pending:
                    continue
                key = by_tp[tp].key
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        found[key] = None
                        pending.discard(tp)
                    continue
                stamp = msg.timestamp()[1]
                found[key] = stamp if (msg.offset() or 0) < by_tp[tp].end and stamp >= 0 else None
                pending.discard(tp)
    finally:
        consumer.close()
    return found
