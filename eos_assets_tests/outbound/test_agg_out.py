"""Window revisions reach ``agg-out`` exactly once for read_committed readers, whatever kills
the publisher and wherever: each (window, revision, is_final) the table ever held, once."""

import json
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from deltalake import DeltaTable

from eos_assets.lib import faults, outbound_position, outbound_publish
from eos_assets_tests.faults.harness import Ledger, finish, wait_for_files
from eos_assets_tests.outbound.conftest import (
    STATE,
    GoldLakes,
    history,
    run_outbound,
    windows_uri,
)


def published(read_committed: Callable, topic: str) -> list[dict[str, Any]]:
    """Every record of ``topic`` a read_committed consumer sees, value parsed, with offsets."""
    return [
        {**json.loads(v), "_partition": p, "_offset": o} for p, o, _, v in read_committed(topic)
    ]


def state(record: dict[str, Any]) -> tuple:
    """The (window, revision, is_final) a record carries, comparable with ``history``."""
    values = {k: record[k] for k in STATE}
    values["window_start"] = datetime.fromisoformat(values["window_start"])
    return tuple(values[k] for k in STATE)


def score(records: list[dict[str, Any]], want: dict[tuple, int]) -> tuple[int, int, int]:
    """(published twice, skipped, invented) against the table's history."""
    counts = Counter(state(r) for r in records)
    doubled = sum(n - 1 for n in counts.values() if n > 1)
    skipped = len(want.keys() - counts.keys())
    invented = len(counts.keys() - want.keys())
    return doubled, skipped, invented


def publish_args(table: str, bootstrap: str, topic: str, max_records: int = 5) -> list[str]:
    args = ["publish", "--table", table, "--bootstrap", bootstrap, "--topic", topic]
    return [*args, "--max-records", str(max_records)]


@pytest.mark.parametrize("point", outbound_publish.CRASH_POINTS)
def test_a_publisher_killed_at_any_point_and_rerun_publishes_each_revision_once(
    point: str,
    gold_lakes: GoldLakes,
    kafka_bootstrap: str,
    read_committed: Callable,
    tmp_path: Path,
    outbound_ledger: Ledger,
) -> None:
    table = windows_uri(gold_lakes.final)
    want = history(table)
    topic = f"agg-out-{point}-{uuid.uuid4().hex[:6]}"
    args = publish_args(table, kafka_bootstrap, topic)
    killed = run_outbound(*args, crash_at=point)
    assert killed.killed, killed.tail()
    before = published(read_committed, topic)
    rerun = run_outbound(*args)
    assert rerun.outcome and rerun.outcome["ok"], rerun.tail()
    records = published(read_committed, topic)
    doubled, skipped, invented = score(records, want)
    outbound_ledger.record(f"agg-out: publisher SIGKILL at {point}", 1, skipped, doubled)
    assert (doubled, skipped, invented) == (0, 0, 0)
    assert len(records) == len(want) > 50
    assert {state(r): r["delta_version"] for r in records} == want  # the version it came from
    assert rerun.outcome["fenced"], "the rerun fences the killed publisher's transactional id"
    if point == outbound_publish.AFTER_COMMIT:
        assert 0 < len(before) < len(want), "the first transaction was committed"
    else:
        assert before == [], "nothing of the killed run is visible"
    # A reader starting at each partition's first committed record (right after the killed
    # run's aborted transaction, if any) sees every record: no abort is reported to it.
    firsts = {p: min(_offsets(records, p)) for p in {r["_partition"] for r in records}}
    assert len(read_committed(topic, firsts)) == len(records)
    again = run_outbound(*args)
    assert again.outcome and again.outcome["records"] == 0 and again.outcome["ok"]
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
    first = outbound_publish.publish_windows(table, config, topic, 3, 25)
    assert first.records == len(history(table)) > 0
    gold_lakes.copy("final", lake)  # the next versions of the same table arrive
    second = outbound_publish.publish_windows(table, config, topic, 3, 25)
    assert second.first_version == first.table_version + 1
    assert "OPTIMIZE" in second.skipped_versions.values()
    want = history(table)
    assert second.records == len(want) - first.records > 0
    DeltaTable(table).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
    )
    third = outbound_publish.publish_windows(table, config, topic, 3, 25)
    assert third.records == 0
    assert {"VACUUM START", "VACUUM END"} <= set(third.skipped_versions.values())
    assert score(published(read_committed, topic), want) == (0, 0, 0)


def test_a_live_zombie_publisher_is_fenced_and_its_open_transaction_never_shows(
    gold_lakes: GoldLakes,
    kafka_bootstrap: str,
    read_committed: Callable,
    tmp_path: Path,
    outbound_ledger: Ledger,
) -> None:
    table = windows_uri(gold_lakes.final)
    topic = f"agg-out-zombie-{uuid.uuid4().hex[:6]}"
    args = publish_args(table, kafka_bootstrap, topic)
    point = outbound_publish.AFTER_SEND
    zombie = run_outbound(*args, pause_at=point, pause_dir=tmp_path, wait=False)
    wait_for_files(tmp_path, f"{point}-*.ready", 1, 90, zombie)  # its first transaction open
    config = {"bootstrap.servers": kafka_bootstrap}
    successor = outbound_publish.publish_windows(table, config, topic, 3, 25)
    (tmp_path / faults.RELEASE).touch()
    finish(zombie)
    assert zombie.outcome and not zombie.outcome["ok"], zombie.tail()
    assert "fenced" in zombie.outcome["error"]
    assert len(successor.fenced) == 1
    want = history(table)
    doubled, skipped, invented = score(published(read_committed, topic), want)
    outbound_ledger.record("agg-out: live zombie publisher", 1, skipped, doubled, "fenced")
    assert (doubled, skipped, invented) == (0, 0, 0)
    assert open_records(kafka_bootstrap, topic) == 0


def test_reinitializing_a_transactional_id_aborts_its_zombies_open_transaction(
    kafka_bootstrap: str, make_topic: Callable[..., str], read_committed: Callable
) -> None:
    topic = make_topic(partitions=1)
    tid = f"zombie-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": kafka_bootstrap}
    zombie = outbound_position.transactional_producer(config, tid)
    zombie.begin_transaction()
    for i in range(5):
        zombie.produce(topic, key=b"z", value=b"%d" % i)
    assert zombie.flush(30) == 0
    assert open_records(kafka_bootstrap, topic) == 5
    outbound_position.transactional_producer(config, tid)  # the successor's init fences it
    assert open_records(kafka_bootstrap, topic) == 0
    assert read_committed(topic) == []
    with pytest.raises(KafkaException) as refused:
        zombie.commit_transaction(30)
    assert refused.value.args[0].fatal()


def open_records(bootstrap: str, topic: str) -> int:
    """Records past the last stable offset: what open transactions hold back from readers."""
    total = 0
    for isolation, sign in (("read_uncommitted", 1), ("read_committed", -1)):
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "open", "isolation.level": isolation}
        )
        try:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            for p in partitions:
                tp = TopicPartition(topic, p)
                total += sign * consumer.get_watermark_offsets(tp, 10, cached=False)[1]
        finally:
            consumer.close()
    return total
