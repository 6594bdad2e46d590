"""A wrong declaration as the UI shows it: the code location's error is the one line naming the
file, the field and the fix, with no stack trace and no chain of causes.

``dagster-webserver`` serves ``eos_assets.definitions`` from a copy of the package; each case
writes its declaration into the copy's ``streams/`` and reloads the code location, as the
UI's "Reload" button does.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from eos_assets_tests.support.dagster_dev import REPO, free_port

WEBSERVER = str(Path(sys.executable).parent / "dagster-webserver")
STARTUP_S = 120.0

# What the UI asks for the error of a code location.
LOCATION = """
  name
  locationOrLoadError {
    __typename
    ... on PythonError { className message stack errorChain { error { message stack } } }
  }
"""
WORKSPACE = f"{{ workspaceOrError {{ ... on Workspace {{ locationEntries {{ {LOCATION} }} }} }} }}"
RELOAD = f"""
mutation {{
  reloadRepositoryLocation(repositoryLocationName: "eos_assets") {{
    ... on WorkspaceLocationEntry {{ {LOCATION} }}
  }}
}}
"""


@dataclass(frozen=True)
class Webserver:
    """A running ``dagster-webserver`` and the package copy it loads."""

    url: str
    package: Path
    log: Path

    def graphql(self, query: str) -> dict:
        """POST a GraphQL request; returns ``data`` (fails the test on GraphQL errors)."""
        body = json.dumps({"query": query}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = json.load(response)
        assert not answer.get("errors"), answer["errors"]
        return answer["data"]

    def location(self) -> dict:
        """The code location as the UI's workspace shows it."""
        entries = self.graphql(WORKSPACE)["workspaceOrError"]["locationEntries"]
        return next(e for e in entries if e["name"] == "eos_assets")["locationOrLoadError"]


def _interrupts_default() -> None:
    # A SIGTERM inherited as ignored (a shell's background job) would outlive the test.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the webserver's process group (its code server too), then SIGKILL."""
    os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def webserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webserver]:
    """``dagster-webserver`` on a copy of the code location, which loads before any case."""
    root = tmp_path_factory.mktemp("load_errors")
    package = root / "eos_assets"
    shutil.copytree(
        REPO / "eos_assets", package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.local.yaml", home / "dagster.yaml")
    workspace = root / "workspace.yaml"
    location = {"module_name": "eos_assets.definitions", "location_name": "eos_assets"}
    workspace.write_text(yaml.safe_dump({"load_from": [{"python_module": location}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), PYTHONPATH=str(root))
    port = free_port()
    command = [WEBSERVER, "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)]
    log = root / "webserver.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_interrupts_default,
        )  # fmt: skip
    server = Webserver(f"http://127.0.0.1:{port}", package, log)
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            assert proc.poll() is None, f"the webserver exited:\n{log.read_text()[-4000:]}"
            try:
                server.graphql("{ version }")
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, f"no answer:\n{log.read_text()[-4000:]}"
                time.sleep(1)
        # The copy is the real code location: as it is, it loads.
        assert server.location()["__typename"] == "RepositoryLocation", server.location()
        yield server
    finally:
        _stop(proc)


def _page_views_as(name: str, **replace: str) -> str:
    """The page_views example declared as another stream, with text replaced."""
    text = (REPO / "eos_assets" / "examples" / "page_views" / "defs.yaml").read_text()
    text = text.replace("name: page_views", f"name: {name}")
    text = text.replace("topics: [page_views]", f"topics: [{name}]")
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


SHIPPED = (REPO / "eos_assets" / "streams" / "orders" / "defs.yaml").read_text()
FORMAT = "    format: iso8601\n"
MISSPELT = "extra inputs are not permitted: remove it or fix its spelling"
CASES = {
    # Refused before Dagster's component loader runs.
    "a misspelt field of a new stream": (
        {"clicks": _page_views_as("clicks", **{"    format: epoch_millis": "    formatt: x"})},
        f"eos_assets/streams/clicks/defs.yaml: event_time.formatt: {MISSPELT}",
    ),
    # Refused by the component while Dagster's component loader builds it.
    "KPI SQL of a new stream naming no column": (
        {"clicks": _page_views_as("clicks", **{"avg(pages)": "avg(pagez)"})},
        "eos_assets/streams/clicks/defs.yaml: kpis.sessions.sql: Binder Error: Referenced column "
        '"pagez" not found in FROM clause!: write a SELECT over window_aggregates and '
        "entity_state with their declared columns",
    ),
    # Refused while the assets' modules are imported, before the declarations are loaded.
    "a misspelt field of the shipped stream": (
        {"orders": SHIPPED.replace(FORMAT, FORMAT.replace("format", "formatt"))},
        f"eos_assets/streams/orders/defs.yaml: event_time.formatt: {MISSPELT}",
    ),
}


@pytest.mark.services
@pytest.mark.parametrize("case", CASES)
def test_a_wrong_declaration_is_shown_as_one_line_without_a_stack_trace(
    webserver: Webserver, case: str
) -> None:
    declarations, line = CASES[case]
    streams = webserver.package / "streams"
    for folder in streams.iterdir():
        if folder.is_dir() and folder.name not in ("orders", "__pycache__"):
            shutil.rmtree(folder)
    (streams / "orders" / "defs.yaml").write_text(SHIPPED)
    for name, text in declarations.items():
        (streams / name).mkdir(exist_ok=True)
        (streams / name / "defs.yaml").write_text(text)

    reloaded = webserver.graphql(RELOAD)["reloadRepositoryLocation"]["locationOrLoadError"]
    shown = webserver.location()
    assert reloaded == shown
    assert shown == {
        "__typename": "PythonError",
        "className": "DeclarationError",
        "message": line,
        "stack": [],
        "errorChain": [],
    }, json.dumps(shown, indent=1)[:6000]
