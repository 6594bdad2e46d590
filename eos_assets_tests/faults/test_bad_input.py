"""Bad input end to end: one topic holding every kind of defect, ingested through Dagster.

Every record lands in bronze, the malformed ones with their precise ``error``, the others
(null key, extra fields, a value over 1 MiB) as valid rows; valid neighbours are untouched and
the asset's ``malformed`` metadata counts exactly the malformed ones.
"""

import base64
import json
import uuid

import dagster as dg
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from dagster_pyspark import LazyPySparkResource
from pyspark.sql import SparkSession

from eos_assets.lib.delta import delta_io
from eos_assets.lib.spark.spark_env import spark_config
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.faults.harness import Ledger
from eos_assets_tests.faults.oracle import judge
from eos_assets_tests.support.orders import raw_events

MIB = 1 << 20
EVENT = {
    "event_id": "e-1",
    "event_type": "order_paid",
    "order_id": "o-1",
    "customer_id": "c-1",
    "amount": 12.5,
    "currency": "EUR",
    "event_time": "2026-11-21T10:00:00.123Z",
    "schema_version": 1,
}
TYPES = "order_created, order_paid, order_cancelled, order_refunded"


def event(**changes: object) -> bytes:
    """A valid event with fields replaced (``...`` removes one) and a fresh event id."""
    body = {**EVENT, "event_id": str(uuid.uuid4()), **changes}
    return json.dumps({k: v for k, v in body.items() if v is not ...}).encode()


# (name, key, value, the exact error, or None for a valid record)
CASES: list[tuple[str, bytes | None, bytes | None, str | None]] = [
    ("invalid UTF-8", b"k", b'{"event_id": "\xff"}', "invalid_utf8: invalid start byte at byte 14"),
    (
        "invalid JSON",
        b"k",
        b"{not json",
        "invalid_json: Expecting property name enclosed in double quotes at char 1",
    ),
    ("JSON array", b"k", b"[1, 2]", "not_an_object: the value is a JSON array"),
    ("JSON string", b"k", b'"order"', "not_an_object: the value is a JSON string"),
    (
        "missing event_id",
        b"k",
        event(event_id=...),
        "missing_event_id: event_id is missing or null",
    ),
    ("empty event_id", b"k", event(event_id=""), "missing_event_id: event_id is empty"),
    (
        "unknown event_type",
        b"k",
        event(event_type="order_teleported"),
        f'unknown_event_type: event_type "order_teleported" is not one of {TYPES}',
    ),
    (
        "unparsable event_time",
        b"k",
        event(event_time="yesterday"),
        'invalid_event_time: event_time "yesterday" is not an ISO-8601 date-time with seconds '
        "and a zone",
    ),
    (
        "non-numeric amount",
        b"k",
        event(amount="lots"),
        "invalid_amount: amount is a string, not a number",
    ),
    (
        "amount overflowing to infinity",
        b"k",
        event(amount=0).replace(b'"amount": 0', b'"amount": 1e999'),
        "invalid_amount: amount is not a finite float64 number",
    ),
    (
        "NaN amount",
        b"k",
        event(amount=0).replace(b'"amount": 0', b'"amount": NaN'),
        "invalid_json: NaN is not valid JSON",
    ),
    ("tombstone", b"k", None, "null_value: the record has no value (a tombstone)"),
    (
        "large malformed value",
        b"k",
        event(event_type="order_shipped", notes="y" * MIB),
        f'unknown_event_type: event_type "order_shipped" is not one of {TYPES}',
    ),
    ("null key", None, event(), None),
    ("value over 1 MiB", b"k", event(notes="x" * MIB), None),
    ("extra fields", b"k", event(coupon="X", nested={"a": [1, 2]}), None),
]


def big_topic(bootstrap: str, name: str) -> None:
    """A one-partition topic that accepts records of several MiB."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, 1, config={"max.message.bytes": str(8 * MIB)})
    admin.create_topics([topic])[name].result(30)


def send_all(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]):
    """One committed transaction; returns the offset Kafka gave each record, in order."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bad-input-{uuid.uuid4().hex}",
            "enable.idempotence": True,
            "message.max.bytes": 8 * MIB,
        }
    )
    offsets: list[int | None] = [None] * len(records)

    def delivered(i: int, err: KafkaError | None, msg: Message) -> None:
        assert err is None, err
        offsets[i] = msg.offset()

    producer.init_transactions(30)
    producer.begin_transaction()
    for i, (key, value) in enumerate(records):
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=0,
            on_delivery=lambda err, msg, i=i: delivered(i, err, msg),
        )
    assert producer.flush(30) == 0
    producer.commit_transaction(30)
    return offsets


def test_every_bad_input_lands_flagged_and_counted(
    spark: SparkSession,
    kafka_bootstrap: str,
    lake_root: str,
    ledger: Ledger,
) -> None:
    topic = f"bad-input-{uuid.uuid4().hex[:8]}"
    big_topic(kafka_bootstrap, topic)
    valid = [(f"v{i}".encode(), event(order_id=f"o-{i}")) for i in range(3)]
    records = [*valid, *[(key, value) for _, key, value, _ in CASES], *valid]
    offsets = send_all(kafka_bootstrap, topic, records)

    resources = {
        "kafka": KafkaResource(bootstrap_servers=kafka_bootstrap, topics=[topic]),
        "lake": LakeResource(root=lake_root),
        "pyspark": LazyPySparkResource(spark_config=spark_config("local[2]")),
    }
    result = dg.materialize([raw_events], resources=resources)
    assert result.success
    (mat,) = result.asset_materializations_for_node("orders__bronze__raw_events")
    meta = {k: v.value for k, v in mat.metadata.items()}
    malformed = sum(1 for *_, error in CASES if error is not None)
    assert (meta["records"], meta["malformed"]) == (len(records), malformed), meta

    uri = LakeResource(root=lake_root).table_uri("orders", "bronze", "raw_events")
    rows = {r["offset"]: r for r in delta_io.read_arrow(uri).to_pylist()}
    expected = [(None, key, value) for key, value in valid]
    expected += [(error, key, value) for _, key, value, error in CASES]
    expected += [(None, key, value) for key, value in valid]
    names = ["valid"] * 3 + [name for name, *_ in CASES] + ["valid"] * 3
    for name, offset, (error, key, value) in zip(names, offsets, expected, strict=True):
        row = rows[offset]
        assert row["error"] == error, f"{name}: {row['error']!r}"
        assert (row["key"], row["value"]) == (key, value), f"{name}: raw bytes must be kept"
        if error is None:
            assert row["event_id"] and row["event_type"] == "order_paid", name
            assert row["amount"] == 12.5 and row["event_time"] is not None, name
    assert len(rows) == len(records)

    manifest = [
        {
            "status": "committed",
            "topic": topic,
            "partition": 0,
            "offset": offset,
            "value_b64": None if value is None else base64.b64encode(value).decode(),
        }
        for offset, (_, value) in zip(offsets, records, strict=True)
    ]
    verdict = judge(uri, manifest)
    ledger.record(
        "bad input (one record of each kind)",
        len(CASES),
        verdict.lost,
        verdict.doubled,
        f"{malformed} flagged malformed, {len(CASES) - malformed} kept as valid",
    )
    assert verdict.exact, str(verdict)
