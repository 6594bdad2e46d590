"""The Dagster UI in a real browser: Debian's Chromium, headless, against the session's dagster dev.

After the lag sensor's ingest succeeded, the asset graph (bronze/raw_events and everything
downstream of it) and the asset checks page of bronze/raw_events are rendered; the test reads
the rendered DOM for the asset and check names and the check results, and keeps a screenshot
of each page in its temporary folder (``<tmp>/asset_graph.png``, ``<tmp>/checks.png``).
"""

import os
import signal
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from eos_assets.definitions import defs
from eos_assets.defs import checks
from eos_assets_tests.ui.conftest import DagsterDev, SensorRun

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps calling home, which a closed
# network refuses; a fresh profile per test keeps runs independent.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--window-size=1600,1000",
    # Virtual time stands still while requests are pending: the React app's GraphQL answers
    # arrive and render before the page is captured.
    "--virtual-time-budget=20000",
]
ATTEMPTS = 4
GRAPH = "/assets/bronze/raw_events?view=lineage&lineageScope=downstream&lineageDepth=6"
CHECKS = f"/assets/bronze/raw_events?view=checks&checkDetail={checks.OFFSETS_CONTIGUOUS}"


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.texts.append(data.strip())


def texts(dom: str) -> list[str]:
    """Every text node of the rendered DOM."""
    parser = _Text()
    parser.feed(dom)
    return parser.texts


def shown(name: str, rendered: list[str]) -> bool:
    """True when ``name`` is rendered whole, or middle-truncated (``kpi_dai…_customers``)."""
    for text in rendered:
        head, sep, tail = text.partition("…")
        if text == name or (sep and name.startswith(head) and name.endswith(tail) and head):
            return True
    return False


def status_of(name: str, rendered: list[str]) -> str:
    """The first text rendered after ``name`` (its status in the list), lowercased."""
    after = False
    for text in rendered:
        if shown(name, [text]):
            after = True
        elif after:
            return text.lower()
    return ""


def chromium(profile: Path, *args: str) -> str:
    """Run headless Chromium once; its own process group is killed if it overruns."""
    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return out.decode(errors="replace")


def render(url: str, profile: Path, screenshot: Path, names: list[str]) -> list[str]:
    """The text of ``url`` once every name is rendered (a few tries), and a screenshot."""
    rendered: list[str] = []
    for _ in range(ATTEMPTS):
        rendered = texts(chromium(profile, "--dump-dom", url))
        if all(shown(n, rendered) for n in names):
            break
    chromium(profile, f"--screenshot={screenshot}", url)
    assert screenshot.stat().st_size > 10_000, f"empty screenshot of {url}"
    return rendered


def test_asset_graph_and_check_results_render_in_chromium(
    dagster_dev: DagsterDev, sensor_run: SensorRun, tmp_path: Path
) -> None:
    assert sensor_run.status == "SUCCESS"
    # What a first-time visitor dismisses with "Skip": the community sign-up dialog.
    assert dagster_dev.graphql("mutation { setNuxSeen }")["setNuxSeen"] is True
    profile = tmp_path / "chromium-profile"

    assets = sorted({key.path[-1] for key in defs.resolve_all_asset_keys()})
    graph = render(dagster_dev.url + GRAPH, profile, tmp_path / "asset_graph.png", assets)
    missing = [a for a in assets if not shown(a, graph)]
    assert not missing, f"assets not rendered in the graph: {missing}; page text: {graph[:80]}"
    assert "Join the Dagster community" not in graph

    names = [
        checks.OFFSETS_CONTIGUOUS,
        checks.MALFORMED_RATE,
        checks.FRESHNESS,
        checks.KAFKA_AUDIT,
    ]
    page = render(dagster_dev.url + CHECKS, profile, tmp_path / "checks.png", names)
    missing = [n for n in names if not shown(n, page)]
    assert not missing, f"checks not rendered: {missing}; page text: {page[:80]}"
    # The list shows each check's latest status under its name: the two checks of the ingest
    # run passed (the scheduled ones may or may not have run yet).
    for name in (checks.OFFSETS_CONTIGUOUS, checks.MALFORMED_RATE):
        assert status_of(name, page) == "succeeded", page
    assert "Passed" in page, page
    assert any("tile without hole or overlap" in t for t in page), page
    print(f"screenshots: {tmp_path / 'asset_graph.png'} {tmp_path / 'checks.png'}")
