"""The bench's Kafka: its own embedded broker (or ``EOS_KAFKA_BOOTSTRAP``) and event streams
produced with the project's producer, in parallel processes when asked."""

import contextlib
import multiprocessing
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from eos_assets.devkit import broker
from eos_assets.devkit.producer import ProduceOptions, produce
from eos_assets.settings import Settings

START = datetime(2026, 11, 21, tzinfo=UTC)
MEAN_GAP = timedelta(seconds=0.1)  # the producer's event clock: ~10 events per second
PARTITIONS = 6
SPLIT_ABOVE = 200_000
# Records per transaction and the batching delay of bulk data. Against 5,000 and 5 ms, in
# alternated rounds of 1M records on one broker: 4-11 % more records/s and a third less broker
# CPU per record (BENCHMARKS.md, "The producer's CPU").
BULK_TRANSACTION, BULK_LINGER_MS = 20_000, 20
# The shape of a realistic stream: re-sent events, late events, broken records.
DUPLICATE_RATIO, LATE_RATIO, MALFORMED_RATIO = 0.02, 0.01, 0.01


@contextlib.contextmanager
def bench_kafka(work: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """Bootstrap servers and client config (``bootstrap.servers`` and any ``EOS_KAFKA_*``
    property): ``EOS_KAFKA_BOOTSTRAP``, or an embedded broker of its own.

    The embedded broker keeps its data under ``work`` and is stopped (SIGTERM) at the end.
    """
    settings = Settings.from_env()
    client = dict(settings.kafka_client)
    if settings.kafka_bootstrap:
        broker.check_reachable(settings.kafka_bootstrap, client)
        yield settings.kafka_bootstrap, {**client, "bootstrap.servers": settings.kafka_bootstrap}
        return
    info = broker.start_broker(work / "kafka")
    try:
        yield info.bootstrap, {**client, "bootstrap.servers": info.bootstrap}
    finally:
        broker.stop_broker(info)


@dataclass
class Stream:
    """One topic of order events, extended phase by phase.

    Each phase's parallel producers share its start time (their event clocks overlap, as
    several producers of one stream would); the next phase starts where the last one ended.
    """

    bootstrap: str
    client: dict[str, str]
    work: Path
    name: str
    producers: int = 2
    topic: str = ""
    produced: int = 0
    clock: datetime = START
    rates: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.topic = self.topic or f"bench-{self.name}-{uuid.uuid4().hex[:6]}"

    def extend(self, count: int) -> dict[str, float]:
        """Produce ``count`` more committed events; return the rate it reached."""
        # Starting a producer process costs seconds: worth it for bulk data only.
        parts = max(1, min(self.producers, count // SPLIT_ABOVE + 1))
        sizes = [count // parts + (1 if i < count % parts else 0) for i in range(parts)]
        jobs = [
            (self.bootstrap, self.client, self.topic, n, self.clock, self._seed(i), self._dir(i))
            for i, n in enumerate(sizes)
        ]
        broker.ensure_topic(self.bootstrap, self.topic, PARTITIONS, self.client)
        began = time.monotonic()
        if parts == 1:
            results = [_produce_part(jobs[0])]
        else:
            with multiprocessing.get_context("spawn").Pool(parts) as pool:
                results = pool.map(_produce_part, jobs)
        seconds = time.monotonic() - began
        committed = sum(n for n, _, _ in results)
        # From the first producer's first transaction to the last one's end, without starting
        # processes or producers: what kafka-producer-perf-test's rate counts (its JVM's start,
        # its producer's and its init_transactions are not in it).
        sending = max(end for _, _, end in results) - min(start for _, start, _ in results)
        self.produced += committed
        self.clock += MEAN_GAP * max(sizes)
        rate = {
            "events": float(committed),
            "processes": float(parts),
            "seconds": seconds,
            "events_per_s": committed / seconds if seconds > 0 else 0.0,
            "sending_seconds": sending,
            "sending_per_s": committed / sending if sending > 0 else 0.0,
        }
        self.rates.append(rate)
        return rate

    def _seed(self, part: int) -> int:
        return 1000 * len(self.rates) + part + 1

    def _dir(self, part: int) -> Path:
        return self.work / "manifests" / f"{self.topic}-{len(self.rates)}-{part}"


def _produce_part(
    job: tuple[str, dict[str, str], str, int, datetime, int, Path],
) -> tuple[int, float, float]:
    """One producer process: ``count`` events; returns the committed count and the wall clock
    (``time.time()``) at its first transaction's start and at the end of producing them.

    The manifest (one JSON line per record) is needed by the producer but not by the bench,
    and at millions of records it is large: it is deleted at once.
    """
    bootstrap, client, topic, count, start, seed, folder = job
    # Fuller batches, fewer requests for the broker to handle (a user's setting wins).
    client = {"linger.ms": str(BULK_LINGER_MS), **client}
    options = ProduceOptions(
        topic=topic,
        count=count,
        partitions=PARTITIONS,
        seed=seed,
        start_time=start,
        # Each transaction waits a fixed 25-45 ms on Apache Kafka before its records are
        # acknowledged (a bare producer of 250-byte records: 20-30k records/s at 1,000 records
        # per transaction, 130-140k at 5,000), and each one costs the broker CPU of its own:
        # bulk streams use large transactions (BULK_TRANSACTION).
        transaction_size=BULK_TRANSACTION,
        late_by=timedelta(minutes=30),
        transactional_id=f"bench-{topic}-{os.getpid()}",
        duplicate_ratio=DUPLICATE_RATIO,
        late_ratio=LATE_RATIO,
        malformed_ratio=MALFORMED_RATIO,
    )
    manifest = folder / "manifest.jsonl"
    try:
        summary = produce(bootstrap, options, manifest, client)
        # Sending only, as kafka-producer-perf-test counts (after its init_transactions).
        end = time.time()
        return summary.committed, end - summary.sending_seconds, end
    finally:
        manifest.unlink(missing_ok=True)
