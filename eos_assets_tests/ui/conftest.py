"""One real ``dagster dev`` (webserver + daemon) for the UI tests, and the run its sensor launches.

``dagster dev`` runs on a free port with its own ``DAGSTER_HOME`` (a copy of
``deploy/dagster.local.yaml``) and only the settings environment: the session broker, a fresh topic,
a temporary lake. It is stopped with SIGTERM to its process group (what Ctrl-C in a terminal
does) and, if anything is still alive after a grace period, SIGKILL.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from eos_assets.devkit import broker
from eos_assets.lib.ports import port_free
from eos_assets_tests.support.records import batch
from eos_assets_tests.support.txn_producer import Sent, send_transaction
from eos_assets_tests.ui.chromium import click_and_read

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")
SENSOR = "orders_ingest_on_kafka_lag"
DOWNSTREAM_SENSOR = "follow_bronze_downstream"
STARTUP_S = 120.0
RUN_WAIT_S = 360.0


@dataclass(frozen=True)
class DagsterDev:
    """A running ``dagster dev`` and what it was started with."""

    url: str
    topic: str
    bootstrap: str
    lake_root: Path
    log: Path
    # The lag sensor's ticks before the topic existed, then what was produced into it.
    waiting_ticks: list[dict] = field(default_factory=list)
    # The text of the sensor's page in Chromium at that moment, the latest tick's details
    # open (its screenshot is ``waiting_ticks.png`` beside the log).
    waiting_pages: list[str] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        """POST a GraphQL request; returns ``data`` (fails the test on GraphQL errors)."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.load(response)
        assert not answer.get("errors"), answer["errors"]
        return answer["data"]

    def log_tail(self, chars: int = 4000) -> str:
        """The end of dagster dev's output, for failure messages."""
        return self.log.read_text(errors="replace")[-chars:]


def free_port() -> int:
    """A TCP port nothing listens on (the webserver binds it a moment later)."""
    for port in range(3300, 3400):
        if port_free(port):
            return port
    raise RuntimeError("no free port in 3300-3399")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with_group = os.getpgid(proc.pid)
    os.killpg(with_group, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(with_group, signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.killpg(with_group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    os.killpg(with_group, signal.SIGKILL)  # a straggler of the group (a run's step, Spark)


def _default_interrupts() -> None:
    # dagster dev maps SIGTERM to the SIGINT handler; a SIGINT inherited as ignored (a shell's
    # background job) would make it ignore SIGTERM too.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture(scope="session")
def dagster_dev(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DagsterDev]:
    """``dagster dev -w workspace.yaml`` on a free port, its lag sensor on by default."""
    root = tmp_path_factory.mktemp("dagster_dev")
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.local.yaml", home / "dagster.yaml")
    # A new deployment: the topic does not exist until after dagster dev has started.
    topic = f"ui-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_", "DAGSTER_"))}
    env.update(
        DAGSTER_HOME=str(home),
        EOS_KAFKA_BOOTSTRAP=kafka_bootstrap,
        EOS_TOPICS=topic,
        EOS_LAKE_ROOT=str(root / "lake"),
        EOS_WAREHOUSE=str(root / "warehouse.duckdb"),
        EOS_STATE_DIR=str(root / "state"),
        EOS_SPARK_MASTER="local[2]",
        # Any lag launches an ingest at the next tick.
        EOS_LAG_MAX_RECORDS="1",
    )
    log = root / "dagster_dev.log"
    command = [
        DAGSTER,
        "dev",
        "-w",
        str(REPO / "workspace.yaml"),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_default_interrupts,
        )  # fmt: skip
    dev = DagsterDev(f"http://127.0.0.1:{port}", topic, kafka_bootstrap, root / "lake", log)
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            assert proc.poll() is None, f"dagster dev exited early:\n{dev.log_tail()}"
            try:
                dev.graphql("{ version }")
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, f"dagster dev did not answer:\n{dev.log_tail()}"
                time.sleep(1)
        # Declarative automation of silver and gold is proven by test_automation.py; here it
        # would start Spark runs of the whole graph that these tests do not wait for.
        stop_sensor(dev, DOWNSTREAM_SENSOR)
        dev.waiting_ticks.extend(_waiting_ticks(dev))
        dev.waiting_pages.append(_render_sensor_page(dev, root))
        broker.ensure_topic(kafka_bootstrap, topic, 2)
        dev.sent.append(send_transaction(kafka_bootstrap, topic, batch(40, 2)))
        yield dev
    finally:
        _stop(proc)


