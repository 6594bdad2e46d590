"""One batch of Kafka records as the ``bronze/raw_events`` Arrow table.

Every record is kept: ``key`` and ``value`` hold the raw bytes (extra JSON fields stay there),
the contract fields are parsed next to them, and ``error`` is null for a valid record or
``"<code>: <detail>"`` (``contract.Malformed``) for a malformed one.

When a record has several problems, the first in this order is reported:
``null_value`` > ``invalid_utf8`` > ``invalid_json`` > ``not_an_object`` > ``missing_event_id``
> ``unknown_event_type`` > ``invalid_event_time`` > ``invalid_amount``: each check needs the
ones before it to have passed, and field checks follow the contract's order. Within
``invalid_json`` the detail names the first of: an empty or blank value, a byte order mark,
nesting deeper than 512, a syntax error (``NaN``/``Infinity`` included), an unpaired surrogate
escape, a duplicated contract key (see ``schema_careful`` for the JSON rules).

Fields of a malformed record: after a JSON-level error (the first four codes) every parsed
field is null; otherwise each field is filled when it is valid on its own and null when not, so
a parsed column only ever holds valid values and the raw input lives in ``value`` and ``error``.
``order_id``, ``customer_id`` and ``currency`` of any other JSON kind hold its compact JSON text
(numbers as written); a ``schema_version`` that is not an integral int32 number is null. Kafka
timestamps below zero (Kafka's "no timestamp", -1) become null.

JSON parsing is shared by ``schema_bulk`` (fast) and ``schema_careful`` (the reference); the
checks below run vectorised on their common output, so a record gets the same row either way.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eos_assets.lib.contract import EVENT_TYPES, Malformed
from eos_assets.lib.schema_bulk import extract_fields
from eos_assets.lib.schema_time import UTC_MICROS, parse_event_times

BRONZE_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("kafka_timestamp", UTC_MICROS),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("event_id", pa.string()),
        ("event_type", pa.string()),
        ("event_time", UTC_MICROS),
        ("order_id", pa.string()),
        ("customer_id", pa.string()),
        ("amount", pa.float64()),
        ("currency", pa.string()),
        ("schema_version", pa.int32()),
        ("error", pa.string()),
    ]
)
_EVENT_TYPES = pa.array(EVENT_TYPES, pa.string())
_INT32 = (-(2**31), 2**31 - 1)
_QUOTE_LIMIT = 80  # characters of an offending value quoted in an error


def to_bronze_table(
    topic: str,
    partition: int,
    offsets: Sequence[int],
    timestamps_ms: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
) -> pa.Table:
    """Turn one batch of Kafka records of one topic-partition into bronze rows.

    Args:
        topic: the Kafka topic.
        partition: the Kafka partition.
        offsets: the offset of each record.
        timestamps_ms: the Kafka timestamp of each record, in milliseconds since the epoch.
        keys: the raw key of each record; None for a record without key.
        values: the raw value of each record; None for a tombstone.

    Returns:
        A table of ``BRONZE_SCHEMA`` with one row per record, in input order.

    Raises:
        ValueError: the sequences differ in length.
    """
    n = len(values)
    if not len(offsets) == len(timestamps_ms) == len(keys) == n:
        raise ValueError(
            f"offsets, timestamps_ms, keys and values differ in length "
            f"({len(offsets)}, {len(timestamps_ms)}, {len(keys)}, {n}): pass one entry per record"
        )
    value_array = pa.array(values, pa.binary())
    fields, _ = extract_fields(values, value_array)
    millis = pa.array(timestamps_ms, pa.int64())
    millis = pc.if_else(pc.less(millis, 0), pa.scalar(None, pa.int64()), millis)
    columns = {
        "topic": pa.repeat(pa.scalar(topic, pa.string()), n),
        "partition": pa.repeat(pa.scalar(partition, pa.int32()), n),
        "offset": pa.array(offsets, pa.int64()),
        "kafka_timestamp": pc.multiply_checked(millis, 1000).cast(UTC_MICROS),
        "key": pa.array(keys, pa.binary()),
        "value": value_array,
        **_checked_fields(fields),
    }
    return pa.table([columns[name] for name in BRONZE_SCHEMA.names], schema=BRONZE_SCHEMA)


def _checked_fields(fields: pa.Table) -> dict[str, pa.Array | pa.ChunkedArray]:
    """Validate the parsed fields; return the payload columns of bronze, ``error`` included."""
    event_id, event_type, amount = fields["event_id"], fields["event_type"], fields["amount"]
    times, time_ok = parse_event_times(fields["event_time"])
    checks = {
        Malformed.MISSING_EVENT_ID: _mask(pc.greater(pc.binary_length(event_id), 0)),
        Malformed.UNKNOWN_EVENT_TYPE: _mask(pc.is_in(event_type, value_set=_EVENT_TYPES)),
        Malformed.INVALID_EVENT_TIME: time_ok,
        Malformed.INVALID_AMOUNT: _mask(pc.is_finite(amount)),
    }
    valid = _mask(pc.is_null(fields["json_error"]))
    for ok in checks.values():
        valid = valid & ok
    error: pa.Array = pa.nulls(fields.num_rows, pa.string())
    bad = np.flatnonzero(~valid)
    if len(bad):
        rows = fields.take(bad).to_pylist()
        passed = [{code: bool(ok[i]) for code, ok in checks.items()} for i in bad]
        messages = [None] * fields.num_rows
        for i, row, ok in zip(bad, rows, passed, strict=True):
            messages[i] = _error(row, ok)
        error = pa.array(messages, pa.string())
    version = fields["schema_version"]
    integral = _mask(pc.equal(pc.floor(version), version))
    integral &= _mask(
        pc.and_(pc.greater_equal(version, _INT32[0]), pc.less_equal(version, _INT32[1]))
    )
    return {
        "event_id": _keep(event_id, checks[Malformed.MISSING_EVENT_ID]),
        "event_type": _keep(event_type, checks[Malformed.UNKNOWN_EVENT_TYPE]),
        "event_time": times,
        "order_id": fields["order_id"],
        "customer_id": fields["customer_id"],
        "amount": _keep(amount, checks[Malformed.INVALID_AMOUNT]),
        "currency": fields["currency"],
        "schema_version": _keep(version, integral).cast(pa.int32()),
        "error": error,
    }


def _mask(flags: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow result as numpy, null counting as False."""
    return flags.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def _keep(column: pa.Array | pa.ChunkedArray, ok: np.ndarray) -> pa.Array | pa.ChunkedArray:
    return pc.if_else(pa.array(ok), column, pa.scalar(None, column.type))


