"""Freshness under the Dagster daemon: a steady stream in, KPIs out of DuckDB, p50/p95.

The product runs as deployed locally: ``dagster-daemon run`` on a fresh instance
(``DAGSTER_HOME`` of its own), the lag sensor launching ``ingest_and_refresh`` runs (bronze and
everything downstream, one process and SparkSession per run). The project's producer sends a steady
stream at ``rate`` events/s for ``freshness_s`` seconds; ``visibility`` tells when each
event reached the KPI tables in DuckDB.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import numpy as np

from eos_assets.bench.options import BenchOptions
from eos_assets.bench.report import Measurement, at_most
from eos_assets.bench.stream import PARTITIONS
from eos_assets.bench.visibility import Latencies, Poller, latencies
from eos_assets.lib import broker
from eos_assets.lib.errors import EosError

P95_TARGET_S = 60.0
DRAIN_S = 300.0  # after the stream stops, wait at most this long for DuckDB to catch up
# The local instance of ``make demo`` and ``make ui``: the bench runs the product as shipped.
INSTANCE_YAML = Path(__file__).resolve().parents[2] / "deploy" / "dagster.local.yaml"


def _env(root: Path, bootstrap: str, topic: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "EOS_TOPICS")}
    env.update(
        DAGSTER_HOME=str(root / "dagster_home"),
        EOS_KAFKA_BOOTSTRAP=bootstrap,
        EOS_TOPICS=topic,
        EOS_LAKE_ROOT=str(root / "lake"),
        EOS_WAREHOUSE=str(root / "warehouse.duckdb"),
        EOS_STATE_DIR=str(root / "state"),
        EOS_SPARK_MASTER=env.get("EOS_SPARK_MASTER", "local[2]"),
    )
    return env


def _default_interrupts() -> None:
    # The daemon maps SIGTERM to its SIGINT handler; an inherited "ignore SIGINT" would make
    # it ignore SIGTERM as well.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start(command: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            command, env=dict(env), cwd=log.parent, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_default_interrupts,
        )  # fmt: skip


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 60.0) -> None:
    """SIGTERM to the process group of ``proc`` (it leads one), SIGKILL after ``grace_s``."""
    group = proc.pid  # started with start_new_session: its pid is its group id
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            break
        proc.poll()
        time.sleep(0.5)
    else:
        os.killpg(group, signal.SIGKILL)
    proc.wait(timeout=10)


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-800:]
            raise EosError(f"dagster-daemon did not start its sensors: {tail}")
        time.sleep(1)


def freshness_stage(
    bootstrap: str, client: dict[str, str], root: Path, options: BenchOptions
) -> list[Measurement]:
    """Run the stream through the daemon; the latency of every event to DuckDB."""
    root.mkdir(parents=True, exist_ok=True)
    home = root / "dagster_home"
    home.mkdir(exist_ok=True)
    if not INSTANCE_YAML.is_file():
        raise EosError(f"{INSTANCE_YAML} is missing: run the bench from a checkout (make bench)")
    shutil.copy(INSTANCE_YAML, home / "dagster.yaml")
    topic = f"bench-fresh-{uuid.uuid4().hex[:6]}"
    broker.ensure_topic(bootstrap, topic, PARTITIONS, client)
    env = _env(root, bootstrap, topic)
    bin_dir = Path(sys.executable).parent
    daemon_log = root / "daemon.log"
    daemon = _start(
        [str(bin_dir / "dagster-daemon"), "run", "-m", "eos_assets.definitions"], env, daemon_log
    )
    poller = Poller(root / "warehouse.duckdb")
    count = int(options.rate * options.freshness_s)
    began_wall = time.time()
    try:
        _wait_for(daemon_log, "ingest_on_kafka_lag", daemon, 180.0)
        poller.start()
        produce = [str(bin_dir / "eos-assets"), "produce", "--topic", topic, "--count", str(count)]
        produce += ["--rate", str(options.rate), "--manifest", str(root / "manifest.jsonl")]
        producer = _start(produce, env, root / "producer.log")
        began, began_wall = time.monotonic(), time.time()
        if producer.wait(timeout=options.freshness_s * 3 + 60) != 0:
            raise EosError(f"the producer failed: {(root / 'producer.log').read_text()[-500:]}")
        produced_s = time.monotonic() - began
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline:
            last = poller.latest()
            if last is not None and last.events >= count:
                break
            time.sleep(2)
        _settle(home, time.monotonic() + DRAIN_S)
    finally:
        poller.stop()
        stop_group(daemon)
    runs, timeline = _runs(home, began_wall)
    lat = latencies(poller.seen, root / "lake", topic, PARTITIONS)
    return _lines(lat, runs, timeline, count, produced_s, options, poller)


def _settle(home: Path, deadline: float) -> None:
    """Wait until no run is queued or in progress, so stopping the daemon cuts none short."""
    busy = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        while time.monotonic() < deadline:
            if not instance.get_runs(filters=dg.RunsFilter(statuses=busy), limit=1):
                return
            time.sleep(2)


def _runs(home: Path, began: float) -> tuple[dict[str, int], list[dict[str, object]]]:
    """Runs per job and status, and each run's times (seconds after the stream started,
    with its steps' durations), from the instance the daemon used."""
    counts: dict[str, int] = {}
    timeline: list[dict[str, object]] = []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for record in sorted(instance.get_run_records(), key=lambda r: r.create_timestamp):
            run = record.dagster_run
            key = f"{run.job_name}:{run.status.value}"
            counts[key] = counts.get(key, 0) + 1
            steps = {
                s.step_key: round(s.end_time - s.start_time, 1)
                for s in instance.get_run_step_stats(run.run_id)
                if s.start_time is not None and s.end_time is not None
            }
            timeline.append(
                {
                    "job": run.job_name,
                    "status": run.status.value,
                    "created": round(record.create_timestamp.timestamp() - began, 1),
                    "started": _after(record.start_time, began),
                    "ended": _after(record.end_time, began),
                    "steps": steps,
                }
            )
    return counts, timeline


