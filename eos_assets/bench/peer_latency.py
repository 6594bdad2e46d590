"""Event -> result latency of the peers on a steady stream, measured as our freshness line is.

The project's producer (``eos-assets produce``, as in the freshness stage) sends ``rate`` valid
events/s for ``seconds`` seconds into a topic of its own, once the peer runs on it. An event's
latency is the moment it became visible in the peer's result minus its Kafka timestamp (the
producer's send time, on this machine's clock):

- Spark Structured Streaming, silver + windows into Delta (append mode, a micro-batch as soon as
  the last one ends): a window is visible from the moment its Delta commit was written (the
  modification time of the commit's log file).
- Kafka Streams under exactly_once_v2 with its default commit interval (100 ms): a window's
  count is visible when a ``read_committed`` consumer of its output topic receives it.

A peer's result holds counts, not events: the n-th event of a window (by Kafka timestamp) is
taken as visible from the first moment the peer's count of that window reached n (``ranked``).
If anything this understates a latency (a count is credited to the earliest events of its
window). Events beyond their window's last count (dropped, or their window never written) are
never visible and are counted apart.
"""

import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, Message, TopicPartition
from deltalake import DeltaTable

from eos_assets.bench.compare import WindowKey
from eos_assets.lib.kafka.kafka_offsets import partition_bounds

WINDOW_US = 300 * 1_000_000
# key -> [(wall time, count)] in time order: when a peer's count of a window was seen.
Seen = dict[WindowKey, list[tuple[float, int]]]


@dataclass
class Latencies:
    """Latency (s) of every visible event, and the events never visible."""

    seconds: np.ndarray
    never_visible: int
    events: int

    def stats(self) -> dict[str, float | None]:
        """p50, p95 and max (None when no event became visible)."""
        v = self.seconds
        if not len(v):
            return {"p50": None, "p95": None, "max": None}
        return {
            "p50": float(np.percentile(v, 50)),
            "p95": float(np.percentile(v, 95)),
            "max": float(v.max()),
        }


def ranked(events: Mapping[WindowKey, np.ndarray], seen: Seen) -> Latencies:
    """Latencies by the rank rule: ``events`` are each window's Kafka timestamps (s)."""
    out: list[np.ndarray] = []
    never = 0
    for key, sent in events.items():
        sent = np.sort(sent)
        updates = seen.get(key, [])
        times = np.array([t for t, _ in updates], dtype=float)
        counts = np.maximum.accumulate(np.array([c for _, c in updates], dtype=np.int64))
        # The first update whose count reached each rank 1..n.
        first = np.searchsorted(counts, np.arange(1, len(sent) + 1), side="left")
        visible = first < len(times)
        never += int(np.count_nonzero(~visible))
        out.append(times[first[visible]] - sent[visible])
    total = sum(len(v) for v in events.values())
    return Latencies(np.concatenate(out) if out else np.array([]), never, total)


def window_key(value: bytes) -> WindowKey | None:
    """The 5-minute window (start in µs, event type, currency) of an event; None if invalid."""
    try:
        e = json.loads(value)
        at = datetime.fromisoformat(e["event_time"])
        us = int(at.timestamp()) * 1_000_000 + at.microsecond
        return (us // WINDOW_US * WINDOW_US, e["event_type"], e.get("currency") or "")
    except (ValueError, KeyError, TypeError):
        return None


def input_windows(client: Mapping[str, str], topic: str) -> dict[WindowKey, np.ndarray]:
    """Kafka timestamps (s) of the committed events of ``topic``, by window."""
    stamps: dict[WindowKey, list[float]] = {}
    for msg in read_committed(client, topic):
        key = window_key(msg.value() or b"")
        if key is not None:
            stamps.setdefault(key, []).append(msg.timestamp()[1] / 1000.0)
    return {k: np.array(v) for k, v in stamps.items()}


def read_committed(client: Mapping[str, str], topic: str) -> Iterator[Message]:
    """The committed records of ``topic`` up to its current ends, read with ``read_committed``."""
    ends = {p: end for (_, p), (_, end) in partition_bounds(client, [topic]).items()}
    consumer = _consumer(client)
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
        pending = {p for p, end in ends.items() if end > 0}
        while pending:
            yield from (m for m in consumer.consume(10_000, 1.0) if m.error() is None)
            positions = consumer.position([TopicPartition(topic, p) for p in pending])
            pending = {tp.partition for tp in positions if tp.offset < ends[tp.partition]}
    finally:
        consumer.close()


def _consumer(client: Mapping[str, str]) -> Consumer:
    return Consumer(
        {**client, "group.id": f"bench-latency-{uuid.uuid4().hex[:6]}",
         "isolation.level": "read_committed", "enable.auto.commit": "false"}
    )  # fmt: skip


def delta_seen(table: Path) -> Seen:
    """When each window row of the peer's Delta table became visible: the modification time
    of the log file of the commit that added it."""
    dt = DeltaTable(str(table))
    seen: Seen = {}
    files: set[str] = set()
    for version in range(dt.version() + 1):
        dt.load_as_version(version)
        now = set(dt.file_uris())
        log = table / "_delta_log" / f"{version:020d}.json"
        at = log.stat().st_mtime
        for uri in sorted(now - files):
            cols = ["window_start", "event_type", "currency", "event_count"]
            rows = pq.read_table(uri.removeprefix("file://"), columns=cols)
            # Spark writes INT96 timestamps (read as ns): µs like the input's keys.
            starts = rows.column("window_start").cast(pa.timestamp("us")).cast(pa.int64())
            starts = starts.to_pylist()
            for start, kind, cur, n in zip(
                starts, *(rows.column(c).to_pylist() for c in cols[1:]), strict=True
            ):
                seen.setdefault((start, kind, cur), []).append((at, n))
        files = now
    return seen


@dataclass
class TopicRecorder:
    """Reads a peer's output topic with ``read_committed`` in a thread, noting when each
    count update arrived (key ``<window start ms>|<event type>|<currency>``, value the count)."""

    client: Mapping[str, str]
    topic: str
    partitions: int
    seen: Seen = field(default_factory=dict)
    updates: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._ends: dict[int, int] = {}
        self._deadline = 0.0
        self._consumer = _consumer(self.client)
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        """Read from the start of every partition."""
        parts = range(self.partitions)
        self._consumer.assign([TopicPartition(self.topic, p, 0) for p in parts])
        self._thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Read up to the topic's end (at most ``timeout_s`` more), then stop."""
        self._ends = {
            p: end for (_, p), (_, end) in partition_bounds(self.client, [self.topic]).items()
        }
        self._deadline = time.monotonic() + timeout_s
        self._stop.set()
        self._thread.join()
        self._consumer.close()

    def _loop(self) -> None:
        # One thread owns the consumer: a position() from another blocks behind consume().
        while True:
            batch = self._consumer.consume(10_000, 0.1)
            at = time.time()
            for msg in batch:
                key, value = msg.key(), msg.value()
                if msg.error() is None and key is not None and value is not None:
                    start_ms, kind, cur = key.decode().split("|", 2)
                    self.seen.setdefault((int(start_ms) * 1000, kind, cur), []).append(
                        (at, int(value))
                    )
                    self.updates += 1
            if self._stop.is_set() and (batch == [] or time.monotonic() > self._deadline):
                parts = [TopicPartition(self.topic, p) for p, end in self._ends.items() if end]
                reached = all(
                    tp.offset >= self._ends[tp.partition] for tp in self._consumer.position(parts)
                )
                if reached or time.monotonic() > self._deadline:
                    return
