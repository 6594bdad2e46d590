"""The Dagster UI in a real browser: Debian's Chromium, headless, against the session's dagster dev.

Before the topic exists, the lag sensor's Automation page is opened and its latest tick clicked
(``waiting_ticks.png`` beside dagster dev's log).

After the lag sensor's ingest succeeded, the asset graph (bronze/raw_events and everything
downstream of it) and the asset checks page of bronze/raw_events are rendered; the test reads
the rendered DOM for the asset and check names and the check results, and keeps a screenshot
of each page in its temporary folder (``<tmp>/asset_graph.png``, ``<tmp>/checks.png``).
"""

from pathlib import Path

from eos_assets.definitions import defs
from eos_assets_tests.support import orders as checks
from eos_assets_tests.ui.chromium import render, shown, status_of
from eos_assets_tests.ui.conftest import DagsterDev, SensorRun

GRAPH = "/assets/orders/bronze/raw_events?view=lineage&lineageScope=downstream&lineageDepth=6"
CHECKS = f"/assets/orders/bronze/raw_events?view=checks&checkDetail={checks.OFFSETS_CONTIGUOUS}"


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


def test_before_the_topic_exists_the_sensor_page_shows_skipped_ticks_with_the_reason(
    dagster_dev: DagsterDev,
) -> None:
    """Between `make ui` and the first produce, as a user sees it: the Automation page of the
    lag sensor lists its ticks as skipped ("0 runs requested"), none failed, and a tick's
    details give the reason."""
    [page] = dagster_dev.waiting_pages
    lines = [line.strip() for line in page.splitlines()]
    assert lines.count("0 runs requested") >= 2, page
    assert "Failure" not in lines and "Traceback" not in page, page
    reason = f"Skip reason: waiting for topic {dagster_dev.topic!r} to be created"
    assert reason in page, page