def _after(stamp: float | None, began: float) -> float | None:
    return None if stamp is None else round(stamp - began, 1)


def _lines(
    lat: Latencies,
    runs: dict[str, int],
    timeline: list[dict[str, object]],
    count: int,
    produced_s: float,
    options: BenchOptions,
    poller: Poller,
) -> list[Measurement]:
    values = lat.seconds
    p50 = float(np.percentile(values, 50)) if len(values) else None
    p95 = float(np.percentile(values, 95)) if len(values) else None
    worst = float(values.max()) if len(values) else None
    data = {
        "p50": p50, "p95": p95, "max": worst, "events": count, "visible": len(values),
        "never_visible": lat.never_visible, "observations": lat.observations,
        "total_mismatches": lat.total_mismatches, "runs": runs, "produce_s": produced_s,
        "polls": poller.polls, "unreadable_copies": poller.unreadable, "timeline": timeline,
    }  # fmt: skip
    failed = sum(v for k, v in runs.items() if k.endswith(("FAILURE", "CANCELED")))
    detail = (
        f"p50 {p50 or 0:.1f}s, max {worst or 0:.1f}s over {len(values):,} of {count:,} events "
        f"({options.rate:,.0f}/s for {produced_s:.0f}s); {lat.observations} DuckDB versions, "
        f"{lat.total_mismatches} with totals not matching their lineage; "
        f"{lat.never_visible} never visible; runs "
        + ", ".join(f"{k} {v}" for k, v in sorted(runs.items()))
        + (f" ({failed} failed)" if failed else "")
    )
    return [
        Measurement(
            "freshness", "event to KPI in DuckDB, p95", p95, "s", f"<= {P95_TARGET_S:.0f}",
            at_most(p95, P95_TARGET_S), detail, data,
        )
    ]  # fmt: skip
