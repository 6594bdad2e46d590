"""Registry-framed Avro values read into the JSON path's fields table: the same rows as the
same events written as JSON, and a reason for every value that is not a framed record."""

import io
import json
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import fastavro
import pyarrow as pa

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.contract.avro_careful import compile_schema
from eos_assets.lib.contract.registry_fields import extract_registry, registry_row
from eos_assets.lib.contract.schema_careful import careful_fields, extract_careful
from eos_assets.lib.contract.stream_shape import EPOCH_MILLIS, EPOCH_SECONDS

CONTRACT = ORDERS.contract
ANY = ["null", "string", "boolean", "long", "double"]  # a field of any JSON kind but objects
ORDER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        *({"name": n, "type": ANY} for n in ("event_id", "event_type", "order_id", "customer_id")),
        {"name": "amount", "type": ANY},
        {"name": "currency", "type": ANY},
        {"name": "event_time", "type": ANY},
        {"name": "schema_version", "type": ANY},
    ],
}
ID = 7
READERS = {ID: compile_schema(ORDER_SCHEMA)}


def framed(schema: Any, record: object, schema_id: int = ID) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def unknown(schema_id: int) -> str:
    return f"the registry at http://127.0.0.1:1 has no schema {schema_id}"


def event(rng: random.Random) -> dict[str, Any]:
    """An orders event, often with a field that breaks the declaration or is absent."""
    good: dict[str, Any] = {
        "event_id": f"e-{rng.randrange(10**6)}",
        "event_type": "order_paid",
        "order_id": "o-1",
        "customer_id": "c-1",
        "amount": rng.choice([12.5, 3, -0.0, 1e308]),
        "currency": "EUR",
        "event_time": "2026-11-21T10:00:00.123Z",
        "schema_version": rng.choice([1, 2.0, 7.5]),
    }
    broken = rng.choice(["", *good])
    bad = rng.choice([None, "", "x", 1.5, 2, True, "2026-13-40T00:00:00Z", float("inf")])
    return good if broken == "" else {**good, broken: bad}


def test_an_avro_record_gives_the_row_its_json_twin_gives() -> None:
    rng = random.Random(48)
    events = [event(rng) for _ in range(400)]
    values = [framed(ORDER_SCHEMA, e) for e in events]
    table, ids = extract_registry(CONTRACT, values, READERS, unknown)
    as_json = [json.dumps(e).replace("Infinity", "1e999").encode() for e in events]
    assert table.to_pylist() == extract_careful(CONTRACT, as_json).to_pylist()
    assert ids.to_pylist() == [ID] * len(events)
    assert table.column("json:error").null_count == len(events)  # field-level problems only


def test_a_value_that_is_not_a_framed_record_gets_its_reason() -> None:
    good = framed(ORDER_SCHEMA, {"event_id": "e"})
    strings = compile_schema("string")
    readers = {**READERS, 9: strings, 11: None}
    cases = {
        None: ("null_value: the record has no value (a tombstone)", None),
        b"\x00\x00\x07": (
            "not_framed: the value has 3 bytes, fewer than the 5 of a registry header", None),
        b"{\"event_id\": 1}": (
            "not_framed: the value starts with 0x7b, not the magic byte 0", None),
        b"\x00" + (11).to_bytes(4, "big") + good[5:]: (
            "unknown_schema_id: the registry at http://127.0.0.1:1 has no schema 11", 11),
        b"\x00" + (12).to_bytes(4, "big") + good[5:]: (
            "unknown_schema_id: the registry at http://127.0.0.1:1 has no schema 12", 12),
        good[:-1]: ("invalid_avro: the payload ends inside field schema_version (schema 7)", ID),
        good + b"\x00\x00": ("invalid_avro: 2 bytes left after the record (schema 7)", ID),
        framed("string", "hi", 9): (
            "not_an_object: the value of schema 9 is a string, not a record", 9),
    }  # fmt: skip
    for value, (error, schema_id) in cases.items():
        row, found = registry_row(CONTRACT, value, readers, unknown)
        assert (row[0], found) == (error, schema_id), value
        assert set(row[1:]) == {None}


def test_a_timestamp_reads_as_the_declared_time_format_writes_it() -> None:
    millis = {"type": "long", "logicalType": "timestamp-millis"}
    micros = {"type": "long", "logicalType": "timestamp-micros"}
    schema = {**ORDER_SCHEMA, "fields": [
        *(f for f in ORDER_SCHEMA["fields"] if f["name"] != "event_time"),
        {"name": "event_time", "type": ["null", millis, micros]},
    ]}  # fmt: skip
    readers = {ID: compile_schema(schema)}
    at = datetime(2026, 11, 21, 10, 0, 0, 123000, tzinfo=UTC)
    written = {
        "iso8601": "2026-11-21T10:00:00.123000Z",
        EPOCH_MILLIS: (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1),
        EPOCH_SECONDS: (at - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds(),
    }
    for time_format, as_json in written.items():
        contract = replace(CONTRACT, time_format=time_format)
        record = {"event_id": "e", "event_time": at}
        row, _ = registry_row(contract, framed(schema, record), readers, unknown)
        twin = careful_fields(
            contract, json.dumps({"event_id": "e", "event_time": as_json}).encode()
        )
        assert row == twin, time_format


def test_a_declared_path_reads_a_nested_field_and_an_absent_one_is_missing() -> None:
    header = {"type": "record", "name": "Header", "fields": [{"name": "id", "type": "string"}]}
    schema = {"type": "record", "name": "Nested", "fields": [
        {"name": "header", "type": header}, {"name": "event_time", "type": "string"},
    ]}  # fmt: skip
    contract = replace(CONTRACT, id_field="header.id", fields=())
    record = {"header": {"id": "e-1"}, "event_time": "2026-11-21T10:00:00Z"}
    table, _ = extract_registry(
        contract, [framed(schema, record)], {ID: compile_schema(schema)}, unknown
    )
    assert table.column("event_id").to_pylist() == ["e-1"]
    assert table.column("event_time").to_pylist() == ["2026-11-21T10:00:00Z"]
    absent = replace(contract, id_field="header.missing")
    row, _ = registry_row(absent, framed(schema, record), {ID: compile_schema(schema)}, unknown)
    assert row[1] is None  # read as missing: the checks make it missing_event_id


def test_bytes_keep_their_kind_and_their_avro_json_text() -> None:
    schema = {"type": "record", "name": "B", "fields": [
        {"name": "event_id", "type": "bytes"}, {"name": "currency", "type": "bytes"},
    ]}  # fmt: skip
    contract = replace(
        CONTRACT, fields=tuple(replace(f, values=None, required=False) for f in CONTRACT.fields)
    )
    row, _ = registry_row(
        contract,
        framed(schema, {"event_id": b"\x01", "currency": b"\xe9"}),
        {ID: compile_schema(schema)},
        unknown,
    )
    table = pa.Table.from_pylist(
        [dict(zip(extract_careful(contract, []).schema.names, row, strict=True))]
    )
    assert table.column("event_id:kind").to_pylist() == ["bytes"]
    assert table.column("currency").to_pylist() == ['"é"']
