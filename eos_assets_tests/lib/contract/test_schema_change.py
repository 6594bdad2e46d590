"""Schema change, end to end on a real broker, Spark and Delta (DESIGN.md, "Schema change").

One topic carries what producers do when a schema evolves: a new optional field, a widened
number, a field that arrives with a new ``schema_version``, and records whose contract field
changed kind. Every record lands in bronze; silver takes the compatible ones with the contract
columns only; the incompatible ones stay in bronze as malformed with the reason, and the
malformed-rate check counts them.
"""

import json
import uuid

import dagster as dg
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit import broker
from eos_assets.lib.contract.contract import Malformed, error_code
from eos_assets.lib.delta import delta_io
from eos_assets.lib.delta.delta_io import read_rows
from eos_assets.lib.derived.silver_events import events_schema, update_events
from eos_assets.lib.ingest.ingest import ingest_bronze
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.support import orders as checks
from eos_assets_tests.support.txn_producer import send_transaction

BASE = {
    "event_type": "order_paid",
    "order_id": "o-1",
    "customer_id": "c-1",
    "amount": 12.5,
    "currency": "EUR",
    "event_time": "2026-11-21T10:00:00Z",
    "schema_version": 1,
}


def record(kind: str, **changes: object) -> tuple[str, bytes]:
    event_id = f"{kind}-{uuid.uuid4().hex[:8]}"
    return event_id, json.dumps({**BASE, "event_id": event_id, **changes}).encode()


def test_schema_changes_land_in_bronze_and_silver_takes_the_compatible_ones(
    spark: SparkSession, kafka_bootstrap: str, lake_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = {
        "v1": [record("v1") for _ in range(4)],
        # A field the contract does not name: kept in the raw value only.
        "optional": [record("optional", coupon="WINTER") for _ in range(3)],
        # A number written as an integer, a schema_version past int32.
        "widened": [record("widened", amount=12), record("widened", schema_version=2**40)],
        # A new schema_version that adds a field.
        "v2": [record("v2", schema_version=2, channel="web") for _ in range(3)],
        # A contract field that changed kind: incompatible.
        "amount_text": [record("amount_text", schema_version=3, amount="12.50")],
        "time_millis": [record("time_millis", schema_version=3, event_time=1763719200000)],
    }
    topic = f"schema-change-{uuid.uuid4().hex[:8]}"
    broker.ensure_topic(kafka_bootstrap, topic, 1)
    messages = [(0, b"o-1", value) for group in records.values() for _, value in group]
    send_transaction(kafka_bootstrap, topic, messages)
    lake = LakeResource(root=lake_root)
    bronze_uri = lake.table_uri(*ORDERS.raw_events.path)
    silver_uri = lake.table_uri(*ORDERS.events.path)
    ingest_bronze(
        spark, bronze_uri, [topic], {"bootstrap.servers": kafka_bootstrap}, contract=ORDERS.contract
    )
    update_events(spark, ORDERS.contract, bronze_uri, silver_uri)

    bronze = {
        json.loads(r["value"])["event_id"]: r for r in delta_io.read_arrow(bronze_uri).to_pylist()
    }
    assert len(bronze) == len(messages)  # every record, compatible or not
    for event_id, value in records["optional"] + records["v2"]:
        row = bronze[event_id]
        assert row["error"] is None and row["value"] == value
    assert json.loads(bronze[records["optional"][0][0]]["value"])["coupon"] == "WINTER"
    assert bronze[records["widened"][0][0]]["amount"] == 12.0
    assert bronze[records["widened"][1][0]]["schema_version"] is None
    assert bronze[records["widened"][1][0]]["error"] is None
    assert [bronze[e]["schema_version"] for e, _ in records["v2"]] == [2, 2, 2]
    text = bronze[records["amount_text"][0][0]]
    assert error_code(text["error"]) == "invalid_amount"
    assert text["error"] == "invalid_amount: amount is a string, not a number"
    millis = bronze[records["time_millis"][0][0]]
    assert error_code(millis["error"]) == Malformed.INVALID_EVENT_TIME
    assert millis["error"] == "invalid_event_time: event_time is a number, not a string"

    schema = events_schema(ORDERS.contract)
    silver = read_rows(DeltaTable(silver_uri), schema).to_pylist()
    compatible = {e for kind in ("v1", "optional", "widened", "v2") for e, _ in records[kind]}
    assert {r["event_id"] for r in silver} == compatible
    assert "coupon" not in schema.names and "channel" not in schema.names

    monkeypatch.setenv("EOS_MALFORMED_MAX_RATE", "0.05")
    result = checks.malformed_rate_below_threshold(lake=lake)  # type: ignore[call-arg]
    assert isinstance(result, dg.AssetCheckResult) and not result.passed
    assert result.severity == dg.AssetCheckSeverity.WARN
    # 2 of 14 records, one of each reason.
    assert (result.description or "").startswith("malformed 14.29% of 14 rows")
    monkeypatch.setenv("EOS_MALFORMED_MAX_RATE", "0.2")
    assert checks.malformed_rate_below_threshold(lake=lake).passed  # type: ignore[call-arg,union-attr]
