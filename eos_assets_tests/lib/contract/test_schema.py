"""Bronze rows from Kafka records: every record kept, malformed ones flagged exactly."""

import json
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.contract.contract import Malformed, error_code, field_code
from eos_assets.lib.contract.schema import bronze_schema, to_bronze_table
from eos_assets.lib.contract.schema_bulk import MIN_BULK, extract_fields
from eos_assets.lib.contract.schema_careful import extract_careful
from eos_assets.lib.contract.schema_screen import suspect_lines

CONTRACT = ORDERS.contract
BRONZE_SCHEMA = bronze_schema(CONTRACT)
CODES = {*Malformed, *(field_code(f) for f in CONTRACT.fields)}
EVENT = {
    "event_id": "3f6c1a52-9d1e-4c1b-8a55-0c5e4f1b2a77",
    "event_type": "order_paid",
    "order_id": "o-123",
    "customer_id": "c-9",
    "amount": 12.5,
    "currency": "EUR",
    "event_time": "2026-11-21T10:00:00.123Z",
    "schema_version": 1,
}
GOOD = json.dumps(EVENT).encode()
PADDING = 5 * MIN_BULK  # valid neighbours on each side, enough for the bulk path to run
TS_MS = 1_763_719_200_000
NO_TIME = "is not an ISO-8601 date-time with seconds and a zone"


def event(**changes: object) -> bytes:
    """GOOD with fields replaced; ``...`` removes a field."""
    body = {**EVENT, **changes}
    return json.dumps({k: v for k, v in body.items() if v is not ...}).encode()


def bronze(values: Sequence[bytes | None], keys: Sequence[bytes | None] | None = None) -> pa.Table:
    n = len(values)
    offsets = [1000 + 3 * i for i in range(n)]  # gaps, as after transaction markers
    keys = keys if keys is not None else [b"o-123"] * n
    return to_bronze_table(
        CONTRACT, "orders", 2, offsets, [TS_MS + i for i in range(n)], keys, values
    )


def alone(value: bytes | None) -> dict:
    """The bronze row of ``value`` surrounded by valid records, checking the neighbours."""
    table = bronze([GOOD] * PADDING + [value] + [GOOD] * PADDING)
    rows = table.to_pylist()
    neighbours = rows[:PADDING] + rows[PADDING + 1 :]
    assert all(r["error"] is None and r["event_id"] == EVENT["event_id"] for r in neighbours)
    assert rows[PADDING]["value"] == value
    return rows[PADDING]


