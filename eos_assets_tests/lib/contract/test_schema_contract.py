"""Bronze rows of streams other than orders: the parser reads whatever the contract declares."""

import json
import random
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest

from eos_assets.declaration import read_declaration
from eos_assets.defs.stream import ORDERS
from eos_assets.devkit.events import Mix, plan_transactions
from eos_assets.examples import declaration
from eos_assets.lib.contract.contract import Malformed, error_code, field_code
from eos_assets.lib.contract.schema import bronze_schema, to_bronze_table
from eos_assets.lib.contract.schema_bulk import MIN_BULK, extract_fields
from eos_assets.lib.contract.schema_careful import extract_careful
from eos_assets.lib.contract.schema_screen import likely_to_fail_pattern, suspect_lines
from eos_assets.lib.contract.stream_shape import (
    BOOLEAN,
    DOUBLE,
    EPOCH_MILLIS,
    EPOCH_SECONDS,
    LONG,
    STRING,
    TIMESTAMP,
    Contract,
    PayloadField,
)
from eos_assets.lib.ingest.reader import parquet_encodings
from eos_assets.stream_specs import contract as contract_of

VIEWS = Contract(
    id_field="view_id",
    time_field="ts",
    time_format=EPOCH_MILLIS,
    fields=(
        PayloadField("session_id", STRING, required=True),
        PayloadField("page", STRING, required=True),
        PayloadField("referrer", STRING),
        PayloadField("duration_ms", LONG),
        PayloadField("is_entry", BOOLEAN),
    ),
)
VIEW = {
    "view_id": "v-1",
    "ts": 1_795_255_200_123,
    "session_id": "s-9",
    "page": "/pricing",
    "referrer": "https://example.com/",
    "duration_ms": 5400,
    "is_entry": True,
    "schema_version": 3,
}
AT = datetime(2026, 11, 21, 10, 0, 0, 123000, tzinfo=UTC)
PADDING = 5 * MIN_BULK  # valid neighbours on each side, enough for the bulk path to run
MILLIS = "epoch milliseconds"


def view(**changes: object) -> bytes:
    """VIEW with fields replaced; ``...`` removes a field."""
    body = {**VIEW, **changes}
    return json.dumps({k: v for k, v in body.items() if v is not ...}).encode()


GOOD = view()


def bronze(contract: Contract, values: Sequence[bytes | None]) -> pa.Table:
    n = len(values)
    return to_bronze_table(contract, "views", 1, list(range(n)), [0] * n, [b"k"] * n, values)


def alone(value: bytes | None, contract: Contract = VIEWS, good: bytes = GOOD) -> dict:
    """The bronze row of ``value`` among valid records (so the bulk path runs around it)."""
    rows = bronze(contract, [good] * PADDING + [value] + [good] * PADDING).to_pylist()
    assert all(r["error"] is None for r in rows[:PADDING] + rows[PADDING + 1 :])
    return rows[PADDING]


def test_bronze_schema_puts_the_declared_payload_between_time_and_version() -> None:
    schema = bronze_schema(VIEWS)
    assert schema.names == [
        *("topic", "partition", "offset", "kafka_timestamp", "key", "value"),
        *("event_id", "event_time", "session_id", "page", "referrer", "duration_ms"),
        *("is_entry", "schema_version", "error"),
    ]
    assert [schema.field(n).type for n in ("event_time", "duration_ms", "is_entry")] == [
        pa.timestamp("us", tz="UTC"),
        pa.int64(),
        pa.bool_(),
    ]


def test_a_valid_page_view() -> None:
    table = bronze(VIEWS, [GOOD] * 20)
    assert table.schema == bronze_schema(VIEWS)
    row = table.to_pylist()[0]
    assert row["error"] is None
    assert (row["event_id"], row["event_time"], row["schema_version"]) == ("v-1", AT, 3)
    payload = {name: row[name] for name in VIEWS.names}
    assert payload == {k: VIEW[k] for k in VIEWS.names}
    _, careful = extract_fields(VIEWS, [GOOD] * 20, pa.array([GOOD] * 20, pa.binary()))
    assert len(careful) == 0  # all of it went the bulk way


