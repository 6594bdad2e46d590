"""`dg` on a fresh copy of the project: a new stream scaffolded with `dg scaffold defs` loads as
it is; `dg list defs` lists every stream's assets, checks, jobs, sensors and schedules; `dg
check yaml` and `dg check defs` pass; `dg dev` serves the same code location as `make ui`.
"""

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from eos_assets_tests.support.dagster_dev import free_port
from eos_assets_tests.support.project_copy import BIN, ProjectCopy, copy_project

TYPE = "eos_assets.components.EventStream"
STARTUP_S = 180.0
LOCATION = """{ workspaceOrError { ... on Workspace { locationEntries { name
  locationOrLoadError { __typename ... on RepositoryLocation { repositories {
    jobs { name } sensors { name } } } ... on PythonError { message } } } } } }"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> ProjectCopy:
    """A copy of the project with a second stream, ``readings``, scaffolded by `dg`."""
    copy = copy_project(tmp_path_factory.mktemp("dg_project"))
    scaffolded = copy.run("dg", "scaffold", "defs", TYPE, "readings")
    assert scaffolded.returncode == 0, scaffolded.stdout + scaffolded.stderr
    return copy


@pytest.mark.slow
def test_a_scaffolded_stream_loads_and_dg_lists_and_checks_every_stream(
    project: ProjectCopy,
) -> None:
    skeleton = (project.streams / "readings" / "defs.yaml").read_text()
    assert f"type: {TYPE}" in skeleton and "name: readings" in skeleton
    commented = [line for line in skeleton.splitlines() if line.strip().startswith("#")]
    assert len(commented) >= 8, skeleton
    with ThreadPoolExecutor(max_workers=3) as pool:
        listed, yaml_ok, defs_ok = pool.map(
            lambda argv: project.run(*argv),
            [("dg", "list", "defs", "--json"), ("dg", "check", "yaml"), ("dg", "check", "defs")],
        )
    for result in (yaml_ok, defs_ok):
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Warning" not in result.stdout + result.stderr, result.stderr
    assert listed.returncode == 0, listed.stderr
    defs = json.loads(listed.stdout)
    assets = {a["asset_key"] for a in defs["assets"]}
    checks = {c["key"] for c in defs["asset_checks"]}
    names = {section: {d["name"] for d in defs[section]} for section in ("jobs", "sensors")}
    schedules = {s["name"] for s in defs["schedules"]}
    for stream in ("orders", "readings"):
        assert {f"{stream}/bronze/raw_events", f"{stream}/serving/kpis"} <= assets, assets
        assert f"{stream}/bronze/raw_events:offsets_contiguous" in checks, checks
        assert f"{stream}__ingest_and_refresh" in names["jobs"]
        assert f"{stream}_ingest_on_kafka_lag" in names["sensors"]
        assert f"{stream}_check_bronze_freshness_every_15_min" in schedules
    assert {"ingest_and_refresh", "materialize_all"} <= names["jobs"]


def _graphql(url: str, query: str) -> dict:
    body = json.dumps({"query": query}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)["data"]


@pytest.mark.slow
def test_dg_dev_serves_the_code_location_of_make_ui(project: ProjectCopy) -> None:
    port = free_port()
    log = project.root / "dg_dev.log"
    command = [str(BIN / "dg"), "dev", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, cwd=project.root, env=project.env(), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + STARTUP_S
        url = f"http://127.0.0.1:{port}/graphql"
        while True:
            assert proc.poll() is None, f"dg dev exited:\n{log.read_text()[-4000:]}"
            with contextlib.suppress(urllib.error.URLError, ConnectionError):
                (entry,) = _graphql(url, LOCATION)["workspaceOrError"]["locationEntries"]
                if entry["locationOrLoadError"] is not None:
                    break
            assert time.monotonic() < deadline, f"no code location:\n{log.read_text()[-4000:]}"
            time.sleep(1)
        assert entry["name"] == "eos_assets", entry
        loaded = entry["locationOrLoadError"]
        assert loaded["__typename"] == "RepositoryLocation", loaded
        (repository,) = loaded["repositories"]
        jobs = {job["name"] for job in repository["jobs"]}
        assert {"orders__ingest_and_refresh", "readings__ingest_and_refresh"} <= jobs, jobs
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert "Warning" not in log.read_text(), log.read_text()[-4000:]


def test_the_scaffolder_names_the_stream_after_its_folder(tmp_path: Path) -> None:
    from eos_assets.components.scaffold import stream_name
    from eos_assets.declaration import NAME

    assert stream_name("readings") == "readings"
    assert stream_name("Page-Views") == "page_views"
    assert NAME.match(stream_name("2fast"))
