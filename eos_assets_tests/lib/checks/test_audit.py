"""The verdicts of the Kafka audit from per-partition results: what passes, what fails and how
the line names it; and on the session's real broker, a declared start's offsets left unread."""

from pathlib import Path

import pyarrow as pa

from eos_assets.lib.checks.audit import AuditReport, PartitionAudit, audit_bronze, spans
from eos_assets_tests.support.forged_log import ingest, offsets_span, read
from eos_assets_tests.support.txn_producer import send_transaction


def test_offsets_are_listed_as_spans() -> None:
    assert spans([9, 3, 5, 4, 12, 11]) == ["3-5", "9", "11-12"]
    assert spans(range(0, 40, 2), limit=3) == ["0", "2", "4"]
    assert spans([]) == []


def clean(partition: int, position: int = 10, low: int = 0) -> PartitionAudit:
    return PartitionAudit("t", partition, low, position, max(position, low), kafka_records=8)


def test_a_complete_audit_without_discrepancy_passes() -> None:
    report = AuditReport([clean(0), clean(1)], 1.0, 300.0)
    assert report.ok and report.complete
    assert report.summary() == (
        "bronze matches the retained Kafka log: 16 committed records in 2 partitions, none "
        "lost, invented or altered"
    )


def test_missing_invented_and_altered_records_fail_with_their_first_offsets() -> None:
    hit = clean(1)
    hit.missing, hit.invented, hit.altered = [2, 3, 4], [7], [8, 9]
    report = AuditReport([clean(0), hit], 1.0, 300.0)
    assert (report.ok, report.discrepancies) == (False, 6)
    assert report.summary() == (
        "3 record(s) lost in bronze (first: t[1] offsets 2-4); "
        "1 record(s) invented in bronze (first: t[1] offsets 7); "
        "2 record(s) altered in bronze (first: t[1] offsets 8-9)"
    )
    assert report.metadata()["partitions"][1]["first_missing"] == ["2-4"]  # type: ignore[index]


def test_a_position_below_the_low_watermark_is_an_unacknowledged_loss() -> None:
    gone = clean(0, position=5, low=12)
    assert gone.unacknowledged == (5, 12)
    report = AuditReport([gone], 1.0, 300.0)
    assert (report.ok, report.unacknowledged) == (False, 7)
    assert report.summary().startswith(
        "7 offset(s) deleted by Kafka before they were ingested, not acknowledged (first: t[0] "
        "offsets [5, 12)): the next ingest stops there until run with accept_data_loss: true"
    )


def test_acknowledged_losses_and_declared_skips_pass_with_a_note() -> None:
    audit = clean(0, position=40, low=20)
    audit.acknowledged, audit.skipped = [(10, 20)], [(0, 5), (5, 10)]
    report = AuditReport([audit], 1.0, 300.0)
    assert report.ok
    assert (report.lost_offsets, report.skipped_offsets) == (10, 10)
    assert report.summary().endswith(
        "; 10 offset(s) Kafka deleted before they were ingested were acknowledged as lost "
        "(first: t[0] offsets [10, 20)); 10 offset(s) before the stream's declared start were "
        "skipped (first: t[0] offsets [0, 5))"
    )


def test_an_audit_stopped_by_its_budget_is_partial_and_never_passes() -> None:
    short = PartitionAudit("t", 2, 0, 100, 60)
    report = AuditReport([clean(0), short], 300.2, 300.0)
    assert (short.complete, report.complete, report.ok, report.discrepancies) == (
        False,
        False,
        False,
        0,
    )
    assert report.summary() == (
        "audit partial: 1 of 2 partitions not read to the end within the 300s budget "
        "(EOS_AUDIT_BUDGET_S), first t[2] up to offset 60 of 100"
    )


def bronze_rows(topic: str, offsets: list[int]) -> pa.Table:
    return pa.table(
        {
            "topic": [topic] * len(offsets),
            "partition": pa.array([0] * len(offsets), pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "key": [b"k"] * len(offsets),
            "value": [f"v{o}".encode() for o in offsets],
        }
    )


def test_offsets_before_a_declared_start_are_not_read_and_a_row_there_is_invented(
    kafka_bootstrap: str, kafka_client_config: dict[str, str], make_topic, tmp_path: Path
) -> None:
    topic = make_topic(1)
    for offsets in ([0, 1, 2], [4, 5]):  # each transaction ends with a marker: 3, then 6
        send_transaction(kafka_bootstrap, topic, [(0, b"k", f"v{o}".encode()) for o in offsets])
    uri = str(tmp_path / "raw_events")
    skip = offsets_span(topic, 0, 0, 4, reason="declared start", declared="latest")
    ingest(uri, read(topic, 0, 4, 7, [4, 5]), skipped=[skip])
    config = {**kafka_client_config, "bootstrap.servers": kafka_bootstrap}
    report = audit_bronze(config, [topic], uri, bronze_rows(topic, [4, 5]), 60.0)
    assert report.ok, report.summary()
    meta = report.metadata()
    assert (meta["kafka_records"], meta["bronze_rows"], meta["skipped_offsets"]) == (2, 2, 4)
    assert report.summary().endswith(
        f"4 offset(s) before the stream's declared start were skipped (first: {topic}[0] "
        "offsets [0, 4))"
    )
    # Offset 1 holds a committed record in Kafka, but bronze was declared to start after it.
    stray = audit_bronze(config, [topic], uri, bronze_rows(topic, [1, 4, 5]), 60.0)
    assert not stray.ok
    assert [p.invented for p in stray.partitions] == [[1]]
