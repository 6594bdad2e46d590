"""A rolling restart of the session's three brokers under ``dagster dev``: no run fails, no record
is lost or doubled.

A real ``dagster dev`` (webserver + daemon, the product's local instance) is pointed at the
3-node cluster; its lag sensor launches ``ingest_and_refresh`` whenever bronze is behind, while
the product producer keeps writing transactions (some aborted). Each node in turn is stopped
with SIGTERM, started again, and back in every partition's ISR before the next one goes. Every
run the sensor launched succeeds, none of its ticks fails, and bronze holds every record the
producer saw committed exactly once and none of the aborted ones (the oracle).
"""

import itertools
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from eos_assets.devkit import broker
from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets_tests.faults.harness import Ledger
from eos_assets_tests.faults.oracle import judge, overlaps
from eos_assets_tests.support import dagster_dev
from eos_assets_tests.support.cluster import Background, LiveCluster

# Each round of the producer: about 2 s of transactions of 50, a fifth of them aborted.
ROUND = {"count": 300, "rate": 150.0, "transaction_size": 50, "abort_ratio": 0.2}
ACTIVE = {"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"}
CATCH_UP_S = 420.0  # a bound on the wait, generous for a loaded machine


def _produce_until(
    stop: threading.Event, bootstrap: str, topic: str, folder: Path
) -> list[dict[str, Any]]:
    """``produce`` round after round until ``stop`` is set; every round's manifest lines."""
    lines: list[dict[str, Any]] = []
    for n in itertools.count():
        if stop.is_set():
            return lines
        options = ProduceOptions(
            topic=topic, seed=500 + n, partitions=3, malformed_ratio=0.02, **ROUND
        )
        path = folder / f"round-{n}.jsonl"
        produce(bootstrap, options, path)
        lines += read_manifest(path)
    raise AssertionError("unreachable")


def _runs(dev: dagster_dev.DevProcess) -> list[dict]:
    """The lag sensor's runs so far; fails the test at the first one that did not succeed."""
    runs = dagster_dev.sensor_runs(dev)
    for run in runs:
        assert run["status"] not in ("FAILURE", "CANCELED"), (
            f"run {run['runId']} {run['status']} (a broker's restart failed a run):\n"
            f"{dev.log_tail()}"
        )
    return runs


def _wait_for_cadence(dev: dagster_dev.DevProcess, timeout: float = CATCH_UP_S) -> None:
    """Wait until the lag sensor has launched its second run: the first one (a cold Spark
    session, every asset) has committed silver, and runs now follow one another."""
    deadline = time.monotonic() + timeout
    while len(_runs(dev)) < 2:
        assert time.monotonic() < deadline, f"fewer than 2 runs launched:\n{dev.log_tail()}"
        time.sleep(1)


def _caught_up(dev: dagster_dev.DevProcess, table: str, manifest: list[dict[str, Any]]) -> float:
    """Wait until no run is active and bronze holds what the producer committed; the seconds
    it took."""
    began = time.monotonic()
    while True:
        runs = _runs(dev)
        active = [r["status"] for r in runs if r["status"] in ACTIVE]
        if not active and Path(table).exists() and judge(table, manifest).exact:
            return time.monotonic() - began
        assert time.monotonic() - began < CATCH_UP_S, (
            f"bronze did not catch up in {CATCH_UP_S:.0f}s: {judge(table, manifest)}, "
            f"{len(runs)} runs, active: {active}\n{dev.log_tail()}"
        )
        time.sleep(2)


def test_a_rolling_restart_under_dagster_dev_fails_no_run_and_loses_nothing(
    kafka_cluster: LiveCluster, spark_server_state: Path, tmp_path: Path, ledger: Ledger
) -> None:
    topic = f"orders-rolling-{uuid.uuid4().hex[:8]}"
    broker.ensure_topic(kafka_cluster.bootstrap, topic, 3)
    lake = tmp_path / "lake"
    table = str(lake / "orders" / "bronze" / "raw_events")
    settings = {
        "EOS_KAFKA_BOOTSTRAP": kafka_cluster.bootstrap,
        "EOS_TOPICS": topic,
        "EOS_LAKE_ROOT": str(lake),
        "EOS_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
        # Runs share the session's warm Spark server (as `eos-assets spark up` serves them): a
        # run takes seconds, so the sensor launches several while the nodes restart.
        "EOS_STATE_DIR": str(spark_server_state),
        "EOS_SPARK_CONNECT": "local",
        "EOS_AGG_OUT_TOPIC": f"{topic}-out",
        # Any lag launches an ingest at the next tick; the mix has 2 % malformed records.
        "EOS_LAG_MAX_RECORDS": "1",
        "EOS_MALFORMED_MAX_RATE": "0.2",
    }
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    stop = threading.Event()
    restarts: list[tuple[float, float]] = []
    with dagster_dev.running(tmp_path, settings) as dev:
        # Silver and gold follow in the sensor's own runs; automation would add runs of its own.
        dagster_dev.stop_sensor(dev, dagster_dev.DOWNSTREAM_SENSOR)
        producer = Background(
            lambda: _produce_until(stop, kafka_cluster.bootstrap, topic, manifests)
        )
        try:
            _wait_for_cadence(dev)
            for node in (1, 2, 3):
                began = time.time()
                kafka_cluster.restart(node)
                restarts.append((began, time.time()))
        finally:
            stop.set()
            producer.join(120)
            kafka_cluster.revive()
        manifest = producer.result()
        catch_up_s = _caught_up(dev, table, manifest)
        runs = _runs(dev)
        ticks = dagster_dev.ticks(dev, limit=1000)
    rolling = (restarts[0][0], restarts[-1][1])
    during = [r for r in runs if r["startTime"] < rolling[1] and (r["endTime"] or 0) > rolling[0]]
    launched = [r for r in during if r["startTime"] > rolling[0]]
    failed = [t for t in ticks if t["status"] == "FAILURE"]
    ticked = [t for t in ticks if rolling[0] <= t["timestamp"] <= rolling[1]]
    verdict = judge(table, manifest)
    note = (
        f"{len(runs)} runs ({len(during)} during the restarts, {len(launched)} started then), "
        f"{len(ticked)} ticks during, "
        f"restarts {[round(b - a, 1) for a, b in restarts]} s, caught up {catch_up_s:.0f} s after"
    )
    print(f"rolling restart: {note}; {verdict}")
    fault = "3 nodes: rolling restart under dagster dev"
    ledger.record(fault, 3, verdict.lost, verdict.doubled, note)
    assert {r["status"] for r in runs} == {"SUCCESS"}, runs
    assert not failed, failed
    assert launched and ticked, f"no run started or tick ran during the restarts: {note}"
    assert verdict.exact, verdict
    assert not overlaps(table), overlaps(table)