MALFORMED = {
    "null value": (None, "null_value: the record has no value (a tombstone)"),
    "invalid utf8": (b'{"event_id": "\xff"}', "invalid_utf8: invalid start byte at byte 14"),
    "overlong utf8": (b'{"a": "\xc0\x80"}', "invalid_utf8: invalid start byte at byte 7"),
    "utf8 surrogate": (
        b'{"a": "\xed\xa0\x80"}',
        "invalid_utf8: invalid continuation byte at byte 7",
    ),
    "truncated json": (
        b'{"event_id": "e1",',
        "invalid_json: Expecting property name enclosed in double quotes at char 18",
    ),
    "garbage": (b"not json", "invalid_json: Expecting value at char 0"),
    "trailing data": (GOOD + b" x", f"invalid_json: Extra data at char {len(GOOD) + 1}"),
    "two objects": (GOOD + GOOD, f"invalid_json: Extra data at char {len(GOOD)}"),
    "empty": (b"", "invalid_json: the value is empty or blank"),
    "blank": (b" \n ", "invalid_json: the value is empty or blank"),
    "bom": (b"\xef\xbb\xbf" + GOOD, "invalid_json: the value starts with a byte order mark (BOM)"),
    "NaN token": (
        event(amount=0).replace(b": 0,", b": NaN,"),
        "invalid_json: NaN is not valid JSON",
    ),
    "Infinity token": (
        event(amount=0).replace(b": 0,", b": -Infinity,"),
        "invalid_json: -Infinity is not valid JSON",
    ),
    "NaN in an extra field": (GOOD[:-1] + b', "x": NaN}', "invalid_json: NaN is not valid JSON"),
    "duplicate event_id": (
        GOOD.replace(b"{", b'{"event_id": "other", ', 1),
        'invalid_json: duplicate key "event_id"',
    ),
    "too deep": (
        GOOD[:-1] + b', "x": ' + b"[" * 513 + b"]" * 513 + b"}",
        "invalid_json: nesting deeper than 512 levels",
    ),
    "lone surrogate escape": (
        event(customer_id="\\ud800").replace(b"\\\\", b"\\"),
        "invalid_json: a string holds an unpaired UTF-16 surrogate escape",
    ),
    "array": (b"[1, 2]", "not_an_object: the value is a JSON array"),
    "string": (b'"order"', "not_an_object: the value is a JSON string"),
    "number": (b"42", "not_an_object: the value is a JSON number"),
    "json null": (b"null", "not_an_object: the value is a JSON null"),
    "missing event_id": (event(event_id=...), "missing_event_id: event_id is missing or null"),
    "null event_id": (event(event_id=None), "missing_event_id: event_id is missing or null"),
    "empty event_id": (event(event_id=""), "missing_event_id: event_id is empty"),
    "number event_id": (event(event_id=7), "missing_event_id: event_id is a number, not a string"),
    "object event_id": (
        event(event_id={"id": "x"}),
        "missing_event_id: event_id is an object, not a string",
    ),
    "unknown event_type": (
        event(event_type="order_shipped"),
        'unknown_event_type: event_type "order_shipped" is not one of '
        "order_created, order_paid, order_cancelled, order_refunded",
    ),
    "missing event_type": (
        event(event_type=...),
        "unknown_event_type: event_type is missing or null",
    ),
    "number event_type": (
        event(event_type=1),
        "unknown_event_type: event_type is a number, not a string",
    ),
    "date-only event_time": (
        event(event_time="2026-11-21"),
        f'invalid_event_time: event_time "2026-11-21" {NO_TIME}',
    ),
    "garbage event_time": (
        event(event_time="yesterday"),
        f'invalid_event_time: event_time "yesterday" {NO_TIME}',
    ),
    "event_time without zone": (
        event(event_time="2026-11-21T10:00:00"),
        f'invalid_event_time: event_time "2026-11-21T10:00:00" {NO_TIME}',
    ),
    "event_time February 30": (
        event(event_time="2026-02-30T10:00:00Z"),
        f'invalid_event_time: event_time "2026-02-30T10:00:00Z" {NO_TIME}',
    ),
    "number event_time": (
        event(event_time=1763719200),
        "invalid_event_time: event_time is a number, not a string",
    ),
    "missing event_time": (
        event(event_time=...),
        "invalid_event_time: event_time is missing or null",
    ),
    "string amount": (event(amount="12.5"), "invalid_amount: amount is a string, not a number"),
    "string NaN amount": (event(amount="NaN"), "invalid_amount: amount is a string, not a number"),
    "null amount": (event(amount=None), "invalid_amount: amount is missing or null"),
    "missing amount": (event(amount=...), "invalid_amount: amount is missing or null"),
    "boolean amount": (event(amount=True), "invalid_amount: amount is a boolean, not a number"),
    "1e400 amount": (
        event(amount=0).replace(b": 0,", b": 1e400,"),
        "invalid_amount: amount is not a finite float64 number",
    ),
    "huge integer amount": (
        event(amount=0).replace(b": 0,", b": -1" + b"0" * 400 + b","),
        "invalid_amount: amount is not a finite float64 number",
    ),
}


