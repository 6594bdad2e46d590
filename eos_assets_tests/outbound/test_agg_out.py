"""Window revisions reach ``agg-out`` exactly once for read_committed readers, whatever kills
the publisher and wherever: each (window, revision, is_final) the table ever held, once."""

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.outbound import outbound_publish
from eos_assets_tests.outbound.conftest import (
    GoldLakes,
    Publishing,
    history,
    run_outbound,
    windows_uri,
)
from eos_assets_tests.support.agg_out import publish_args, published, score, state
from eos_assets_tests.support.committed import open_records


@pytest.mark.parametrize("point", outbound_publish.CRASH_POINTS)
def test_a_publisher_killed_at_any_point_and_rerun_publishes_each_revision_once(
    point: str, publishing: Publishing
) -> None:
    table, kafka_bootstrap = publishing.table, publishing.bootstrap
    read_committed = publishing.read_committed
    want = history(table)
    topic = publishing.topic(point)
    args = publish_args(table, kafka_bootstrap, topic)
    killed = run_outbound(*args, crash_at=point)
    assert killed.killed, killed.tail()
    before = published(read_committed, topic)
    left_open = open_records(kafka_bootstrap, topic)
    rerun = run_outbound(*args)
    assert rerun.outcome and rerun.outcome["ok"], rerun.tail()
    records = published(read_committed, topic)
    doubled, skipped, invented = score(records, want)
    publishing.ledger.record(f"agg-out: publisher SIGKILL at {point}", 1, skipped, doubled)
    assert (doubled, skipped, invented) == (0, 0, 0)
    assert len(records) == len(want) > 50
    assert {state(r): r["delta_version"] for r in records} == want  # the version it came from
    # Every run publishes under the same transactional id: the rerun's init_transactions
    # aborted what the killed run left open (its records wait past the last stable offset).
    assert rerun.outcome["transactional_id"] == outbound_publish.publisher_id(topic, table)
    assert (left_open > 0) == (point == outbound_publish.AFTER_SEND)
    assert open_records(kafka_bootstrap, topic) == 0
    if point == outbound_publish.AFTER_COMMIT:
        assert 0 < len(before) < len(want), "the first transaction was committed"
    else:
        assert before == [], "nothing of the killed run is visible"
    # A reader starting at each partition's first committed record (right after the killed
    # run's aborted transaction, if any) sees every record the same transactional id committed
    # after that abort.
    firsts = {p: min(_offsets(records, p)) for p in {r["_partition"] for r in records}}
    assert len(read_committed(topic, firsts)) == len(records)
    again = run_outbound(*args)
    assert again.outcome and again.outcome["records"] == 0 and again.outcome["ok"]
    assert again.outcome["transactional_id"] == rerun.outcome["transactional_id"]
    assert len(published(read_committed, topic)) == len(records)


def _offsets(records: list[dict[str, Any]], partition: int) -> list[int]:
    return sorted(r["_offset"] for r in records if r["_partition"] == partition)


def test_later_versions_are_published_once_and_compaction_and_vacuum_publish_nothing(
    gold_lakes: GoldLakes, kafka_bootstrap: str, read_committed: Callable, tmp_path: Path
) -> None:
    lake = gold_lakes.copy("early", tmp_path / "lake")
    table = windows_uri(lake)
    topic = f"agg-out-later-{uuid.uuid4().hex[:6]}"
    config = {"bootstrap.servers": kafka_bootstrap}
    first = outbound_publish.publish_windows(ORDERS.windows, table, config, topic, 3, 25)
    assert first.records == len(history(table)) > 0
    gold_lakes.copy("final", lake)  # the next versions of the same table arrive
    second = outbound_publish.publish_windows(ORDERS.windows, table, config, topic, 3, 25)
    assert second.first_version == first.table_version + 1
    assert "OPTIMIZE" in second.skipped_versions.values()
    want = history(table)
    assert second.records == len(want) - first.records > 0
    DeltaTable(table).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
    )
    third = outbound_publish.publish_windows(ORDERS.windows, table, config, topic, 3, 25)
    assert third.records == 0
    assert {"VACUUM START", "VACUUM END"} <= set(third.skipped_versions.values())
    assert score(published(read_committed, topic), want) == (0, 0, 0)
