"""One real ``dagster dev`` (webserver + daemon) for the UI tests, and the run its sensor launches.

``dagster dev`` (``support/dagster_dev.py``) runs with only the settings environment: the session
broker, a fresh topic, a temporary lake.
"""

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from eos_assets.devkit import broker
from eos_assets_tests.support.dagster_dev import (
    DOWNSTREAM_SENSOR,
    SENSOR,
    STARTUP_S,
    DevProcess,
    running,
    sensor_runs,
    stop_sensor,
    ticks,
)
from eos_assets_tests.support.records import batch
from eos_assets_tests.support.txn_producer import Sent, send_transaction
from eos_assets_tests.ui.chromium import click_and_read

RUN_WAIT_S = 360.0


@dataclass(frozen=True)
class DagsterDev(DevProcess):
    """A running ``dagster dev`` and what it was started with."""

    topic: str = ""
    bootstrap: str = ""
    lake_root: Path = Path()
    # The lag sensor's ticks before the topic existed, then what was produced into it.
    waiting_ticks: list[dict] = field(default_factory=list)
    # The text of the sensor's page in Chromium at that moment, the latest tick's details
    # open (its screenshot is ``waiting_ticks.png`` beside the log).
    waiting_pages: list[str] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)


@pytest.fixture(scope="session")
def dagster_dev(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DagsterDev]:
    """``dagster dev -w workspace.yaml`` on a free port, its lag sensor on by default."""
    root = tmp_path_factory.mktemp("dagster_dev")
    # A new deployment: the topic does not exist until after dagster dev has started.
    topic = f"ui-{uuid.uuid4().hex[:8]}"
    settings = {
        "EOS_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "EOS_TOPICS": topic,
        "EOS_LAKE_ROOT": str(root / "lake"),
        "EOS_WAREHOUSE": str(root / "warehouse.duckdb"),
        "EOS_STATE_DIR": str(root / "state"),
        "EOS_SPARK_MASTER": "local[2]",
        # Any lag launches an ingest at the next tick.
        "EOS_LAG_MAX_RECORDS": "1",
    }
    with running(root, settings) as process:
        dev = DagsterDev(process.url, process.log, topic, kafka_bootstrap, root / "lake")
        # Declarative automation of silver and gold is proven by test_automation.py; here it
        # would start Spark runs of the whole graph that these tests do not wait for.
        stop_sensor(dev, DOWNSTREAM_SENSOR)
        dev.waiting_ticks.extend(_waiting_ticks(dev))
        dev.waiting_pages.append(_render_sensor_page(dev, root))
        broker.ensure_topic(kafka_bootstrap, topic, 2)
        dev.sent.append(send_transaction(kafka_bootstrap, topic, batch(40, 2)))
        yield dev


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
        runs = sensor_runs(dagster_dev)
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