def _error(row: dict[str, object], passed: dict[Malformed, bool]) -> str:
    """The ``error`` of one malformed row, following the documented precedence."""
    if row["json_error"] is not None:
        return str(row["json_error"])
    value, kind = row["event_id"], row["event_id_kind"]
    if not passed[Malformed.MISSING_EVENT_ID]:
        detail = "event_id is empty" if value == "" else _absent("event_id", kind, "a string")
        return f"{Malformed.MISSING_EVENT_ID}: {detail}"
    value, kind = row["event_type"], row["event_type_kind"]
    if not passed[Malformed.UNKNOWN_EVENT_TYPE]:
        detail = _absent("event_type", kind, "a string")
        if value is not None:
            detail = f"event_type {_quote(value)} is not one of {', '.join(EVENT_TYPES)}"
        return f"{Malformed.UNKNOWN_EVENT_TYPE}: {detail}"
    value, kind = row["event_time"], row["event_time_kind"]
    if not passed[Malformed.INVALID_EVENT_TIME]:
        detail = _absent("event_time", kind, "a string")
        if value is not None:
            detail = (
                f"event_time {_quote(value)} is not an ISO-8601 date-time with seconds and a zone"
            )
        return f"{Malformed.INVALID_EVENT_TIME}: {detail}"
    detail = _absent("amount", row["amount_kind"], "a number")
    if row["amount"] is not None:
        detail = "amount is not a finite float64 number"
    return f"{Malformed.INVALID_AMOUNT}: {detail}"


def _absent(name: str, kind: object, expected: str) -> str:
    if kind is None:
        return f"{name} is missing or null"
    article = "an" if str(kind)[0] in "aeiou" else "a"
    return f"{name} is {article} {kind}, not {expected}"


def _quote(value: object) -> str:
    text = str(value)
    cut = text[:_QUOTE_LIMIT]
    return json.dumps(cut, ensure_ascii=False) + ("..." if len(text) > len(cut) else "")
