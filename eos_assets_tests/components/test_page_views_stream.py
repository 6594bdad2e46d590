"""The second shipped example, page views (``eos_assets/examples/page_views``), end to end on
the same machinery as orders: the demo producer's page views through the real broker, then
bronze, silver, session state, windows and the served KPIs, each equal to the oracle computed
in plain Python from what the producer committed (``page_views_oracle.py``)."""

import math
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import duckdb
from deltalake import DeltaTable

from eos_assets import examples
from eos_assets.declaration import StreamModel, read_declaration
from eos_assets.devkit.manifest import read_manifest
from eos_assets.devkit.producer import ProduceOptions, produce
from eos_assets_tests.support import page_views_oracle as oracle
from eos_assets_tests.support.declared import run_stream

START = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def test_page_views_are_ingested_and_served_as_the_oracle_says(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    spark,
    lake_root: str,
    tmp_path: Path,
) -> None:
    topic = make_topic(partitions=3)
    shipped = read_declaration(examples.declaration("page_views"))
    model = StreamModel.model_validate({**shipped.model_dump(mode="json"), "topics": [topic]})
    manifest = tmp_path / "views.jsonl"
    options = ProduceOptions(
        stream="page_views",
        topic=topic,
        count=1500,
        seed=11,
        start_time=START,
        transaction_size=100,
        duplicate_ratio=0.07,
        malformed_ratio=0.02,
        abort_ratio=0.1,
    )
    produce(kafka_bootstrap, options, manifest)
    want = oracle.expected(oracle.committed(read_manifest(manifest)))
    warehouse = tmp_path / f"serving-{uuid.uuid4().hex[:6]}.duckdb"

    parts, result = run_stream(model, kafka_bootstrap, lake_root, warehouse)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    checks.pop("malformed_rate_below_threshold")  # 2% malformed warns above 1%: by design
    assert checks and all(checks.values()), checks

    def table(key) -> list[dict]:
        return DeltaTable(f"{lake_root}/{'/'.join(key.path)}").to_pyarrow_table().to_pylist()

    stream = parts.stream
    assert {r["event_id"] for r in table(stream.events)} == want.views.keys()
    state = {r["session_id"]: r for r in table(stream.entity_state)}
    assert state.keys() == want.sessions.keys()
    for session, expected in want.sessions.items():
        got = state[session]
        assert {k: got[k] for k in expected} == expected, session
    windows = {(r["window_start"], r["page"]): r for r in table(stream.window_aggregates)}
    assert windows.keys() == want.windows.keys()
    for key, expected in want.windows.items():
        assert {k: windows[key][k] for k in expected} == expected, key

    with duckdb.connect(str(warehouse), read_only=True) as con:
        sessions, pages, bounce = con.execute(
            "SELECT sessions, pages_per_session, bounce_rate FROM page_views.sessions"
        ).fetchone() or (None, None, None)
        by_hour = con.execute(
            "SELECT hour, page, views, sessions FROM page_views.views_by_page_hour"
        ).fetchall()
        kept = con.execute(
            "SELECT window_start, page, window_end, views, sessions, time_ms, ms_per_view, "
            "revision FROM page_views.views_by_hour"
        ).fetchall()
    assert sessions == want.kpi_sessions["sessions"]
    assert pages is not None and math.isclose(pages, want.kpi_sessions["pages_per_session"])
    assert bounce is not None and math.isclose(bounce, want.kpi_sessions["bounce_rate"])
    served = {(hour, page): {"views": v, "sessions": s} for hour, page, v, s in by_hour}
    assert served == want.kpi_views_by_page_hour
    # The hourly KPI table kept from the events: served as Delta holds it, each row equal to
    # the oracle (exact distinct sessions per hour and page), and checked by the served-copy
    # check like every stream's.
    names = ("window_end", "views", "sessions", "time_ms", "ms_per_view")
    hourly = {(r[0].astimezone(UTC), r[1]): dict(zip(names, r[2:7], strict=True)) for r in kept}
    assert hourly.keys() == want.kpi_views_by_hour.keys()
    for key, expected in want.kpi_views_by_hour.items():
        got = hourly[key]
        assert math.isclose(got.pop("ms_per_view"), expected["ms_per_view"]), key
        assert got == {k: v for k, v in expected.items() if k != "ms_per_view"}, key
    assert all(r[7] >= 1 for r in kept)
    assert "duckdb_matches_delta" in checks

    # A second run with nothing new in Kafka changes no table.
    versions = {
        k: DeltaTable(f"{lake_root}/{'/'.join(k.path)}").version()
        for k in (stream.raw_events, stream.events, stream.entity_state, stream.window_aggregates)
    }
    _, again = run_stream(model, kafka_bootstrap, lake_root, warehouse)
    assert again.success
    assert versions == {
        k: DeltaTable(f"{lake_root}/{'/'.join(k.path)}").version() for k in versions
    }
