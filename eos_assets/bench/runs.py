"""One run and one demo, timed the way a user meets them, with a warm Spark server and without.

- The local Spark server (``eos-assets spark up``): how long it takes to start.
- One ``ingest_and_refresh`` run over a backlog: the run is ``dagster job execute`` in a new
  process (as the daemon's run worker is), on a lake one small run has already brought up to
  date; timed from the moment its process starts to the end of the ``serving/kpis`` step (the
  KPIs are in DuckDB), from the instance's event log.
- ``eos-assets demo`` (what ``make demo`` runs once the broker and the class archive exist): its
  process's wall time, from start to exit.
"""

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from eos_assets.bench.stream import PARTITIONS
from eos_assets.devkit import broker
from eos_assets.devkit.producer import ProduceOptions, produce
from eos_assets.lib.errors import EosError
from eos_assets.lib.spark import spark_server

# The local instance of ``make demo`` and ``make ui``: the bench runs the product as shipped.
INSTANCE_YAML = Path(__file__).resolve().parents[2] / "deploy" / "dagster.local.yaml"
WARM = "warm Spark server"
PER_RUN = "per-run Spark session"
STREAM_JOB = "ingest_and_refresh"
SERVING_STEP = "orders__serving__kpis"
PRIMING_EVENTS = 1_000
TIMEOUT_S = 900.0


def product_env(
    root: Path, bootstrap: str, topic: str, spark_state: Path | None, master: str
) -> dict[str, str]:
    """The product's settings for a deployment under ``root``: its lake, warehouse and
    instance; runs connect to the local Spark server of ``spark_state`` when given, else each
    starts an in-process session."""
    drop = ("DAGSTER_HOME", "EOS_TOPICS", "EOS_SPARK_CONNECT", "EOS_STATE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        DAGSTER_HOME=str(root / "dagster_home"),
        EOS_KAFKA_BOOTSTRAP=bootstrap,
        EOS_TOPICS=topic,
        EOS_LAKE_ROOT=str(root / "lake"),
        EOS_WAREHOUSE=str(root / "warehouse.duckdb"),
        EOS_STATE_DIR=str(spark_state or root / "state"),
        EOS_SPARK_MASTER=master,
        EOS_AGG_OUT_TOPIC=f"{topic}-out",
    )
    if spark_state is not None:
        env["EOS_SPARK_CONNECT"] = "local"
    return env


def new_instance(root: Path) -> Path:
    """A fresh Dagster home under ``root`` with the product's local instance; its path."""
    if not INSTANCE_YAML.is_file():
        raise EosError(f"{INSTANCE_YAML} is missing: run the bench from a checkout (make bench)")
    home = root / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(INSTANCE_YAML, home / "dagster.yaml")
    return home


@dataclass
class Server:
    """The bench's local Spark server: its state folder and how long ``up`` took."""

    state: Path
    start_s: float


@contextlib.contextmanager
def warm_server(state: Path, master: str) -> Iterator[Server]:
    """Start a local Spark Connect server for the runs of the block; stop it after."""
    began = time.monotonic()
    spark_server.up(state, master)
    try:
        yield Server(state, time.monotonic() - began)
    finally:
        spark_server.down(state)


@dataclass
class RunTiming:
    """One run over a backlog: seconds from its process start to the KPIs in DuckDB."""

    to_kpis_s: float
    to_run_start_s: float
    process_s: float
    steps: dict[str, float] = field(default_factory=dict)


def backlog_run(
    bootstrap: str,
    client: Mapping[str, str],
    root: Path,
    spark_state: Path | None,
    master: str,
    backlog: int,
) -> RunTiming:
    """On a topic and lake of their own, one run over a first small batch, then ``backlog``
    more events and the timed ``ingest_and_refresh`` run that takes them to DuckDB (the same
    seeded events in each mode)."""
    home = new_instance(root)
    topic = f"bench-backlog-{uuid.uuid4().hex[:6]}"
    broker.ensure_topic(bootstrap, topic, PARTITIONS, dict(client))
    env = product_env(root, bootstrap, topic, spark_state, master)
    _produce(bootstrap, topic, PRIMING_EVENTS, root / "priming.jsonl")
    _execute(env, root / "priming.log")
    _produce(bootstrap, topic, backlog, root / "backlog.jsonl")
    began = time.time()
    _execute(env, root / "run.log")
    process_s = time.time() - began
    with dg.DagsterInstance.from_config(str(home)) as instance:
        record = max(instance.get_run_records(), key=lambda r: r.create_timestamp)
        stats = {
            s.step_key: s
            for s in instance.get_run_step_stats(record.dagster_run.run_id)
            if s.start_time is not None and s.end_time is not None
        }
    serving = stats.get(SERVING_STEP)
    if serving is None or serving.end_time is None or record.start_time is None:
        raise EosError(f"the timed run did not serve the KPIs: see {root / 'run.log'}")
    return RunTiming(
        to_kpis_s=serving.end_time - began,
        to_run_start_s=record.start_time - began,
        process_s=process_s,
        steps={k: round((s.end_time or 0) - (s.start_time or 0), 2) for k, s in stats.items()},
    )


@dataclass
class DemoTiming:
    """``eos-assets demo``: the wall time of its process and the time it reports itself."""

    mode: str
    wall_s: float
    reported_s: float | None


def demo(
    bootstrap: str, root: Path, spark_state: Path | None, master: str, count: int
) -> DemoTiming:
    """Run ``eos-assets demo --count N`` on a topic of its own, a new lake and instance."""
    new_instance(root)
    topic = f"bench-demo-{uuid.uuid4().hex[:6]}"
    env = product_env(root, bootstrap, topic, spark_state, master)
    command = [str(Path(sys.executable).parent / "eos-assets"), "demo", "--count", str(count)]
    command += ["--seed", "7"]
    began = time.monotonic()
    done = _run(command, env, root / "demo.log")
    wall = time.monotonic() - began
    reported = re.search(r"demo wall time: ([0-9.]+)s", done)
    mode = PER_RUN if spark_state is None else WARM
    return DemoTiming(mode, wall, float(reported.group(1)) if reported else None)


def _produce(bootstrap: str, topic: str, count: int, manifest: Path) -> None:
    options = ProduceOptions(topic=topic, count=count, partitions=PARTITIONS, seed=count)
    produce(bootstrap, options, manifest)
    manifest.unlink(missing_ok=True)


def execute_stream_job(env: Mapping[str, str], log: Path) -> None:
    """Run ``ingest_and_refresh`` in a process of its own (``dagster job execute``) with the
    product settings ``env``; its output goes to ``log``."""
    _execute(env, log)


def _execute(env: Mapping[str, str], log: Path) -> None:
    dagster = str(Path(sys.executable).parent / "dagster")
    _run([dagster, "job", "execute", "-m", "eos_assets.definitions", "-j", STREAM_JOB], env, log)


def _run(command: list[str], env: Mapping[str, str], log: Path) -> str:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        done = subprocess.run(
            command, env=dict(env), cwd=log.parent, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, timeout=TIMEOUT_S, check=False,
        )  # fmt: skip
    text = log.read_text(errors="replace")
    if done.returncode != 0:
        raise EosError(f"{Path(command[0]).name} {command[1]} failed: {text[-600:]}")
    return text
