"""Freshness under the Dagster daemon: a steady stream in, KPIs out of DuckDB, p50/p95.

The product runs as deployed locally: ``dagster-daemon run`` on a fresh instance
(``DAGSTER_HOME`` of its own), the lag sensor launching ``ingest_and_refresh`` runs (bronze and
everything downstream, one process per run). The project's producer sends a steady stream at
``rate`` events/s for ``freshness_s`` seconds; ``visibility`` tells when each event reached the
KPI tables in DuckDB. The stream runs twice in one bench run, at the same rate: once with the
runs connected to a warm local Spark Connect server (``EOS_SPARK_CONNECT=local``), once with
each run starting its own in-process SparkSession (the classic mode).
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np

from eos_assets.bench import live, peers, stages
from eos_assets.bench.continuous_defs import STREAM_ENV
from eos_assets.bench.live import LatencyRun
from eos_assets.bench.options import BenchOptions
from eos_assets.bench.report import Measurement, at_most
from eos_assets.bench.runs import (
    PER_RUN,
    WARM,
    backlog_run,
    demo,
    new_instance,
    product_env,
    warm_server,
)
from eos_assets.bench.stream import PARTITIONS
from eos_assets.bench.visibility import ORDERS, PAGE_VIEWS, Latencies, Poller, Watched, latencies
from eos_assets.defs.continuous import CONTINUOUS_JOB, LAST_BATCH
from eos_assets.devkit import broker
from eos_assets.lib.errors import EosError

P95_TARGET_S = 20.0
P95_GOAL_S = 15.0
CONTINUOUS_P95_TARGET_S = 5.0
DEFS, CONTINUOUS_DEFS = "eos_assets.definitions", "eos_assets.bench.continuous_defs"
CONTINUOUS = "continuous run, warm Spark server"
DRAIN_S = 300.0  # after the stream stops, wait at most this long for DuckDB to catch up
FAST_S = 30.0  # how long the continuous stream's faster run lasts
# ``--only continuous`` first runs the orders stream this long on the new server, unmeasured
# against the target: the whole stage's continuous streams come after sensor-driven runs of
# the same queries, and a deployment's server has run them for hours.
WARM_UP_S = 30.0


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
    """Each measurement with a warm Spark server, then with a session per run, in turn: one
    run over a backlog, the steady stream through the daemon, the demo. The server stays up
    (idle) during the per-run measurements."""
    root.mkdir(parents=True, exist_ok=True)
    with warm_server(root / "spark-state", options.master) as server:
        modes = {"warm": server.state, "per-run": None}
        timed = {
            k: backlog_run(
                bootstrap, client, root / f"backlog-{k}", state, options.master, options.backlog
            )
            for k, state in modes.items()
        }
        streams = {
            k: stream(bootstrap, client, root / f"stream-{k}", options, state)
            for k, state in modes.items()
        }
        loop, views, fast = _continuous(bootstrap, client, root, options, server.state)
        demos = {
            k: demo(bootstrap, root / f"demo-{k}", state, options.master, options.backlog)
            for k, state in modes.items()
        }
    # Kafka Streams on the same kind of stream, at the same rate, once Spark is down.
    count = max(1, int(options.rate * options.freshness_s))
    ks = live.ks_windows(bootstrap, client, root / "ks", PARTITIONS, count, options.rate)
    return [
        *freshness_lines(streams["warm"], streams["per-run"], options.rate),
        continuous_line(loop, streams["warm"], ks, options.rate),
        continuous_line(views, streams["warm"], ks, options.rate, PAGE_VIEWS),
        *([] if fast is None else [fast_line(fast, options.fast_rate)]),
        peers.ks_line(ks, options.rate),
        *stages.run_lines(server.start_s, timed["warm"], timed["per-run"], options.backlog),
        *stages.demo_lines(demos["warm"], demos["per-run"], options.backlog),
    ]


def continuous_stage(
    bootstrap: str, client: dict[str, str], root: Path, options: BenchOptions
) -> list[Measurement]:
    """``--only continuous``: the freshness stage's continuous streams alone (orders,
    page_views, the faster run) beside Kafka Streams at the same rate, in minutes rather than
    the whole stage's quarter of an hour, after a warm-up stream (``WARM_UP_S``)."""
    root.mkdir(parents=True, exist_ok=True)
    with warm_server(root / "spark-state", options.master) as server:
        first = replace(options, freshness_s=WARM_UP_S)
        cold = stream(bootstrap, client, root / "stream-warm-up", first, server.state, True)
        loop, views, fast = _continuous(bootstrap, client, root, options, server.state)
    count = max(1, int(options.rate * options.freshness_s))
    ks = live.ks_windows(bootstrap, client, root / "ks", PARTITIONS, count, options.rate)
    return [
        warm_up_line(cold, options.rate),
        continuous_line(loop, None, ks, options.rate),
        continuous_line(views, None, ks, options.rate, PAGE_VIEWS),
        *([] if fast is None else [fast_line(fast, options.fast_rate)]),
        peers.ks_line(ks, options.rate),
    ]