@pytest.mark.parametrize(
    "value, column, expected",
    [
        (view(ts=1.795255200123e12), "event_time", AT),
        (view(ts=-62_135_596_800_000), "event_time", datetime(1, 1, 1, tzinfo=UTC)),
        (
            view(ts=253_402_300_799_999),
            "event_time",
            datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
        ),
        (view(duration_ms=2**63 - 1), "duration_ms", 2**63 - 1),
        (view(duration_ms=-(2**63)), "duration_ms", -(2**63)),
        (view(duration_ms=0).replace(b": 0,", b": 2.0,"), "duration_ms", 2),
        (view(duration_ms=0).replace(b": 0,", b": 1e3,"), "duration_ms", 1000),
        (view(referrer=12), "referrer", "12"),
        (view(referrer={"a": [1, None]}), "referrer", '{"a":[1,null]}'),
        (view(referrer=...), "referrer", None),
        (view(is_entry=False), "is_entry", False),
        (view(page=""), "page", ""),
        (view(event_id=7, event_type="order_teleported", amount="x"), "event_id", "v-1"),
        (GOOD[:-1] + b', "event_id": 1, "event_id": 2}', "error", None),
    ],
)
def test_valid_page_views(value: bytes, column: str, expected: object) -> None:
    row = alone(value)
    assert row["error"] is None
    assert row[column] == expected


@pytest.mark.parametrize(
    "value, column",
    [
        (view(duration_ms="5400"), "duration_ms"),
        (view(duration_ms=1.5), "duration_ms"),
        (view(duration_ms=2**63), "duration_ms"),
        (view(duration_ms=-(2**63) - 1), "duration_ms"),
        (view(duration_ms=0).replace(b": 0,", b": 1e400,"), "duration_ms"),
        (view(duration_ms=True), "duration_ms"),
        (view(is_entry="yes"), "is_entry"),
        (view(is_entry=1), "is_entry"),
        (view(is_entry=[True]), "is_entry"),
        (view(schema_version="3"), "schema_version"),
    ],
)
def test_an_optional_field_of_the_wrong_kind_is_null_not_malformed(
    value: bytes, column: str
) -> None:
    row = alone(value)
    assert (row["error"], row[column], row["value"]) == (None, None, value)


PAGE_VIEW_ERRORS = {
    "tombstone": (None, "null_value: the record has no value (a tombstone)"),
    "not an object": (b'["v-1"]', "not_an_object: the value is a JSON array"),
    "duplicate ts": (GOOD[:-1] + b', "ts": 1}', 'invalid_json: duplicate key "ts"'),
    "duplicate page": (GOOD[:-1] + b', "page": "/"}', 'invalid_json: duplicate key "page"'),
    "missing view_id": (view(view_id=...), "missing_event_id: view_id is missing or null"),
    "empty view_id": (view(view_id=""), "missing_event_id: view_id is empty"),
    "number view_id": (view(view_id=1), "missing_event_id: view_id is a number, not a string"),
    "only an event_id": (
        view(view_id=..., event_id="v-1"),
        "missing_event_id: view_id is missing or null",
    ),
    "missing ts": (view(ts=...), "invalid_event_time: ts is missing or null"),
    "ISO ts": (
        view(ts="2026-11-21T10:00:00Z"),
        "invalid_event_time: ts is a string, not a number",
    ),
    "fractional ts": (
        view(ts=1.5),
        f"invalid_event_time: ts 1.5 is not an integral number of {MILLIS}",
    ),
    "ts before year 1": (
        view(ts=-62_135_596_800_001),
        f"invalid_event_time: ts -62135596800001 is not a time in years 0001-9999 in {MILLIS}",
    ),
    "ts after year 9999": (
        view(ts=253_402_300_800_000),
        f"invalid_event_time: ts 253402300800000 is not a time in years 0001-9999 in {MILLIS}",
    ),
    "huge ts": (
        view(ts=10**20),
        f"invalid_event_time: ts 1e+20 is not a time in years 0001-9999 in {MILLIS}",
    ),
    "ts beyond float64": (
        view(ts=0).replace(b'"ts": 0', b'"ts": 1e400'),
        "invalid_event_time: ts is not a finite float64 number",
    ),
    "missing session_id": (
        view(session_id=...),
        "invalid_session_id: session_id is missing or null",
    ),
    "number session_id": (
        view(session_id=9),
        "invalid_session_id: session_id is a number, not a string",
    ),
    "null page": (view(page=None), "invalid_page: page is missing or null"),
    "array page": (view(page=["/"]), "invalid_page: page is an array, not a string"),
}


