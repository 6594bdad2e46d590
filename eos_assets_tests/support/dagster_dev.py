"""A real ``dagster dev`` (webserver + daemon) in a process group of its own, and its GraphQL API.

It runs on a free port with its own ``DAGSTER_HOME`` (a copy of ``deploy/dagster.local.yaml``)
and only the settings it is given as ``EOS_*`` environment. It is stopped with SIGTERM to its
process group (what Ctrl-C in a terminal does) and, if anything is still alive after a grace
period, SIGKILL.
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from eos_assets.lib import ports

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")
SENSOR = "orders_ingest_on_kafka_lag"
DOWNSTREAM_SENSOR = "follow_bronze_downstream"
STARTUP_S = 120.0


@dataclass(frozen=True)
class DevProcess:
    """A running ``dagster dev``: its address and the file its output goes to."""

    url: str
    log: Path

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
    """A TCP port nothing listens on, chosen by the kernel (the webserver binds it a moment
    later). Not the first free one of a fixed range: a process beside this one (another
    worker's test) may be about to bind that one too."""
    return ports.free_port()


@contextlib.contextmanager
def running(root: Path, settings: Mapping[str, str]) -> Iterator[DevProcess]:
    """``dagster dev -w workspace.yaml`` with ``settings`` (``EOS_*``) and ``root/dagster_home``;
    yields once its webserver answers, stops it on exit."""
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.local.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), **settings)
    port = free_port()
    log = root / "dagster_dev.log"
    command = [DAGSTER, "dev", "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1"]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, "-p", str(port)], cwd=root, env=env, stdout=out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_default_interrupts,
        )  # fmt: skip
    dev = DevProcess(f"http://127.0.0.1:{port}", log)
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
        yield dev
    finally:
        _stop(proc)


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


def stop_sensor(dev: DevProcess, name: str) -> None:
    """Turn a sensor off, as its toggle in the UI does."""
    sensor_id = dev.graphql(SENSOR_ID, {"name": name})["sensorOrError"]["id"]
    state = dev.graphql(STOP_SENSOR, {"id": sensor_id})["stopSensor"]["instigationState"]
    assert state["status"] == "STOPPED"


TICKS = """
query Ticks($name: String!, $limit: Int) {
  sensorOrError(sensorSelector: {repositoryName: "__repository__",
                                 repositoryLocationName: "eos_assets", sensorName: $name}) {
    ... on Sensor {
      sensorState { ticks(limit: $limit) { status timestamp skipReason error { message } } }
    }
  }
}
"""


def ticks(dev: DevProcess, name: str = SENSOR, limit: int = 50) -> list[dict]:
    """The sensor's latest ticks, newest first: status, timestamp, skip reason, error."""
    found = dev.graphql(TICKS, {"name": name, "limit": limit})["sensorOrError"]
    return found["sensorState"]["ticks"]


RUNS = """
query SensorRuns($sensor: String!) {
  runsOrError(filter: {tags: [{key: "dagster/sensor_name", value: $sensor}]}) {
    ... on Runs { results { runId jobName status startTime endTime tags { key value } } }
  }
}
"""


def sensor_runs(dev: DevProcess, sensor: str = SENSOR) -> list[dict]:
    """Every run ``sensor`` launched, newest first: id, job, status, start and end, tags."""
    return dev.graphql(RUNS, {"sensor": sensor})["runsOrError"]["results"]
