"""Freshness judged on the data still waiting in Kafka, not on the last commit: the verdicts of
FreshnessReport on partition lags as ``lib.kafka.lag`` measures them, and last_ingest_ms on a
table written by hand; one test reads a real broker behind such a table."""

from pathlib import Path

from deltalake import DeltaTable

from eos_assets.lib.checks.freshness import FreshnessReport, bronze_freshness, last_ingest_ms
from eos_assets.lib.kafka.lag import PartitionLag
from eos_assets_tests.support.forged_log import append, ingest, read, rows
from eos_assets_tests.support.txn_producer import send_transaction

NOW = 1_800_000_000.0
DAY_MS = 86_400_000


def lag(
    partition: int, pending: int, oldest_s_ago: float | None, measured: bool = True
) -> PartitionLag:
    oldest = None if oldest_s_ago is None else int((NOW - oldest_s_ago) * 1000)
    return PartitionLag("t", partition, 100, 0, 100 + pending, 100, oldest, measured)


def test_a_quiet_topic_is_fresh_however_old_the_last_ingest() -> None:
    last_ingest = int(NOW * 1000) - 3 * DAY_MS
    report = FreshnessReport([lag(0, 0, None), lag(1, 0, None)], NOW, 60.0, last_ingest)
    assert report.ok
    assert report.summary() == "bronze is caught up: no committed record waits in Kafka"
    assert report.metadata()["seconds_since_last_ingest"] == 3 * 86_400
    assert report.ages() == {"t:0": 0.0, "t:1": 0.0}


def test_a_lagging_partition_is_stale_past_the_limit() -> None:
    report = FreshnessReport([lag(0, 5, 20.0), lag(1, 7, 120.0)], NOW, 60.0, None)
    assert not report.ok
    assert report.summary() == (
        "oldest record not yet in bronze is 120s old (t:1), over the 60s limit "
        "(EOS_FRESHNESS_MAX_AGE_S); total lag 12 offsets"
    )
    meta = report.metadata()
    assert (meta["max_age_s"], meta["lag_total"]) == (120.0, 12)
    assert meta["lag_by_partition"] == {"t:0": 5, "t:1": 7}
    assert meta["seconds_since_last_ingest"] is None
    assert FreshnessReport([lag(0, 5, 20.0)], NOW, 60.0, None).ok


def test_only_markers_pending_is_fresh_and_an_unanswered_age_is_not() -> None:
    markers = lag(0, 2, None)  # measured: the pending offsets hold no committed record
    assert FreshnessReport([markers], NOW, 60.0, None).ok
    unknown = lag(1, 4, None, measured=False)
    report = FreshnessReport([markers, unknown], NOW, 60.0, None)
    assert not report.ok
    assert report.ages() == {"t:0": 0.0, "t:1": None}
    assert report.summary().startswith("age unknown for t:1: Kafka did not answer the age read")


def test_last_ingest_is_the_latest_ingest_commit(tmp_path: Path) -> None:
    uri = str(tmp_path / "raw_events")
    append(uri, rows("t", 0, [0]))
    assert last_ingest_ms(DeltaTable(uri)) is None
    ingest(uri, read("t", 0, 1, 3))
    stamp = next(h["timestamp"] for h in DeltaTable(uri).history() if h["version"] == 1)
    append(uri, rows("t", 0, []), {"eos.operation": "optimize"})
    assert last_ingest_ms(DeltaTable(uri)) == stamp
    assert last_ingest_ms(DeltaTable(uri), limit=1) is None  # looks at the last version only


def test_bronze_freshness_measures_what_waits_in_kafka_behind_the_table(
    kafka_bootstrap: str, kafka_client_config: dict[str, str], make_topic, tmp_path: Path
) -> None:
    topic = make_topic(1)
    send_transaction(kafka_bootstrap, topic, [(0, b"k", b"v")] * 3)  # offsets 0-2, marker 3
    uri = str(tmp_path / "raw_events")
    ingest(uri, read(topic, 0, 0, 2))
    config = {**kafka_client_config, "bootstrap.servers": kafka_bootstrap}
    lagging = bronze_freshness(config, [topic], uri, DeltaTable(uri), 3600.0)
    assert lagging.ok, lagging.summary()
    assert [(lg.position, lg.end, lg.lag) for lg in lagging.lags] == [(2, 4, 2)]
    age = lagging.ages()[f"{topic}:0"]
    assert age is not None and 0 < age < 600
    assert not bronze_freshness(config, [topic], uri, DeltaTable(uri), age / 2).ok
    ingest(uri, read(topic, 0, 2, 4, [2]))
    caught_up = bronze_freshness(config, [topic], uri, DeltaTable(uri), 0.001)
    assert caught_up.ok and caught_up.summary().startswith("bronze is caught up")
