"""The strict Avro decoder: the same values as fastavro on what fastavro writes, and a reason
naming the field for every payload the specification does not allow."""

import io
import random
import string
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from eos_assets.lib.contract.avro_careful import AvroInvalid, compile_schema, decode

ORDER: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "count", "type": "int"},
        {"name": "paid", "type": "boolean"},
        {"name": "coupon", "type": ["null", "string"]},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [
                    {"name": "id", "type": "long"},
                    {"name": "tags", "type": {"type": "array", "items": "string"}},
                    {"name": "attributes", "type": {"type": "map", "values": ["null", "float"]}},
                ],
            },
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_micros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "raw", "type": "bytes"},
        {"name": "previous", "type": ["null", "Customer"]},
        {"name": "next", "type": ["null", "Order"]},  # recursive: the record holds itself
    ],
}


def written(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def order(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    def text() -> str:
        return "".join(rng.choices(string.ascii_letters + "é€😀", k=rng.randrange(0, 12)))

    customer = {
        "id": rng.randrange(-(1 << 63), 1 << 63),
        "tags": [text() for _ in range(rng.randrange(0, 4))],
        "attributes": {text(): rng.choice([None, 0.5, -2.0]) for _ in range(rng.randrange(3))},
    }
    return {
        "id": text(),
        "amount": rng.uniform(-1e6, 1e6),
        "count": rng.randrange(-(1 << 31), 1 << 31),
        "paid": rng.random() < 0.5,
        "coupon": rng.choice([None, text()]),
        "status": rng.choice(["NEW", "PAID"]),
        "customer": customer,
        "at": datetime(2026, 11, 29, tzinfo=UTC) + timedelta(milliseconds=rng.randrange(1 << 40)),
        "at_micros": datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=rng.randrange(9**9)),
        "day": date(2026, 11, 29) - timedelta(days=rng.randrange(-5000, 5000)),
        "price": Decimal(rng.randrange(-(10**8), 10**8)).scaleb(-2),
        "digest": rng.randbytes(4),
        "raw": rng.randbytes(rng.randrange(6)),
        "previous": rng.choice([None, customer]),
        "next": order(rng, depth + 1) if depth < 2 and rng.random() < 0.3 else None,
    }


def test_every_value_fastavro_writes_reads_back_as_fastavro_reads_it() -> None:
    rng = random.Random(48)
    reader, parsed = compile_schema(ORDER), fastavro.parse_schema(ORDER)
    for _ in range(300):
        payload = written(ORDER, order(rng))
        expected = fastavro.schemaless_reader(io.BytesIO(payload), parsed, None)
        assert decode(reader, payload) == expected


SMALL: dict[str, Any] = {
    "type": "record",
    "name": "Small",
    "fields": [
        {"name": "currency", "type": "string"},
        {"name": "coupon", "type": ["null", "string"]},
        {"name": "paid", "type": "boolean"},
        {"name": "count", "type": "int"},
        {"name": "status", "type": {"type": "enum", "name": "S", "symbols": ["A", "B", "C"]}},
        {"name": "customer", "type": {"type": "record", "name": "C", "fields": [
            {"name": "id", "type": "string"}]}},
    ],
}  # fmt: skip
VALID = {"currency": "EUR", "coupon": None, "paid": True, "count": 7, "status": "B",
         "customer": {"id": "c1"}}  # fmt: skip


def zigzag(value: int) -> bytes:
    raw, out = (value << 1) ^ (value >> 63), bytearray()
    while True:
        if raw < 0x80:
            return bytes(out + bytes([raw]))
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7


def payload(**parts: bytes) -> bytes:
    """The Small record with some of its fields' bytes replaced."""
    fields = {
        "currency": zigzag(3) + b"EUR",
        "coupon": zigzag(0),
        "paid": b"\x01",
        "count": zigzag(7),
        "status": zigzag(1),
        "customer": zigzag(2) + b"c1",
    }
    return b"".join(parts.get(name, raw) for name, raw in fields.items())


@pytest.mark.parametrize(
    ("bytes_", "detail"),
    [
        (payload()[:-1], "the payload ends inside field customer.id"),
        (payload() + b"\x00\x00\x00", "3 bytes left after the record"),
        (payload(coupon=zigzag(5)), "union index 5 of field coupon is out of range (2 branches)"),
        (payload(coupon=zigzag(-1)), "union index -1 of field coupon is out of range (2 branches)"),
        (payload(currency=zigzag(2) + b"\xc3\x28"), "field currency is not UTF-8"),
        (payload(currency=zigzag(-4)), "field currency has a negative length -4"),
        (payload(paid=b"\x02"), "field paid is a boolean byte 2, not 0 or 1"),
        (payload(status=zigzag(3)), "enum index 3 of field status is out of range (3 symbols)"),
        (payload(count=zigzag(1 << 33)), f"field count holds {1 << 33}, out of its type's range"),
        (payload(count=b"\xff" * 6), "field count has a varint longer than 5 bytes"),
        (payload(customer=zigzag(9) + b"c1"), "the payload ends inside field customer.id"),
        (b"", "the payload ends inside field currency"),
    ],
)
def test_a_payload_the_specification_does_not_allow_gets_its_reason(
    bytes_: bytes, detail: str
) -> None:
    reader = compile_schema(SMALL)
    assert decode(reader, written(SMALL, VALID)) == VALID == decode(reader, payload())
    with pytest.raises(AvroInvalid) as invalid:
        decode(reader, bytes_)
    assert invalid.value.detail == detail


def test_a_long_varint_and_a_block_of_endless_nulls_are_refused() -> None:
    longs = compile_schema({"type": "array", "items": "long"})
    with pytest.raises(AvroInvalid) as long_varint:
        decode(longs, zigzag(1) + b"\xff" * 11)
    assert long_varint.value.detail == "the record has a varint longer than 10 bytes"
    nulls = compile_schema({"type": "array", "items": "null"})
    assert decode(nulls, zigzag(3) + zigzag(0)) == [None, None, None]
    with pytest.raises(AvroInvalid) as endless:
        decode(nulls, zigzag(1 << 40) + zigzag(0))
    assert endless.value.detail == f"the record has a block of {1 << 40} items of no bytes"


def test_a_schema_that_names_an_undefined_type_is_refused() -> None:
    with pytest.raises(ValueError, match=r"the Avro type shop\.Missing is used before"):
        compile_schema({"type": "record", "name": "R", "namespace": "shop",
                        "fields": [{"name": "m", "type": "Missing"}]})  # fmt: skip
