"""The peers on a live stream, for their event -> result latency (``peer_latency``).

Each run gets a topic of its own; the peer starts first, then the project's producer
(``eos-assets produce``, as in the freshness stage) sends ``count`` valid events at ``rate``/s;
once the peer has caught up it is stopped and every event's latency worked out.
"""

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from eos_assets.bench import kstreams, structured
from eos_assets.bench.peer_latency import (
    Latencies,
    TopicRecorder,
    delta_seen,
    input_windows,
    ranked,
)
from eos_assets.bench.stream import MEAN_GAP
from eos_assets.devkit import broker
from eos_assets.lib.errors import EosError
from eos_assets.lib.kafka.kafka_offsets import partition_bounds

DRAIN_S = 180.0  # after the stream ends, wait at most this long for a peer to catch up


def new_topic(bootstrap: str, client: Mapping[str, str], partitions: int, name: str) -> str:
    """A fresh topic for one steady stream."""
    topic = f"bench-latency-{name}-{uuid.uuid4().hex[:6]}"
    broker.ensure_topic(bootstrap, topic, partitions, dict(client))
    return topic


def produce_steady(bootstrap: str, topic: str, count: int, rate: float, work: Path) -> float:
    """Send ``count`` valid events at ``rate``/s with ``eos-assets produce``; its seconds.

    The event clock (``MEAN_GAP`` per event, far faster than the wall clock at bench rates)
    starts early enough to end before now: Kafka Streams writes event times into its
    repartition topic, and the broker refuses timestamps more than an hour ahead of its clock
    (``log.message.timestamp.after.max.ms``).

    Raises:
        EosError: the producer failed (its last lines).
    """
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "EOS_KAFKA_BOOTSTRAP": bootstrap, "EOS_STATE_DIR": str(work / "state")}
    start = datetime.now(UTC) - MEAN_GAP * count - timedelta(minutes=10)
    command = [str(Path(sys.executable).with_name("eos-assets")), "produce", "--topic", topic]
    command += ["--count", str(count), "--rate", str(rate), "--start-time", start.isoformat()]
    command += ["--manifest", str(work / f"{topic}.jsonl")]
    began = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - began
    (work / f"{topic}.jsonl").unlink(missing_ok=True)
    if done.returncode != 0:
        raise EosError(f"the steady producer failed: {(done.stderr or done.stdout)[-400:]}")
    return seconds


@dataclass
class LatencyRun:
    """One peer on one steady stream: its latencies and how the run went."""

    latencies: Latencies
    produced_s: float
    detail: dict[str, object]


def ss_windows(
    spark: SparkSession, bootstrap: str, client: Mapping[str, str], work: Path,
    partitions: int, count: int, rate: float,
) -> LatencyRun:  # fmt: skip
    """SS silver + windows on a live stream of ``count`` events at ``rate``/s."""
    topic = new_topic(bootstrap, client, partitions, "ss")
    table = work / "ss-live" / "windows"
    query = structured.start_windows_live(spark, client, topic, table)
    try:
        _wait(lambda: query.status["message"] == "Waiting for data to arrive", 120.0, "SS start")
        produced_s = produce_steady(bootstrap, topic, count, rate, work)
        ends = sum(end for _, end in partition_bounds(client, [topic]).values())
        _wait(lambda: structured.consumed(query) >= ends, DRAIN_S, "SS to read the stream")
        # Then the batch without data that writes the windows the last watermark closed.
        last = _batch(query)
        _wait(lambda: _batch(query) > last, 60.0, "", fatal=False)  # none when no window closed
        _wait(lambda: not query.status["isTriggerActive"], DRAIN_S, "SS's last batch")
        batches = _batch(query) + 1
    finally:
        query.stop()
    lat = ranked(input_windows(client, topic), delta_seen(table))
    return LatencyRun(lat, produced_s, {"batches": batches, "trigger": "processingTime 0"})


def ks_windows(
    bootstrap: str, client: Mapping[str, str], work: Path, partitions: int, count: int,
    rate: float, guarantee: str = "exactly_once_v2",
) -> LatencyRun:  # fmt: skip
    """The Kafka Streams peer on a live stream of ``count`` events at ``rate``/s."""
    topic = new_topic(bootstrap, client, partitions, "ks")
    classes = kstreams.compile_peer(work / "classes")
    job = kstreams.PeerJob(classes, client, topic, count, guarantee, work, partitions)
    live = kstreams.start_live(job)
    recorder = TopicRecorder(client, live.output_topic, partitions)
    try:
        live.wait_running()
        recorder.start()
        produced_s = produce_steady(bootstrap, topic, count, rate, work)
        run = live.finish()
    finally:
        if live.process.poll() is None:
            live.process.kill()
            live.process.wait()
        recorder.stop()
    lat = ranked(input_windows(client, topic), recorder.seen)
    return LatencyRun(lat, produced_s, {
        "commit_ms": run.commit_ms, "dropped": run.dropped, "records": run.records,
        "updates": recorder.updates, "guarantee": guarantee,
    })  # fmt: skip


def _batch(query: StreamingQuery) -> int:
    """The id of the query's last finished batch (-1 before the first)."""
    progress = query.lastProgress
    return int(progress["batchId"]) if progress else -1


def _wait(done: Callable[[], bool], timeout_s: float, what: str, fatal: bool = True) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            if not fatal:
                return
            raise EosError(f"the latency run timed out waiting for {what} ({timeout_s:.0f}s)")
        time.sleep(0.5)