@pytest.mark.parametrize("value, error", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_record_is_kept_with_its_exact_error(value: bytes | None, error: str) -> None:
    row = alone(value)
    assert row["error"] == error
    assert error_code(row["error"]) in CODES
    assert row["offset"] == 1000 + 3 * PADDING and row["key"] == b"o-123"


def test_a_json_level_error_leaves_every_parsed_field_null() -> None:
    row = alone(b'{"event_id": "e1", "event_type": "order_paid"')
    payload = [k for k in BRONZE_SCHEMA.names if k not in ("topic", "partition", "offset")]
    payload = [k for k in payload if k not in ("kafka_timestamp", "key", "value", "error")]
    assert {k: row[k] for k in payload} == dict.fromkeys(payload)


def test_a_field_error_keeps_the_fields_that_are_valid() -> None:
    row = alone(event(amount="12.5"))
    assert row["error"].startswith("invalid_amount:")
    assert row["amount"] is None
    assert (row["event_id"], row["event_type"], row["order_id"]) == (
        EVENT["event_id"],
        "order_paid",
        "o-123",
    )
    assert row["event_time"] == datetime(2026, 11, 21, 10, 0, 0, 123000, tzinfo=UTC)
    unknown = alone(event(event_type="order_shipped"))
    assert unknown["event_type"] is None and unknown["event_id"] == EVENT["event_id"]


@pytest.mark.parametrize(
    "value, code",
    [
        (event(event_id="", event_type="x", event_time="x", amount="x"), "missing_event_id"),
        (event(event_type="x", event_time="x", amount="x"), "invalid_event_time"),
        (event(event_type="x", amount="x"), "unknown_event_type"),
        (event(event_time="x", amount=None), "invalid_event_time"),
        (b'[{"event_id": 1}', "invalid_json"),
    ],
)
def test_the_first_problem_in_precedence_order_is_reported(value: bytes, code: str) -> None:
    assert error_code(alone(value)["error"]) == code


@pytest.mark.parametrize(
    "value, field, expected",
    [
        (GOOD[:-1] + b', "note": "extra", "items": [{"sku": 1}]}', "error", None),
        (GOOD[:-1] + b', "note": "Information about NaN and Infinity"}', "error", None),
        (GOOD[:-1] + b', "x": 1, "x": 2}', "error", None),
        (GOOD.replace(b'"event_id"', b'"event\\u005fid"'), "event_id", EVENT["event_id"]),
        (json.dumps(EVENT, indent=2).encode(), "event_id", EVENT["event_id"]),
        (GOOD.replace(b", ", b",\r\n "), "amount", 12.5),
        (GOOD[:-1] + b', "x": ' + b"[" * 511 + b"]" * 511 + b"}", "error", None),
        (GOOD[:-1] + b', "x": [' + b"[]," * 600 + b"[]]}", "error", None),
        (event(order_id=12).replace(b": 12,", b": 12.50,"), "order_id", "12.50"),
        (event(customer_id={"id": 9, "tags": ["a"]}), "customer_id", '{"id":9,"tags":["a"]}'),
        (event(currency=None), "currency", None),
        (event(currency=True), "currency", "true"),
        (event(schema_version="1"), "schema_version", None),
        (event(schema_version=1.5), "schema_version", None),
        (event(schema_version=2.0), "schema_version", 2),
        (event(schema_version=2**40), "schema_version", None),
        (event(amount=-0.0), "amount", 0.0),
        (event(amount=7), "amount", 7.0),
        (event(amount=0).replace(b": 0,", b": 1e-400,"), "amount", 0.0),
        (event(event_id="é-\u00e9\U0001f600"), "event_id", "é-é😀"),
    ],
)
def test_valid_records(value: bytes, field: str, expected: object) -> None:
    row = alone(value)
    assert row["error"] is None
    assert row[field] == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-11-21T10:00:00Z", datetime(2026, 11, 21, 10, tzinfo=UTC)),
        ("2026-11-21t10:00:00.5z", datetime(2026, 11, 21, 10, 0, 0, 500000, tzinfo=UTC)),
        ("2026-11-21T10:00:00.123456789Z", datetime(2026, 11, 21, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2026-11-21T10:00:00+05:30", datetime(2026, 11, 21, 4, 30, tzinfo=UTC)),
        ("2026-11-21T10:00:00.25-0800", datetime(2026, 11, 21, 18, 0, 0, 250000, tzinfo=UTC)),
        ("2026-11-21T00:30:00+01", datetime(2026, 11, 20, 23, 30, tzinfo=UTC)),
        ("2024-02-29T23:59:59-00:00", datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC)),
        ("0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=UTC)),
        ("2026-11-21 10:00:00Z", None),
        ("2026-11-21T10:00:00.Z", None),
        ("2026-11-21T10:00:00.1x2Z", None),
        ("2026-11-21T10:00:00+24:00", None),
        ("2026-11-21T10:00:00+05:3", None),
        ("2023-02-29T10:00:00Z", None),
        ("0000-01-01T00:00:00Z", None),
        ("0001-01-01T00:30:00+01:00", None),
        ("2026-11-21T10:00:00Z ", None),
        ("\uff12026-11-21T10:00:00Z", None),  # a fullwidth digit,
    ],
)
def test_event_time_is_normalised_to_utc_microseconds(text: str, expected: datetime | None) -> None:
    row = alone(event(event_time=text))
    assert row["event_time"] == expected
    assert (row["error"] is None) == (expected is not None)


def test_event_times_agree_with_python_for_random_times() -> None:
    rng = random.Random(11)
    first, span = datetime(1, 1, 2), datetime(9999, 12, 30) - datetime(1, 1, 2)
    texts, expected = [], []
    for _ in range(3000):
        local = first + span * rng.random()
        offset = rng.choice([0, rng.randint(-1439, 1439)])
        digits = rng.randint(0, 6)
        text = f"{local.year:04d}-{local:%m-%dT%H:%M:%S}"
        text += f".{local.microsecond:06d}"[: digits + 1] if digits else ""
        hours, minutes = divmod(abs(offset), 60)
        text += f"{'-' if offset < 0 else '+'}{hours:02d}:{minutes:02d}" if offset else "Z"
        texts.append(text)
        expected.append(datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC))
    assert bronze([event(event_time=t) for t in texts])["event_time"].to_pylist() == expected