def _continuous(
    bootstrap: str, client: dict[str, str], root: Path, options: BenchOptions, state: Path
) -> tuple["Freshness", "Freshness", "Freshness | None"]:
    """The continuous orders and page_views streams at ``options.rate``, then orders at
    ``options.fast_rate`` for ``FAST_S`` (None: no faster run)."""
    loop = stream(bootstrap, client, root / "stream-continuous", options, state, True)
    views = stream(bootstrap, client, root / "stream-views", options, state, True, PAGE_VIEWS)
    fast = None
    if options.fast_rate > 0:
        quick = replace(options, rate=options.fast_rate, freshness_s=FAST_S)
        fast = stream(bootstrap, client, root / "stream-fast", quick, state, True)
    return loop, views, fast


@dataclass
class Freshness:
    """One steady stream through the daemon: every event's latency and the runs it took."""

    mode: str
    lat: Latencies
    runs: dict[str, int]
    timeline: list[dict[str, object]]
    count: int
    produced_s: float
    polls: int
    unreadable: int
    visible_s: float | None = None  # from the producer's start until DuckDB held every event

    def stat(self, name: str) -> float | None:
        """``p50``, ``p95`` or ``max`` of the latencies, in seconds (None: none visible)."""
        values = self.lat.seconds
        if not len(values):
            return None
        return float(values.max() if name == "max" else np.percentile(values, int(name[1:])))


def stream(
    bootstrap: str,
    client: dict[str, str],
    root: Path,
    options: BenchOptions,
    spark_state: Path | None,
    continuous: bool = False,
    watched: Watched = ORDERS,
) -> Freshness:
    """Run the stream through the daemon; the latency of every event to the watched KPI table
    in DuckDB. With ``continuous``, the stream is declared ``mode: continuous``
    (``continuous_defs``); ``watched`` says which stream (orders or page_views) and table."""
    home = new_instance(root)
    topic = f"bench-fresh-{uuid.uuid4().hex[:6]}"
    broker.ensure_topic(bootstrap, topic, PARTITIONS, client)
    env = product_env(root, bootstrap, topic, spark_state, options.master)
    env[STREAM_ENV] = watched.stream
    bin_dir = Path(sys.executable).parent
    daemon_log = root / "daemon.log"
    daemon = _start(
        [str(bin_dir / "dagster-daemon"), "run", "-m", CONTINUOUS_DEFS if continuous else DEFS],
        env,
        daemon_log,
    )
    poller = Poller(root / "warehouse.duckdb", watched)
    count = int(options.rate * options.freshness_s)
    began_wall = time.time()
    try:
        _wait_for(daemon_log, "ingest_on_kafka_lag", daemon, 180.0)
        if continuous:  # measured from a running loop, as a deployment runs it
            _wait_for_loop(home, time.monotonic() + DRAIN_S)
        poller.start()
        produce = [str(bin_dir / "eos-assets"), "produce", "--stream", watched.stream]
        produce += ["--topic", topic, "--count", str(count)]
        produce += ["--rate", str(options.rate), "--manifest", str(root / "manifest.jsonl")]
        producer = _start(produce, env, root / "producer.log")
        began, began_wall = time.monotonic(), time.time()
        if producer.wait(timeout=options.freshness_s * 3 + 60) != 0:
            raise EosError(f"the producer failed: {(root / 'producer.log').read_text()[-500:]}")
        produced_s = time.monotonic() - began
        deadline, visible_s = time.monotonic() + DRAIN_S, None
        while time.monotonic() < deadline:
            last = poller.latest()
            if last is not None and last.events >= count:
                visible_s = time.monotonic() - began
                break
            time.sleep(0.5)
        # A continuous run stays active until asked to stop: the other runs are waited for.
        _settle(home, time.monotonic() + DRAIN_S, keep=CONTINUOUS_JOB if continuous else None)
        if continuous:
            _stop_loops(home, time.monotonic() + 60.0)
    finally:
        poller.stop()
        stop_group(daemon)
    runs, timeline = _runs(home, began_wall)
    lat = latencies(poller.seen, root / "lake", topic, PARTITIONS, watched)
    mode = CONTINUOUS if continuous else PER_RUN if spark_state is None else WARM
    return Freshness(
        mode, lat, runs, timeline, count, produced_s, poller.polls, poller.unreadable, visible_s
    )