@pytest.mark.parametrize("value, error", PAGE_VIEW_ERRORS.values(), ids=PAGE_VIEW_ERRORS.keys())
def test_each_malformed_page_view_has_its_exact_error(value: bytes | None, error: str) -> None:
    row = alone(value)
    assert row["error"] == error
    codes = {*Malformed, *(field_code(f) for f in VIEWS.fields)}
    assert error_code(error) in codes


def test_every_code_of_a_page_view_is_reachable() -> None:
    codes = {error_code(error) for _, error in PAGE_VIEW_ERRORS.values()}
    assert codes >= {*Malformed} - {Malformed.INVALID_UTF8, Malformed.INVALID_JSON} | {
        "invalid_session_id",
        "invalid_page",
    }
    assert error_code(alone(b'{"view_id": "\xff"}')["error"]) == Malformed.INVALID_UTF8
    assert error_code(alone(b'{"view_id": ')["error"]) == Malformed.INVALID_JSON


def test_a_field_error_keeps_the_valid_fields() -> None:
    row = alone(view(page=None, duration_ms="x"))
    assert row["error"] == "invalid_page: page is missing or null"
    assert (row["event_id"], row["event_time"], row["session_id"]) == ("v-1", AT, "s-9")
    assert (row["page"], row["duration_ms"], row["is_entry"]) == (None, None, True)


@pytest.mark.parametrize(
    "value, code",
    [
        (view(view_id=..., ts="x", session_id=..., page=...), "missing_event_id"),
        (view(ts=1.5, session_id=..., page=...), "invalid_event_time"),
        (view(session_id=1, page=...), "invalid_session_id"),
        (view(page=..., referrer=1, duration_ms="x", is_entry="x"), "invalid_page"),
        (b'["x"', "invalid_json"),
    ],
)
def test_the_first_problem_in_declared_order_is_reported(value: bytes, code: str) -> None:
    assert error_code(alone(value)["error"]) == code


# A third shape: epoch seconds, and the field types and rules page views do not have.
READINGS = Contract(
    id_field="id",
    time_field="at",
    time_format=EPOCH_SECONDS,
    fields=(
        PayloadField("kind", STRING, required=True, values=("a", "b")),
        PayloadField("count", LONG, required=True),
        PayloadField("ok", BOOLEAN, required=True),
        PayloadField("taken", TIMESTAMP, required=True),
        PayloadField("price", DOUBLE),
        PayloadField("seen", TIMESTAMP),
        PayloadField("tag", STRING, values=("x", "y")),
    ),
)
READING = {"id": "r-1", "at": 1_795_255_200.25, "kind": "a", "count": 3, "ok": True}
READING |= {"taken": "2026-11-21T10:00:00+01:00", "price": 9.5, "tag": "x"}


def reading(**changes: object) -> bytes:
    body = {**READING, **changes}
    return json.dumps({k: v for k, v in body.items() if v is not ...}).encode()


