"""The bronze asset checks, each proven by breaking a real table on purpose.

One bronze table is ingested for the module from a real broker with Spark; each test copies
it, breaks the copy with delta-rs (duplicate a row, delete an offset range, forge a commit,
invent or alter a record) and sees the check fail with a message and metadata naming it.
"""

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from dagster_pyspark import LazyPySparkResource
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit import broker
from eos_assets.lib.checks.audit import spans
from eos_assets.lib.delta import delta_io
from eos_assets.lib.ingest.ingest import ingest_bronze
from eos_assets.lib.spark.spark_env import spark_config
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.support import orders as checks
from eos_assets_tests.support.bronze_runs import evaluate
from eos_assets_tests.support.orders import RAW_EVENTS, raw_events
from eos_assets_tests.support.records import batch
from eos_assets_tests.support.txn_producer import Sent, send_transaction

BROKEN_JSON = (0, b"bad", b"{not json")


@dataclass(frozen=True)
class Bronze:
    """A bronze table ingested from ``topic``, with what was sent."""

    topic: str
    bootstrap: str
    lake_root: Path
    sent: list[Sent]

    @property
    def uri(self) -> str:
        return str(self.lake_root / "orders" / "bronze" / "raw_events")

    def copy(self, target: Path) -> "Bronze":
        """A copy of the lake (the table folder and its log) under ``target``."""
        shutil.copytree(self.lake_root, target / "lake")
        return Bronze(self.topic, self.bootstrap, target / "lake", self.sent)

    def lake(self) -> LakeResource:
        return LakeResource(root=str(self.lake_root))

    def kafka(self) -> KafkaResource:
        return KafkaResource(bootstrap_servers=self.bootstrap, topics=[self.topic])


