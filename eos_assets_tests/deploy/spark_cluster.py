"""A real Spark standalone cluster on 127.0.0.1: one master and its workers, started with the
``spark-class`` launcher that ships in the pyspark package, stopped by process group."""

import os
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark

from eos_assets_tests.deploy.processes import free_port, get_json, start, stop, tail

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STARTUP_S = 90.0


@dataclass(frozen=True)
class Worker:
    """One worker: its web UI (``/json`` lists its executors) and its log."""

    ui: str
    log: Path


@dataclass(frozen=True)
class SparkCluster:
    """A running standalone cluster."""

    master_url: str
    master_ui: str
    master_log: Path
    workers: tuple[Worker, ...]

    def master_state(self) -> dict[str, Any]:
        """The master's status document (workers, applications)."""
        return get_json(f"{self.master_ui}/json/")

    def logs(self) -> str:
        """The end of every daemon's log, for failure messages."""
        parts = [f"--- master\n{tail(self.master_log)}"]
        parts += [f"--- worker {w.ui}\n{tail(w.log)}" for w in self.workers]
        return "\n".join(parts)


def cluster_env() -> dict[str, str]:
    """Environment of the daemons and of a driver: every address on the loopback interface."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    # Without it each JVM advertises the host name, which may resolve to another interface.
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    # The master's REST submission server would take a fixed port (6066): not needed here.
    env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
    return env


@contextmanager
def spark_cluster(
    root: Path,
    workers: int = 2,
    cores: int = 1,
    memory: str = "2g",
    env: Mapping[str, str] | None = None,
) -> Iterator[SparkCluster]:
    """Start a master and ``workers`` workers under ``root``; stop them all on exit, always.

    ``env`` adds to the daemons' environment, which their executors inherit (as the machines
    of a cluster give theirs, e.g. the object store's credentials).
    """
    root.mkdir(parents=True, exist_ok=True)
    env = {**cluster_env(), **(env or {})}
    port, ui_port = free_port(), free_port()
    cluster = SparkCluster(
        master_url=f"spark://127.0.0.1:{port}",
        master_ui=f"http://127.0.0.1:{ui_port}",
        master_log=root / "master.log",
        workers=tuple(
            Worker(f"http://127.0.0.1:{free_port()}", root / f"worker-{n}.log")
            for n in range(workers)
        ),
    )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        command = [str(SPARK_CLASS), MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port)]
        command += ["--webui-port", str(ui_port)]
        procs.append(start(command, cluster.master_log, env))
        for n, worker in enumerate(cluster.workers):
            work_dir = root / f"work-{n}"
            work_dir.mkdir()
            command = [str(SPARK_CLASS), WORKER_CLASS, "--host", "127.0.0.1"]
            command += ["--webui-port", worker.ui.rsplit(":", 1)[1], "--cores", str(cores)]
            command += ["--memory", memory, "--work-dir", str(work_dir), cluster.master_url]
            procs.append(start(command, worker.log, env))
        _wait_alive(cluster, procs, workers)
        yield cluster
    finally:
        for proc in reversed(procs):
            stop(proc)


def _wait_alive(cluster: SparkCluster, procs: list[subprocess.Popen[bytes]], workers: int) -> None:
    deadline = time.monotonic() + STARTUP_S
    while True:
        exited = [p.args for p in procs if p.poll() is not None]
        assert not exited, f"Spark daemons exited early: {exited}\n{cluster.logs()}"
        try:
            state = cluster.master_state()
            if state["status"] == "ALIVE" and state["aliveworkers"] == workers:
                return
        except (OSError, ValueError):
            # Not listening yet, or listening but not every page attached yet: the web UI
            # starts serving before it attaches its handlers one by one, so for a moment
            # ``/json/`` falls through to the HTML root page.
            pass
        assert time.monotonic() < deadline, f"no cluster of {workers} workers\n{cluster.logs()}"
        time.sleep(1)