@pytest.mark.parametrize(
    "value, column, expected",
    [
        (reading(), "event_time", datetime(2026, 11, 21, 10, 0, 0, 250000, tzinfo=UTC)),
        (reading(at=1_795_255_200), "event_time", datetime(2026, 11, 21, 10, tzinfo=UTC)),
        (
            reading(at=1_795_255_200.000002),
            "event_time",
            datetime(2026, 11, 21, 10, 0, 0, 2, tzinfo=UTC),
        ),
        (reading(), "taken", datetime(2026, 11, 21, 9, tzinfo=UTC)),
        (reading(seen="2026-11-21T10:00:00Z"), "seen", datetime(2026, 11, 21, 10, tzinfo=UTC)),
        (reading(seen="yesterday"), "seen", None),
        (reading(seen=5), "seen", None),
        (reading(price=0).replace(b'"price": 0', b'"price": 1e400'), "price", None),
        (reading(price="9.5"), "price", None),
        (reading(tag=...), "tag", None),
        (reading(tag=None), "tag", None),
    ],
)
def test_valid_readings(value: bytes, column: str, expected: object) -> None:
    row = alone(value, READINGS, reading())
    assert row["error"] is None
    assert row[column] == expected


@pytest.mark.parametrize(
    "value, error",
    [
        (reading(at="x"), "invalid_event_time: at is a string, not a number"),
        (
            reading(at=1e12),
            "invalid_event_time: at 1000000000000 is not a time in years 0001-9999 in epoch "
            "seconds",
        ),
        (reading(kind="c"), 'unknown_kind: kind "c" is not one of a, b'),
        (reading(kind=...), "unknown_kind: kind is missing or null"),
        (reading(kind=1), "unknown_kind: kind is a number, not a string"),
        (reading(count="3"), "invalid_count: count is a string, not a number"),
        (
            reading(count=1.5),
            "invalid_count: count is not an integral number within the int64 range",
        ),
        (
            reading(count=2**63),
            "invalid_count: count is not an integral number within the int64 range",
        ),
        (reading(ok=1), "invalid_ok: ok is a number, not a boolean"),
        (reading(ok=...), "invalid_ok: ok is missing or null"),
        (
            reading(taken="2026-11-21"),
            'invalid_taken: taken "2026-11-21" is not an ISO-8601 date-time with seconds and a '
            "zone",
        ),
        (reading(taken=0), "invalid_taken: taken is a number, not a string"),
        (reading(tag="z"), 'unknown_tag: tag "z" is not one of x, y'),
        (reading(tag=True), "unknown_tag: tag is a boolean, not a string"),
    ],
)
def test_malformed_readings(value: bytes, error: str) -> None:
    assert alone(value, READINGS, reading())["error"] == error


def test_the_example_page_views_declaration_reads_page_views() -> None:
    declared = contract_of(read_declaration(declaration("page_views")))
    values = [view(user_id="u-1"), view(page=...), view(user_id=7), view(ts="1")] * MIN_BULK
    rows = bronze(declared, values).to_pylist()[:4]
    assert [r["error"] for r in rows] == [
        None,
        "invalid_page: page is missing or null",
        None,
        "invalid_event_time: ts is a string, not a number",
    ]
    assert (rows[0]["user_id"], rows[2]["user_id"], rows[0]["event_time"]) == ("u-1", "7", AT)
    assert "is_entry" not in bronze_schema(declared).names  # not declared there: stays in value


def test_parquet_dictionaries_and_statistics_follow_the_contract() -> None:
    plans = plan_transactions(3, AT, 2000, 2000, Mix())
    orders = [r.value for plan in plans for r in plan.records]
    dictionary, statistics = parquet_encodings(ORDERS.contract, bronze(ORDERS.contract, orders))
    # As for orders before streams were declared: ids and raw values get no dictionary.
    fixed = {"topic", "partition", "schema_version", "error"}
    assert set(dictionary) == fixed | {"event_type", "currency"}
    assert set(statistics) == fixed | {"offset", "kafka_timestamp", "event_time"} | {
        "event_type",
        "amount",
        "currency",
    }
    values = [view(view_id=f"v-{i}", session_id=f"s-{i}", page=f"/p/{i % 5}") for i in range(200)]
    dictionary, statistics = parquet_encodings(VIEWS, bronze(VIEWS, values))
    assert set(dictionary) == fixed | {"page", "referrer", "is_entry"}
    assert {"duration_ms", "is_entry", "page"} <= set(statistics)
    assert "session_id" not in statistics


