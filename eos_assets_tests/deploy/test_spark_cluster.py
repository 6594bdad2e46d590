"""The whole asset graph on a real Spark standalone cluster (a master and two workers on
127.0.0.1), with the lake on S3 (the session's S3 server), produces exactly the oracle's tables,
bronze to DuckDB, with tasks on both workers. The executors write and read the store with
the credentials of their workers' environment (none is in the Spark settings) and the
endpoint the settings give them."""

import json
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from eos_assets.devkit import broker, s3server
from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets_tests.deploy.processes import get_json, start, stop, tail
from eos_assets_tests.deploy.spark_cluster import SparkCluster, cluster_env, spark_cluster
from eos_assets_tests.faults.oracle import judge
from eos_assets_tests.support import graph
from eos_assets_tests.support.oracle import expected
from eos_assets_tests.support.s3 import lake_env

RUN_TIMEOUT_S = 600
# The first job waits until both executors (one core each) are registered, so the ingest's
# tasks are offered to both workers from the start.
SUBMIT_ARGS = (
    "--conf spark.cores.max=2 --conf spark.executor.memory=1g "
    "--conf spark.scheduler.minRegisteredResourcesRatio=1.0 "
    "--conf spark.scheduler.maxRegisteredResourcesWaitingTime=120s "
    # Tasks with preferred locations (file blocks, shuffle outputs) would first wait 3 s per
    # locality level for a better slot: on one machine that is only delay.
    "--conf spark.locality.wait=0s pyspark-shell"
)


@pytest.fixture
def topic(kafka_bootstrap: str, tmp_path: Path) -> str:
    """A fresh topic of 4 partitions with duplicates, late, malformed and aborted records."""
    name = f"cluster-{uuid.uuid4().hex[:8]}"
    broker.ensure_topic(kafka_bootstrap, name, 4)
    options = ProduceOptions(
        topic=name, count=2000, partitions=4, seed=11, transaction_size=200,
        duplicate_ratio=0.03, late_ratio=0.02, abort_ratio=0.1, malformed_ratio=0.02,
        start_time=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
    )  # fmt: skip
    produce(kafka_bootstrap, options, tmp_path / "manifest.jsonl")
    return name


@contextmanager
def _graph_on_cluster(
    cluster: SparkCluster, settings: dict[str, str], root: Path
) -> Iterator[Callable[[], dict]]:
    """Start the graph on the cluster in a process of its own; yields a wait for its report.

    The process is stopped on exit, whatever happened meanwhile.
    """
    env = {k: v for k, v in cluster_env().items() if not k.startswith(("EOS_", "DAGSTER_"))}
    env.update(settings, EOS_SPARK_MASTER=cluster.master_url, PYSPARK_SUBMIT_ARGS=SUBMIT_ARGS)
    report, log = root / "report.json", root / "driver.log"
    command = [sys.executable, "-m", "eos_assets_tests.deploy.cluster_run", str(report)]
    proc = start(command, log, env)

    def wait() -> dict:
        code = proc.wait(timeout=RUN_TIMEOUT_S)
        driver = tail(log)
        assert report.exists(), f"no report (exit {code}):\n{driver}\n{cluster.logs()}"
        result = json.loads(report.read_text())
        assert code == 0 and result["success"], f"{result['failure']}\n{driver}"
        return result

    try:
        yield wait
    finally:
        stop(proc)


def _executors_by_worker(cluster: SparkCluster, app_id: str) -> dict[str, set[str]]:
    """Executor ids of the application on each worker, from the workers' own status pages."""
    out = {}
    for worker in cluster.workers:
        state = get_json(f"{worker.ui}/json/")
        every = state.get("executors", []) + state.get("finishedexecutors", [])
        out[worker.ui] = {str(e["id"]) for e in every if e["appid"] == app_id}
    return out


def test_the_graph_on_a_standalone_cluster_with_the_lake_on_s3_gives_the_oracles_tables(
    kafka_bootstrap: str,
    topic: str,
    s3_server: s3server.S3Info,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    remote = tmp_path / "cluster"
    remote.mkdir()
    lake = lake_env(s3_server)  # EOS_LAKE_ROOT=s3://... and the README's AWS variables
    settings = {
        **lake,
        "EOS_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "EOS_TOPICS": topic,
        "EOS_WAREHOUSE": str(remote / "warehouse.duckdb"),
        "EOS_STATE_DIR": str(remote / "state"),
    }
    # The workers' own credentials (a cluster's machines have theirs, e.g. an instance
    # profile), inherited by their executors; the store's address reaches the executors
    # through the Spark settings (spark.executorEnv).
    keys = {k: lake[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    with (
        spark_cluster(tmp_path / "spark", workers=2, cores=1, memory="2g", env=keys) as cluster,
        _graph_on_cluster(cluster, settings, remote) as cluster_report,
    ):
        report = cluster_report()
        by_worker = _executors_by_worker(cluster, report["app_id"])

    assert report["master"] == cluster.master_url
    # Every executor ran this project's interpreter (no PYSPARK_PYTHON was set).
    assert report["pythons"] == [sys.executable]
    assert all(by_worker.values()), f"a worker ran no executor of the app: {by_worker}"
    worker_of = {e: ui for ui, ids in by_worker.items() for e in ids}
    ingest = Counter[str]()
    for executor, count in report["ingest_tasks"].items():
        ingest[worker_of[executor]] += count
    assert set(ingest) == set(by_worker), f"ingest tasks per worker: {dict(ingest)}"
    assert report["ingest_jobs"], "the bronze ingest ran no Spark job"
    tasks = Counter[str]()
    for executor, info in report["executors"].items():
        tasks[worker_of[executor]] += info["totalTasks"]
    assert all(tasks[ui] > 0 for ui in by_worker), f"tasks per worker: {dict(tasks)}"

    secret = lake["AWS_SECRET_ACCESS_KEY"]
    assert not [k for k, v in report["settings"].items() if secret in v], "a key in the settings"

    for name, value in lake.items():  # to read the store from this process
        monkeypatch.setenv(name, value)
    on_s3 = lake["EOS_LAKE_ROOT"]
    manifest = read_manifest(tmp_path / "manifest.jsonl")
    verdict = judge(f"{on_s3}/orders/bronze/raw_events", manifest)
    assert verdict.exact, verdict
    window = graph.STREAM.window
    want = expected([manifest], window.size, window.grace)
    graph.assert_matches_oracle(on_s3, want, remote / "warehouse.duckdb")
    print(f"\nexecutors per worker {by_worker}; ingest tasks {dict(ingest)}; tasks {dict(tasks)}")