def test_valid_batch_round_trips() -> None:
    rng = random.Random(5)
    events = [
        {
            **EVENT,
            "event_id": f"id-{i}",
            "event_type": rng.choice(["order_created", "order_paid", "order_refunded"]),
            "order_id": f"o-{i % 97}",
            "amount": round(rng.uniform(0, 1000), 2),
            "event_time": f"2026-11-21T10:{i % 60:02d}:{i // 60 % 60:02d}.{i % 1000:03d}Z",
        }
        for i in range(10_000)
    ]
    values = [json.dumps(e).encode() for e in events]
    keys = [None if i % 10 == 0 else f"o-{i % 97}".encode() for i in range(10_000)]
    table = bronze(values, keys)
    assert table.schema == BRONZE_SCHEMA
    assert table.num_rows == 10_000 and table["error"].null_count == 10_000
    assert table["value"].to_pylist() == values
    assert table["key"].to_pylist() == keys
    assert table["offset"].to_pylist() == [1000 + 3 * i for i in range(10_000)]
    assert set(table["partition"].to_pylist()) == {2} and set(table["topic"].to_pylist()) == {
        "orders"
    }
    assert table["kafka_timestamp"].to_pylist()[7] == datetime.fromtimestamp(
        (TS_MS + 7) / 1000, UTC
    )
    for name in ("event_id", "event_type", "order_id", "amount"):
        assert table[name].to_pylist() == [e[name] for e in events]
    assert table["event_time"].to_pylist()[61] == datetime(
        2026, 11, 21, 10, 1, 1, 61000, tzinfo=UTC
    )
    _, careful = extract_fields(CONTRACT, values, pa.array(values, pa.binary()))
    assert len(careful) == 0  # all of it went the bulk way


def test_large_values_valid_and_malformed() -> None:
    big = GOOD[:-1] + b', "blob": "' + b"x" * (3 << 20) + b'"}'
    bad = event(amount="1").replace(b"{", b'{"blob": "' + b"y" * (1 << 20) + b'", ', 1)
    broken = big[:-2]
    table = bronze([GOOD] * PADDING + [big, bad, broken] + [GOOD] * PADDING)
    rows = table.to_pylist()[PADDING : PADDING + 3]
    assert [r["value"] for r in rows] == [big, bad, broken]
    assert rows[0]["error"] is None and rows[0]["event_id"] == EVENT["event_id"]
    assert rows[1]["error"] == "invalid_amount: amount is a string, not a number"
    assert error_code(rows[2]["error"]) == Malformed.INVALID_JSON
    assert table["error"].null_count == table.num_rows - 2


def test_null_key_and_kafka_no_timestamp() -> None:
    row = to_bronze_table(CONTRACT, "orders", 0, [5], [-1], [None], [GOOD]).to_pylist()[0]
    assert (row["key"], row["kafka_timestamp"], row["error"]) == (None, None, None)


def test_empty_batch_is_an_empty_table_with_the_schema() -> None:
    table = to_bronze_table(CONTRACT, "orders", 0, [], [], [], [])
    assert table.num_rows == 0 and table.schema == BRONZE_SCHEMA


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        to_bronze_table(CONTRACT, "orders", 0, [1, 2], [1, 2], [None], [GOOD, GOOD])


RAW_JSON = [
    *("null", "true", "0", "-0", "1.0", "12.5", "1e400", "-1E+309", "1e-400", "2e0"),
    *("123456789012345678901234567890", '""', '"x"', '"12.5"', '"NaN"', '"order_paid"'),
    *('"2026-11-21T10:00:00+01:00"', "[]", "{}", '{"a": [1, {"b": null}]}', '"\\ud800"'),
    *('"\\u00e9\\ud83d\\ude00"', '"tab\\there"'),
]


def retyped(rng: random.Random, i: int) -> bytes:
    """An event whose contract fields (or an extra one) hold JSON of some other kind."""
    body = {k: json.dumps(v) for k, v in {**EVENT, "event_id": f"e-{i}"}.items()}
    for name in rng.sample([*EVENT, "extra"], rng.randint(1, 3)):
        body[name] = rng.choice(RAW_JSON)
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in body.items()) + "}").encode()