SENSOR_ID = """
query Sensor($name: String!) {
  sensorOrError(sensorSelector: {repositoryName: "__repository__",
                                 repositoryLocationName: "eos_assets", sensorName: $name}) {
    ... on Sensor { id }
  }
}
"""
STOP_SENSOR = """
mutation Stop($id: String) {
  stopSensor(id: $id) { ... on StopSensorMutationResult { instigationState { status } } }
}
"""


def stop_sensor(dev: DagsterDev, name: str) -> None:
    """Turn a sensor off, as its toggle in the UI does."""
    sensor_id = dev.graphql(SENSOR_ID, {"name": name})["sensorOrError"]["id"]
    state = dev.graphql(STOP_SENSOR, {"id": sensor_id})["stopSensor"]["instigationState"]
    assert state["status"] == "STOPPED"


TICKS = """
query Ticks($name: String!) {
  sensorOrError(sensorSelector: {repositoryName: "__repository__",
                                 repositoryLocationName: "eos_assets", sensorName: $name}) {
    ... on Sensor { sensorState { ticks(limit: 50) { status skipReason error { message } } } }
  }
}
"""


def ticks(dev: DagsterDev, name: str = SENSOR) -> list[dict]:
    """The sensor's latest ticks, newest first: status, skip reason, error."""
    return dev.graphql(TICKS, {"name": name})["sensorOrError"]["sensorState"]["ticks"]


def _waiting_ticks(dev: DagsterDev) -> list[dict]:
    """Wait (bounded) for two ticks of the lag sensor while the topic does not exist."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        seen = [t for t in ticks(dev) if t["status"] != "STARTED"]
        if len(seen) >= 2:
            return seen
        assert time.monotonic() < deadline, f"fewer than 2 ticks: {seen}\n{dev.log_tail()}"
        time.sleep(1)


SENSOR_PAGE = f"/locations/eos_assets/sensors/{SENSOR}"


def _render_sensor_page(dev: DagsterDev, root: Path) -> str:
    """The lag sensor's page in Chromium with the latest tick's details open, as its text."""
    # What a first-time visitor dismisses with "Skip": the community sign-up dialog.
    assert dev.graphql("mutation { setNuxSeen }")["setNuxSeen"] is True
    return click_and_read(
        dev.url + SENSOR_PAGE,
        root / "chromium-profile",
        root / "waiting_ticks.png",
        click="0 runs requested",
        expect=f"waiting for topic {dev.topic!r}",
    )


RUNS = """
query SensorRuns($sensor: String!) {
  runsOrError(filter: {tags: [{key: "dagster/sensor_name", value: $sensor}]}) {
    ... on Runs { results { runId jobName status tags { key value } } }
  }
}
"""


@dataclass(frozen=True)
class SensorRun:
    """The run the lag sensor launched by itself, as the GraphQL API reports it."""

    run_id: str
    job_name: str
    status: str
    tags: dict[str, str]
    seconds: float


@pytest.fixture(scope="session")
def sensor_run(dagster_dev: DagsterDev) -> SensorRun:
    """Wait for the ingest run the lag sensor launches by itself to succeed (bounded)."""
    began = time.monotonic()
    deadline = began + RUN_WAIT_S
    while True:
        runs = dagster_dev.graphql(RUNS, {"sensor": SENSOR})["runsOrError"]["results"]
        for run in runs:
            assert run["status"] not in ("FAILURE", "CANCELED"), (
                f"run {run['runId']} {run['status']}:\n{dagster_dev.log_tail()}"
            )
            if run["status"] == "SUCCESS":
                tags = {t["key"]: t["value"] for t in run["tags"]}
                return SensorRun(
                    run["runId"],
                    run["jobName"],
                    run["status"],
                    tags,
                    time.monotonic() - began,
                )
        assert time.monotonic() < deadline, (
            f"no successful run from {SENSOR} within {RUN_WAIT_S:.0f}s (runs: {runs}):\n"
            f"{dagster_dev.log_tail()}"
        )
        time.sleep(2)
