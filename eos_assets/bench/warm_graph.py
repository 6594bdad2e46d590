"""The graph built from empty on a warm local Spark Connect server, the way ``make ui``, the
demo and the lag sensor's runs use Spark, next to the bench's own session (``--only peer``).

A process holding a classic SparkSession (the bench's) cannot open a Spark Connect one, so the
runs are ``ingest_and_refresh`` runs in processes of their own, as the sensor launches them;
the step durations come from each run's event log.
"""

from pathlib import Path

import dagster as dg
from deltalake import DeltaTable

from eos_assets.bench import stages
from eos_assets.bench.lake import BenchLake, RunTimes
from eos_assets.bench.report import Measurement
from eos_assets.bench.runs import WARM, execute_stream_job, new_instance, product_env, warm_server
from eos_assets.lib.errors import EosError

BRONZE_KEY = "orders/bronze/raw_events"


def warm_graph_lines(
    work: Path, bootstrap: str, topic: str, events: int, master: str, slots: int, rounds: int
) -> list[Measurement]:
    """Start a local Spark server, warm it with one uncounted build of the whole graph, then
    build it ``rounds`` more times, each into a lake of its own, and compare the best build's
    Spark steps with the best of as many DuckDB SQL runs.

    A server that ``make ui`` or the lag sensor keeps up has built the graph many times; its
    JIT keeps compiling for the first few builds, so one build after the warm-up is not yet
    the server users run on.
    """
    with warm_server(work / "spark-server", master) as server:
        _build(work / "warm-up", bootstrap, topic, server.state, master)
        roots = [work / f"warm-{i}" for i in range(rounds)]
        builds = [(r, _build(r, bootstrap, topic, server.state, master)) for r in roots]
    root, times = min(builds, key=lambda b: stages.spark_seconds(b[1]))
    lake = BenchLake(root, bootstrap, topic, master)
    version = DeltaTable(lake.uri("orders", "bronze", "raw_events")).version()
    times.metadata[BRONZE_KEY] = {"delta_version": version}
    steps = ", ".join(f"{k.replace('__', '/')} {v:.1f}s" for k, v in times.steps.items())
    spark_each = ", ".join(f"{stages.spark_seconds(t):.1f}s" for _, t in builds)
    return [
        Measurement(
            "graph", f"ingest_and_refresh from empty at {events:,} events, {WARM}", times.wall,
            "s", detail=f"its process, the best of {rounds} after one uncounted run on the same "
            f"server (started in {server.start_s:.1f}s); {steps}",
            data={"steps": times.steps, "server_start_s": server.start_s},
        ),
        stages.peer_line(lake, times, slots, WARM, rounds, f"builds {spark_each}"),
    ]  # fmt: skip


def _build(root: Path, bootstrap: str, topic: str, state: Path, master: str) -> RunTimes:
    """One ``ingest_and_refresh`` run from empty on the server of ``state``; its times."""
    home = new_instance(root)
    env = product_env(root, bootstrap, topic, state, master)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        before = len(instance.get_run_records())
    log = root / "run.log"
    execute_stream_job(env, log)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.get_run_records()
        if len(records) != before + 1:
            raise EosError(f"the warm graph run did not run once: see {log}")
        record = max(records, key=lambda r: r.create_timestamp)
        stats = instance.get_run_step_stats(record.dagster_run.run_id)
    steps = {
        s.step_key: round(s.end_time - s.start_time, 2)
        for s in stats
        if s.start_time is not None and s.end_time is not None
    }
    wall = (record.end_time or 0.0) - (record.start_time or 0.0)
    return RunTimes(wall, steps)