def mixed_batch(seed: int, n: int = 3000) -> tuple[list[bytes | None], set[int]]:
    """Valid records, the malformed cases above and random mutations; the set is what is odd."""
    rng = random.Random(seed)
    cases = [v for v, _ in MALFORMED.values()] + [GOOD[:-1] + b', "n": 1e999}']
    values: list[bytes | None] = [event(event_id=f"e-{i}") for i in range(n)]
    odd = set(rng.sample(range(n), n // 20))
    for i in odd:
        value = values[i] or b""
        choice = rng.random()
        if choice < 0.3:
            values[i] = rng.choice(cases)
        elif choice < 0.6:
            values[i] = retyped(rng, i)
        elif choice < 0.85:  # flip bytes
            raw = bytearray(value)
            for _ in range(rng.randint(1, 3)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            values[i] = bytes(raw)
        else:  # cut somewhere
            values[i] = value[: rng.randrange(len(value))]
    return values, odd


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_bulk_and_careful_paths_agree_on_a_mixed_batch(seed: int) -> None:
    values, odd = mixed_batch(seed)
    fields, careful = extract_fields(CONTRACT, values, pa.array(values, pa.binary()))
    assert fields.equals(extract_careful(CONTRACT, values))
    # Valid neighbours stay in bulk, bar a short tail after a failure (fewer than MIN_BULK).
    assert len(set(careful.tolist()) - odd) < MIN_BULK
    whole = bronze(values)
    sample = sorted(odd | set(range(0, len(values), 37)))
    one_by_one = pa.concat_tables(
        [
            to_bronze_table(
                CONTRACT, "orders", 2, [1000 + 3 * i], [TS_MS + i], [b"o-123"], [values[i]]
            )
            for i in sample
        ]
    )
    assert whole.take(sample).equals(one_by_one)
    assert {i for i, e in enumerate(whole["error"].to_pylist()) if e} <= odd


def test_sparse_bad_records_leave_their_neighbours_in_bulk() -> None:
    values: list[bytes | None] = [event(event_id=f"e-{i}") for i in range(100 * len(MALFORMED))]
    bad = {100 * k + 50 for k in range(len(MALFORMED))}
    for i, (value, _) in zip(sorted(bad), MALFORMED.values(), strict=True):
        values[i] = value
    fields, careful = extract_fields(CONTRACT, values, pa.array(values, pa.binary()))
    assert set(careful.tolist()) <= bad
    assert fields.equals(extract_careful(CONTRACT, values))
    errors = bronze(values)["error"].to_pylist()
    assert [errors[i] for i in sorted(bad)] == [error for _, error in MALFORMED.values()]


@pytest.mark.parametrize("newline_inside", [False, True])
def test_quoted_numbers_in_compact_json_are_set_aside_before_the_first_call(
    newline_inside: bool,
) -> None:
    def compact(**changes: object) -> bytes:
        return json.dumps({**EVENT, **changes}, separators=(",", ":")).encode()

    values: list[bytes | None] = [compact(event_id=f"e-{i}") for i in range(400)]
    quoted = {7, 150, 151, 399}
    for i in quoted:
        values[i] = compact(event_id=f"e-{i}", amount="12.5" if i % 2 else "x")
    values[200] = compact(event_id="e-200", schema_version="1")
    quoted.add(200)
    if newline_inside:  # a line with a raw newline: the per-line screen
        values[300] = compact(event_id="e-300").replace(b",", b",\n", 1)
    lines = [v or b"" for v in values]
    mask = suspect_lines(CONTRACT, b"\n".join(lines), lines)
    assert mask is not None
    assert set(np.flatnonzero(mask).tolist()) == quoted | ({300} if newline_inside else set())
    fields, careful = extract_fields(CONTRACT, values, pa.array(values, pa.binary()))
    assert fields.equals(extract_careful(CONTRACT, values))
    assert set(careful.tolist()) == set(np.flatnonzero(mask).tolist())
    clean = lines[:5]
    assert suspect_lines(CONTRACT, b"\n".join(clean), clean) is None


def test_a_json_null_never_reaches_pyarrow_json() -> None:
    # pyarrow.json crashes the interpreter when a block starts with a JSON null.
    table = bronze([b"null", b" null"] + [GOOD] * PADDING + [b"null"])
    codes = [error_code(e) for e in table["error"].to_pylist()]
    assert codes == [Malformed.NOT_AN_OBJECT] * 2 + [None] * PADDING + [Malformed.NOT_AN_OBJECT]


def test_delta_lake_accepts_the_table(tmp_path: Path) -> None:
    values, _ = mixed_batch(4, 500)
    table = bronze(values)
    deltalake.write_deltalake(str(tmp_path), table)
    back = deltalake.DeltaTable(str(tmp_path)).to_pyarrow_table(
        filesystem=pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    )
    assert back.schema == BRONZE_SCHEMA
    assert back.sort_by("offset").equals(table)
