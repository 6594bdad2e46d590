"""Kafka Streams, the system the founding documents describe: windowed counts with a state
store under ``exactly_once_v2`` (and ``at_least_once``, to price its transactions).

The program is ``deploy/peers/WindowCountPeer.java``; the bench compiles it with ``javac``
against ``.jars/kafka-streams`` (installed by ``make install``) and runs it in a JVM of its own.
Its count updates go to a topic, read here with ``read_committed``: the last count of each
window is its final count.
"""

import json
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from eos_assets.bench.compare import WindowKey
from eos_assets.bench.peer_latency import read_committed
from eos_assets.bench.report import Throughput
from eos_assets.devkit import broker
from eos_assets.lib.errors import EosError
from eos_assets.lib.spark import jars
from eos_assets.lib.spark.java import compile_java, require_java

SOURCE = Path(__file__).resolve().parents[2] / "deploy" / "peers" / "WindowCountPeer.java"
MAIN = "WindowCountPeer"
GUARANTEES = ("exactly_once_v2", "at_least_once")
# Small fetches, so that its tasks read the backlog's partitions in step: stream time is per
# task, and a task that ran ahead closes windows whose events other tasks have yet to send
# through the repartition topic. Over one 200,000-event backlog (exactly_once_v2, single runs)
# the peer dropped 155,857 events with the defaults, 89,024 with 64 KiB and 250 records per
# poll, 56,910 with these.
BACKLOG_PROPERTIES = {
    "main.consumer.max.partition.fetch.bytes": "16384",
    "main.consumer.max.poll.records": "100",
}


@dataclass(frozen=True)
class PeerJob:
    """What one run of the peer counts: the ``records`` committed records of ``topic``, read
    with ``client``'s settings under ``guarantee``; the compiled ``classes``, a ``work`` folder
    for its state, and the partitions of its (new) output topic."""

    classes: Path
    client: Mapping[str, str]
    topic: str
    records: int
    guarantee: str
    work: Path
    partitions: int


@dataclass(frozen=True)
class StreamsRun(Throughput):
    """One run of the peer: input records read, seconds from start to its last count update,
    records Kafka Streams dropped (``dropped-records-total``: late for a closed window), and
    the commit interval in effect (ms)."""

    guarantee: str
    records: int
    seconds: float
    dropped: int
    output_topic: str
    commit_ms: int


def compile_peer(out: Path) -> Path:
    """Compile the peer into ``out``; return the class folder.

    Raises:
        ConfigError: no jars.
        JavaMissingError: no ``javac`` (a JDK, not only a runtime, is needed).
        EosError: the program did not compile (javac's first line).
    """
    return compile_java(SOURCE, jars.classpath("kafka-streams"), out, "the Kafka Streams peer")


def _command(
    job: PeerJob, settings: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> tuple[list[str], str]:
    """The peer's command line and its (new) output topic."""
    bootstrap = job.client["bootstrap.servers"]
    run_id = f"{job.guarantee}-{uuid.uuid4().hex[:6]}"
    output = f"{job.topic}-kstreams-{run_id}"
    broker.ensure_topic(bootstrap, output, job.partitions, dict(job.client))
    state = job.work / run_id
    state.mkdir(parents=True, exist_ok=True)
    args = {
        "bootstrap": bootstrap, "input": job.topic, "output": output, "app": f"bench-{run_id}",
        "state": str(state), "guarantee": job.guarantee, "expected": str(job.records),
    }  # fmt: skip
    classpath = f"{job.classes}:{jars.classpath('kafka-streams')}"
    command = [require_java("the Kafka Streams peer"), "-Xmx1g", "-cp", classpath, MAIN]
    command += [f"{k}={v}" for k, v in args.items()]
    command += [f"{k}={v}" for k, v in (extra or {}).items()]
    command += [f"prop.{k}={v}" for k, v in settings.items()]
    return command, output


def _cause(output: str) -> str:
    """The root cause in a Java stack trace: its last "Caused by", else its first exception
    (the stream thread's, printed before main's "Kafka Streams stopped"), else its last line."""
    lines = [line.strip() for line in output.strip().splitlines()] or ["(no output)"]
    caused = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by:")]
    thrown = [line for line in lines if "Exception" in line and not line.startswith("at ")]
    if caused:
        return caused[-1]
    return thrown[0] if thrown else lines[-1]


def _result(guarantee: str, output: str, code: int, stdout: str, stderr: str) -> StreamsRun:
    lines = stdout.strip().splitlines()
    if code != 0 or not lines or not lines[-1].startswith("{"):
        raise EosError(f"the Kafka Streams peer ({guarantee}) failed: {_cause(stderr or stdout)}")
    result = json.loads(lines[-1])
    return StreamsRun(
        guarantee, result["records"], result["seconds"], result["dropped"], output,
        result["commit_ms"],
    )  # fmt: skip


def run_peer(job: PeerJob, properties: Mapping[str, str] | None = None) -> StreamsRun:
    """Run the peer over the job's records, already committed, with further Kafka Streams
    ``properties`` (default ``BACKLOG_PROPERTIES``).

    Raises:
        EosError: the program failed or timed out (its last line of output).
    """
    settings = BACKLOG_PROPERTIES if properties is None else properties
    command, output = _command(job, settings)
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    return _result(job.guarantee, output, done.returncode, done.stdout, done.stderr)


@dataclass
class LivePeer:
    """The peer started on a live stream: its process, log files and output topic."""

    guarantee: str
    process: subprocess.Popen[bytes]
    output_topic: str
    stdout: Path
    stderr: Path

    def wait_running(self, timeout_s: float = 120.0) -> None:
        """Block until Kafka Streams reports RUNNING.

        Raises:
            EosError: the program ended or did not get there in time (the cause it printed).
        """
        deadline = time.monotonic() + timeout_s
        while "running" not in self.stdout.read_text(errors="replace").split():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                self.process.wait()
                cause = _cause(self.stderr.read_text(errors="replace"))
                raise EosError(f"the Kafka Streams peer ({self.guarantee}) did not start: {cause}")
            time.sleep(0.2)

    def finish(self, timeout_s: float = 900.0) -> StreamsRun:
        """Wait for the program to stop by itself (every record read, counts quiet)."""
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise EosError(f"the Kafka Streams peer ({self.guarantee}) did not stop") from None
        out = self.stdout.read_text(errors="replace")
        return _result(self.guarantee, self.output_topic, code, out, self.stderr.read_text())


def start_live(job: PeerJob) -> LivePeer:
    """Start the peer on the job's topic before its records are produced, with Kafka Streams'
    defaults (commit interval included: 100 ms under exactly_once_v2); it stops by itself
    once it has read the job's records and its counts are quiet."""
    # "default": the program leaves commit.interval.ms unset; idle 0 is Kafka Streams' own.
    extra = {"commit_ms": "default", "idle_ms": "0"}
    command, output = _command(job, {}, extra)
    logs = job.work / f"live-{output}"
    logs.mkdir(parents=True, exist_ok=True)
    stdout, stderr = logs / "stdout.txt", logs / "stderr.txt"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    return LivePeer(job.guarantee, process, output, stdout, stderr)


def final_counts(client: Mapping[str, str], topic: str) -> dict[WindowKey, int]:
    """The last count of each window on the peer's output topic, read with ``read_committed``."""
    counts: dict[WindowKey, int] = {}
    for msg in read_committed(client, topic):
        key, value = msg.key(), msg.value()
        if key is not None and value is not None:
            start_ms, event_type, currency = key.decode().split("|", 2)
            counts[(int(start_ms) * 1000, event_type, currency)] = int(value)
    return counts