def test_each_contract_screens_its_own_keys() -> None:
    pattern = likely_to_fail_pattern(VIEWS)
    assert "view_id" in pattern and "duration_ms" in pattern and "event_type" not in pattern
    assert likely_to_fail_pattern(VIEWS) is pattern  # cached per contract
    lines = [view(), json.dumps({**VIEW, "is_entry": "true"}, separators=(",", ":")).encode()]
    mask = suspect_lines(VIEWS, b"\n".join(lines), lines)
    assert mask is not None and mask.tolist() == [False, True]


RAW_JSON = [
    *("null", "true", "false", "0", "-0", "1.0", "12.5", "1e400", "1e3", "2.0", "-1E+309"),
    *("1795255200123", "9223372036854775808", "123456789012345678901234567890", '""', '"x"'),
    *('"12"', '"a"', '"2026-11-21T10:00:00+01:00"', "[]", "{}", '{"a": [1, {"b": null}]}'),
    *('"\\ud800"', '"\\u00e9\\ud83d\\ude00"'),
]


def mixed_batch(
    seed: int, good: dict[str, object], n: int = 2000
) -> tuple[list[bytes | None], set[int]]:
    """Valid records, broken ones and random retypings; the set is what is odd."""
    rng = random.Random(seed)
    first = next(iter(good))

    def encoded(body: dict[str, object]) -> bytes:
        return json.dumps(body).encode()

    values: list[bytes | None] = [encoded({**good, first: f"e-{i}"}) for i in range(n)]
    cases: list[bytes | None] = [None, b"[1]", b"null", b"", b'{"a": NaN}', b"\xff", b"{}{}"]
    odd = set(rng.sample(range(n), n // 20))
    for i in odd:
        choice, value = rng.random(), values[i] or b""
        if choice < 0.15:
            values[i] = rng.choice(cases)
        elif choice < 0.7:  # fields of other kinds, written as raw JSON
            body = {k: json.dumps(v) for k, v in {**good, first: f"e-{i}"}.items()}
            for name in rng.sample([*good, "extra"], rng.randint(1, 3)):
                body[name] = rng.choice(RAW_JSON)
            values[i] = ("{" + ", ".join(f'"{k}": {v}' for k, v in body.items()) + "}").encode()
        elif choice < 0.85:  # flip bytes
            raw = bytearray(value)
            for _ in range(rng.randint(1, 3)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            values[i] = bytes(raw)
        else:  # cut somewhere
            values[i] = value[: rng.randrange(len(value))]
    return values, odd


@pytest.mark.parametrize(
    "contract, good", [(VIEWS, VIEW), (READINGS, READING)], ids=["views", "readings"]
)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bulk_and_careful_paths_agree_on_a_mixed_batch(
    contract: Contract, good: dict[str, object], seed: int
) -> None:
    values, odd = mixed_batch(seed, good)
    assert len(values) >= MIN_BULK
    fields, careful = extract_fields(contract, values, pa.array(values, pa.binary()))
    assert fields.equals(extract_careful(contract, values))
    # Valid neighbours stay in bulk, bar a short tail after a failure (fewer than MIN_BULK).
    assert len(set(careful.tolist()) - odd) < MIN_BULK
    assert len(careful) < len(values) // 4
    whole = bronze(contract, values)
    sample = sorted(odd | set(range(0, len(values), 37)))
    n = len(values)
    one_by_one = pa.concat_tables(
        [to_bronze_table(contract, "views", 1, [i], [0], [b"k"], [values[i]]) for i in sample]
    )
    assert whole.take(sample).equals(one_by_one)
    errors = whole["error"].to_pylist()
    assert {i for i, e in enumerate(errors) if e} <= odd
    assert np.count_nonzero([e is not None for e in errors]) < n