def _wait_for_loop(home: Path, deadline: float) -> None:
    """Wait until the keeper's continuous run has made its first batch (the catch-up pass
    over an empty topic, which runs each step's query once): a deployment's loop runs for
    hours, and the seconds of its first queries are not those of its steady state."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        while time.monotonic() < deadline:
            runs = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
            if any(LAST_BATCH in run.tags for run in runs):
                return
            time.sleep(1)
    raise EosError("the continuous run did not start polling Kafka")


BUSY = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]


def _settle(home: Path, deadline: float, keep: str | None = None) -> None:
    """Wait until no run is queued or in progress (but those of a job ending in ``keep``), so
    stopping the daemon cuts none short."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        while time.monotonic() < deadline:
            runs = instance.get_runs(filters=dg.RunsFilter(statuses=BUSY))
            if not [r for r in runs if keep is None or not r.job_name.endswith(keep)]:
                return
            time.sleep(2)


def _stop_loops(home: Path, deadline: float) -> None:
    """Ask the continuous runs to stop (Dagster's termination: the run ends CANCELED) and
    wait for them, so their end is not counted as a failure."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        loops = [
            r
            for r in instance.get_runs(filters=dg.RunsFilter(statuses=BUSY))
            if r.job_name.endswith(CONTINUOUS_JOB)
        ]
        for run in loops:
            instance.run_launcher.terminate(run.run_id)
        while time.monotonic() < deadline:
            runs = [instance.get_run_by_id(r.run_id) for r in loops]
            if all(r is None or r.status not in BUSY for r in runs):
                return
            time.sleep(1)


def _runs(home: Path, began: float) -> tuple[dict[str, int], list[dict[str, object]]]:
    """Runs per job and status, and each run's times (seconds after the stream started,
    with its steps' durations), from the instance the daemon used."""
    counts: dict[str, int] = {}
    timeline: list[dict[str, object]] = []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for record in sorted(instance.get_run_records(), key=lambda r: r.create_timestamp):
            run = record.dagster_run
            # A lag run for a small backlog may take only the path to the KPIs (eos/path).
            job = run.job_name + (" (KPI path)" if run.tags.get("eos/path") == "kpis" else "")
            key = f"{job}:{run.status.value}"
            counts[key] = counts.get(key, 0) + 1
            steps = {
                s.step_key: round(s.end_time - s.start_time, 1)
                for s in instance.get_run_step_stats(run.run_id)
                if s.start_time is not None and s.end_time is not None
            }
            timeline.append(
                {
                    "job": job,
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


def freshness_lines(warm: Freshness, per_run: Freshness, rate: float) -> list[Measurement]:
    """p95 (against the target), p50 and max with the warm server, each beside the per-run
    session's figure of the same run; then the per-run session's own line."""
    p95 = warm.stat("p95")
    target = f"<= {P95_TARGET_S:.0f} (goal {P95_GOAL_S:.0f})"
    lines = [
        Measurement(
            "freshness", f"event to KPI in DuckDB, p95, {WARM}", p95, "s", target,
            at_most(p95, P95_TARGET_S), f"{PER_RUN} {_s(per_run.stat('p95'))} in the same run; "
            + _detail(warm, rate), _data(warm),
        )
    ]  # fmt: skip
    for name in ("p50", "max"):
        lines.append(
            Measurement(
                "freshness", f"event to KPI in DuckDB, {name}, {WARM}", warm.stat(name), "s",
                detail=f"{PER_RUN} {_s(per_run.stat(name))} in the same run",
            )
        )  # fmt: skip
    lines.append(
        Measurement(
            "freshness", f"event to KPI in DuckDB, p95, {PER_RUN}", per_run.stat("p95"), "s",
            detail=_detail(per_run, rate), data=_data(per_run),
        )
    )  # fmt: skip
    return lines


def continuous_line(
    loop: Freshness,
    warm: Freshness | None,
    ks: LatencyRun,
    rate: float,
    watched: Watched = ORDERS,
) -> Measurement:
    """p95 of a continuous stream to its watched KPI table (against its target), beside the
    sensor-driven orders stream's (when measured) and Kafka Streams' of the same run."""
    p95 = loop.stat("p95")
    table = f"{watched.stream}.{watched.kpi}"
    sensor = "" if warm is None else f"sensor-driven ({WARM}) {_s(warm.stat('p95'))}, "
    return Measurement(
        "freshness", f"event to KPI in DuckDB ({table}), p95, {CONTINUOUS}", p95, "s",
        f"<= {CONTINUOUS_P95_TARGET_S:.0f} (goal: Kafka Streams')",
        at_most(p95, CONTINUOUS_P95_TARGET_S),
        f"{sensor}Kafka Streams exactly_once_v2 "
        f"{_s(ks.latencies.stats()['p95'])} in the same run; " + _detail(loop, rate),
        _data(loop),
    )  # fmt: skip


def warm_up_line(cold: Freshness, rate: float) -> Measurement:
    """The orders stream's p95 on a server that ran nothing before: no target, for the record."""
    return Measurement(
        "freshness", f"event to KPI in DuckDB ({ORDERS.stream}.{ORDERS.kpi}), p95, continuous "
        "run on a server that ran nothing before (warm-up)", cold.stat("p95"), "s",
        detail=_detail(cold, rate), data=_data(cold),
    )  # fmt: skip


def fast_line(fast: Freshness, rate: float) -> Measurement:
    """The continuous stream at a higher rate: the rate it sustained, and its p95."""
    kept = fast.count / fast.visible_s if fast.visible_s else None
    return Measurement(
        "freshness", f"continuous run at {rate:,.0f} events/s: events/s sustained", kept,
        "events/s",
        detail=f"every event in DuckDB {_s(fast.visible_s)} after the producer began; p95 "
        f"{_s(fast.stat('p95'))}; " + _detail(fast, rate),
        data=_data(fast) | {"mode": f"{CONTINUOUS}, {rate:,.0f} events/s"},
    )  # fmt: skip


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}s"


def _data(f: Freshness) -> dict[str, Any]:
    return {
        "mode": f.mode, "p50": f.stat("p50"), "p95": f.stat("p95"), "max": f.stat("max"),
        "events": f.count, "visible": len(f.lat.seconds), "never_visible": f.lat.never_visible,
        "observations": f.lat.observations, "total_mismatches": f.lat.total_mismatches,
        "runs": f.runs, "produce_s": f.produced_s, "polls": f.polls,
        "unreadable_copies": f.unreadable, "timeline": f.timeline,
    }  # fmt: skip


def _detail(f: Freshness, rate: float) -> str:
    # A continuous run ends CANCELED when the stream's measurement stops it.
    failed = sum(
        v
        for k, v in f.runs.items()
        if k.endswith("FAILURE") or (k.endswith("CANCELED") and CONTINUOUS_JOB not in k)
    )
    return (
        f"p50 {_s(f.stat('p50'))}, max {_s(f.stat('max'))} over {len(f.lat.seconds):,} of "
        f"{f.count:,} events ({rate:,.0f}/s for {f.produced_s:.0f}s); {f.lat.observations} "
        f"DuckDB versions, {f.lat.total_mismatches} with totals not matching their lineage; "
        f"{f.lat.never_visible} never visible; runs "
        + ", ".join(f"{k} {v}" for k, v in sorted(f.runs.items()))
        + (f" ({failed} failed)" if failed else "")
    )