@pytest.fixture(scope="module")
def bronze(
    spark: SparkSession, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Bronze:
    """Two ingest commits over 3 partitions: committed, aborted and malformed records."""
    topic = f"checks-{uuid.uuid4().hex[:8]}"
    broker.ensure_topic(kafka_bootstrap, topic, 3)
    lake_root = tmp_path_factory.mktemp("checks") / "lake"
    sent = [
        send_transaction(kafka_bootstrap, topic, batch(30, 3)),
        send_transaction(kafka_bootstrap, topic, batch(9, 3, first=30), commit=False),
        send_transaction(kafka_bootstrap, topic, [*batch(12, 3, first=40), BROKEN_JSON]),
    ]
    uri = str(lake_root / "orders" / "bronze" / "raw_events")
    config = {"bootstrap.servers": kafka_bootstrap}
    assert ingest_bronze(spark, uri, [topic], config, contract=ORDERS.contract).version == 1
    sent.append(send_transaction(kafka_bootstrap, topic, batch(15, 3, first=60)))
    assert ingest_bronze(spark, uri, [topic], config, contract=ORDERS.contract).version == 2
    return Bronze(topic, kafka_bootstrap, lake_root, sent)


@pytest.fixture
def broken(bronze: Bronze, tmp_path: Path) -> Bronze:
    """A private copy of the module's bronze table, free to break."""
    return bronze.copy(tmp_path)


def contiguity(b: Bronze) -> dg.AssetCheckResult:
    return evaluate(checks.offsets_contiguous, lake=b.lake())


def meta(result: dg.AssetCheckResult) -> dict:
    return {k: v.value for k, v in result.metadata.items()}


def rows_of(b: Bronze, partition: int) -> pa.Table:
    t = delta_io.read_arrow(b.uri)
    return t.filter(pc.field("partition") == partition).sort_by("offset")


def test_every_check_passes_on_a_clean_table(bronze: Bronze, monkeypatch) -> None:
    monkeypatch.setenv("EOS_MALFORMED_MAX_RATE", "0.05")
    result = contiguity(bronze)
    assert result.passed, result.description
    m = meta(result)
    # 57 committed records; 9 aborted records + 3 abort and 9 commit markers are gaps.
    assert (m["rows"], m["ranges"], m["partitions"], m["gaps"]) == (58, 6, 3, 21)
    assert "tile without hole or overlap" in (result.description or "")
    assert evaluate(checks.malformed_rate_below_threshold, lake=bronze.lake()).passed  # type: ignore[call-arg]
    fresh = evaluate(checks.fresh_within_max_age, lake=bronze.lake(), kafka=bronze.kafka())
    assert fresh.passed, fresh.description
    audit = evaluate(checks.matches_kafka_log, lake=bronze.lake(), kafka=bronze.kafka())
    assert audit.passed, audit.description
    assert (meta(audit)["kafka_records"], meta(audit)["complete"]) == (58, True)


def test_contiguity_fails_on_a_duplicated_row(broken: Bronze) -> None:
    row = rows_of(broken, 1).slice(4, 1)
    write_deltalake(broken.uri, row, mode="append")
    result = contiguity(broken)
    assert not result.passed
    offset = row["offset"][0].as_py()
    assert (
        f"1 duplicated (topic, partition, offset) (first: {broken.topic}[1] offset {offset} x2)"
        in (result.description or "")
    )
    m = meta(result)
    assert m["duplicate_offsets"] == 1 and len(m["count_mismatches"]) == 1


def test_contiguity_fails_when_an_offset_range_is_deleted(broken: Bronze) -> None:
    offsets = rows_of(broken, 2)["offset"].to_pylist()[2:5]
    DeltaTable(broken.uri).delete(
        f'"partition" = 2 AND "offset" >= {offsets[0]} AND "offset" <= {offsets[-1]}'
    )
    result = contiguity(broken)
    assert not result.passed
    (mismatch,) = meta(result)["count_mismatches"]
    assert mismatch.startswith(f"{broken.topic}[2] range [0, ") and "holds" in mismatch
    assert "row count differs" in (result.description or "")


def forge_ingest(b: Bronze, rows: pa.Table, ranges: list[dict], position: int) -> None:
    """Commit ``rows`` as if an ingest had read ``ranges`` (a broken writer, on purpose)."""
    props = CommitProperties(
        custom_metadata={"eos.operation": "ingest", "eos.ranges": ranges},  # type: ignore[dict-item]
        app_transactions=[Transaction(f"eos:{b.topic}:{r['partition']}", position) for r in ranges],
    )
    write_deltalake(b.uri, rows, mode="append", commit_properties=props)


def test_contiguity_fails_on_a_hole_between_ranges(broken: Bronze) -> None:
    end = DeltaTable(broken.uri).transaction_version(f"eos:{broken.topic}:0")
    assert end is not None
    row = rows_of(broken, 0).slice(0, 1)
    moved = row.set_column(2, "offset", pa.array([end + 10], pa.int64()))
    forge_ingest(broken, moved, [_range(broken.topic, 0, end + 10, end + 11, 1)], end + 11)
    result = contiguity(broken)
    assert not result.passed
    assert meta(result)["holes"] == [
        f"{broken.topic}[0] offsets [{end}, {end + 10}) between the ranges of versions 2 and 3"
    ]
    assert (meta(result)["overlaps"], meta(result)["count_mismatches"]) == ([], [])


def test_contiguity_fails_on_overlapping_ranges(broken: Bronze) -> None:
    end = DeltaTable(broken.uri).transaction_version(f"eos:{broken.topic}:0")
    assert end is not None
    forge_ingest(broken, rows_of(broken, 0).slice(0, 2), [_range(broken.topic, 0, 0, 2, 2)], end)
    result = contiguity(broken)
    assert not result.passed
    m = meta(result)
    assert m["overlaps"] == [f"{broken.topic}[0] offsets [0, 2) committed by versions 1 and 3"]
    assert (m["holes"], m["duplicate_offsets"]) == ([], 2)
    assert "1 overlapping range(s)" in (result.description or "")


def _range(topic: str, partition: int, start: int, end: int, records: int) -> dict:
    return {
        "topic": topic,
        "partition": partition,
        "start": start,
        "end": end,
        "records": records,
        "malformed": 0,
        "gaps": end - start - records,
    }


def test_contiguity_fails_on_a_row_outside_every_range(broken: Bronze) -> None:
    row = rows_of(broken, 1).slice(0, 1).set_column(2, "offset", pa.array([10_000], pa.int64()))
    write_deltalake(broken.uri, row, mode="append")
    result = contiguity(broken)
    assert not result.passed
    m = meta(result)
    assert (m["rows_outside_ranges"], m["first_rows_outside"]) == (
        1,
        [f"{broken.topic}[1] offset 10000"],
    )


def test_malformed_rate_warns_above_the_threshold(bronze: Bronze, monkeypatch) -> None:
    monkeypatch.setenv("EOS_MALFORMED_MAX_RATE", "0.01")
    result = evaluate(checks.malformed_rate_below_threshold, lake=bronze.lake())
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.WARN
    assert "most common: invalid_json (1)" in (result.description or "")
    m = meta(result)
    assert (m["malformed"], m["rows"], m["latest_malformed"]) == (1, 58, 0)
    assert m["by_code"] == {"invalid_json": 1}


def test_freshness_warns_when_records_wait_longer_than_the_limit(
    bronze: Bronze, monkeypatch
) -> None:
    send_transaction(bronze.bootstrap, bronze.topic, batch(3, 3, first=100))
    monkeypatch.setenv("EOS_FRESHNESS_MAX_AGE_S", "3600")
    ok = evaluate(checks.fresh_within_max_age, lake=bronze.lake(), kafka=bronze.kafka())
    assert ok.passed, ok.description
    assert meta(ok)["lag_total"] == 6  # 3 records and 3 commit markers
    monkeypatch.setenv("EOS_FRESHNESS_MAX_AGE_S", "0.001")
    stale = evaluate(checks.fresh_within_max_age, lake=bronze.lake(), kafka=bronze.kafka())
    assert not stale.passed and stale.severity == dg.AssetCheckSeverity.WARN
    assert "over the 0s limit" in (stale.description or "")
    assert all(a > 0 for a in meta(stale)["age_s_by_partition"].values())


def audit(b: Bronze) -> dg.AssetCheckResult:
    return evaluate(checks.matches_kafka_log, lake=b.lake(), kafka=b.kafka())


def test_audit_names_the_records_deleted_from_bronze(broken: Bronze) -> None:
    offsets = rows_of(broken, 0)["offset"].to_pylist()[3:7]
    DeltaTable(broken.uri).delete(
        f'"partition" = 0 AND "offset" >= {offsets[0]} AND "offset" <= {offsets[-1]}'
    )
    result = audit(broken)
    assert not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    m = meta(result)
    assert (m["missing"], m["invented"], m["altered"], m["complete"]) == (4, 0, 0, True)
    (p0,) = [p for p in m["partitions"] if p["partition"] == f"{broken.topic}[0]"]
    assert p0["first_missing"] == spans(offsets)
    assert f"4 record(s) lost in bronze (first: {broken.topic}[0] offsets {spans(offsets)[0]}" in (
        result.description or ""
    )


def test_audit_finds_invented_and_altered_records(broken: Bronze) -> None:
    rows = rows_of(broken, 1)
    offsets = rows["offset"].to_pylist()
    marker = next(o for o in range(offsets[-1]) if o not in offsets)  # a marker or aborted record
    invented = rows.slice(0, 1).set_column(2, "offset", pa.array([marker], pa.int64()))
    altered = rows.slice(5, 1).set_column(
        5, "value", pa.array([b'{"tampered": true}'], pa.binary())
    )
    DeltaTable(broken.uri).delete(f'"partition" = 1 AND "offset" = {offsets[5]}')
    write_deltalake(broken.uri, pa.concat_tables([invented, altered]), mode="append")
    result = audit(broken)
    assert not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    m = meta(result)
    assert (m["missing"], m["invented"], m["altered"]) == (0, 1, 1)
    (p1,) = [p for p in m["partitions"] if p["partition"] == f"{broken.topic}[1]"]
    assert (p1["first_invented"], p1["first_altered"]) == ([str(marker)], [str(offsets[5])])


def test_a_partial_audit_never_passes(bronze: Bronze, monkeypatch) -> None:
    monkeypatch.setenv("EOS_AUDIT_BUDGET_S", "0.000001")
    result = audit(bronze)
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert "audit partial: 3 of 3 partitions not read to the end" in (result.description or "")
    assert meta(result)["complete"] is False


def test_a_failed_blocking_check_stops_everything_downstream(
    broken: Bronze, spark: SparkSession
) -> None:
    ran: list[str] = []

    @dg.asset(key=["silver", "probe"], deps=[RAW_EVENTS])
    def downstream() -> None:
        ran.append("downstream")

    row = rows_of(broken, 0).slice(0, 1)
    write_deltalake(broken.uri, row, mode="append")
    resources = {
        "kafka": broken.kafka(),
        "lake": broken.lake(),
        "pyspark": LazyPySparkResource(spark_config=spark_config("local[2]")),
    }
    result = dg.materialize(
        [raw_events, checks.offsets_contiguous, downstream],
        resources=resources,
        raise_on_error=False,
    )
    assert not result.success and ran == []
    (evaluation,) = result.get_asset_check_evaluations()
    assert (evaluation.check_name, evaluation.passed) == (checks.OFFSETS_CONTIGUOUS, False)
    assert "duplicated (topic, partition, offset)" in (evaluation.description or "")
