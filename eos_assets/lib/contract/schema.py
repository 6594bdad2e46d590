"""One batch of Kafka records of one stream as bronze rows, checked against its ``Contract``.

Every record is kept: ``key`` and ``value`` hold the raw bytes (extra JSON fields stay there),
the contract's fields are parsed next to them, and ``error`` is null for a valid record or
``"<code>: <detail>"`` for a malformed one (``contract.Malformed``, ``contract.field_code``).
The detail names the JSON field as the contract declares it. The columns (``bronze_schema``):
``topic, partition, offset, kafka_timestamp, key, value``, then ``schema_id`` for a stream whose
values a schema registry frames, ``event_id, event_time``, the payload fields in declared order,
``schema_version, error``.

A registry-framed value (``registry_fields``) is read with the schema of its own id, then its
fields exactly as below; its record-level codes are ``null_value`` > ``not_framed`` >
``unknown_schema_id`` > ``invalid_avro`` > ``not_an_object``, then the field codes below.

When a record has several problems, the first in this order is reported:
``null_value`` > ``invalid_utf8`` > ``invalid_json`` > ``not_an_object`` > ``missing_event_id``
> ``invalid_event_time`` > the payload fields' codes in declared order: each check needs the
ones before it to have passed. (For orders this puts ``invalid_event_time`` before
``unknown_event_type``, the other way round from before streams were declared.) Within
``invalid_json`` the detail names the first of: an empty or blank value, a byte order mark,
nesting deeper than 512, a syntax error (``NaN``/``Infinity`` included), an unpaired surrogate
escape, a duplicated key the contract reads (see ``schema_careful`` for the JSON rules).

The id field must be a non-empty string (else ``missing_event_id``); the time field must parse
in the declared format (``schema_time``; else ``invalid_event_time``). A payload field's code is
``unknown_<field>`` for a string field with declared values (present, it must be a string among
them) and ``invalid_<field>`` for any other; a required field that is missing, null or of the
wrong kind is malformed, and so is a required double that is not finite, a required long that
is not an integral int64 and a required timestamp that does not parse. An optional field never
is, bar the values rule: an optional string of any other JSON kind holds its compact JSON text
(numbers as written); an optional long, double, boolean or timestamp that is not valid is null.

Fields of a malformed record: after a JSON-level error (the first four codes) every parsed
field is null; otherwise each field is filled when it is valid on its own and null when not, so
a parsed column only ever holds valid values and the raw input lives in ``value`` and ``error``.
A ``schema_version`` that is not an integral int32 number is null. Kafka timestamps below zero
(Kafka's "no timestamp", -1) become null.

JSON parsing is shared by ``schema_bulk`` (fast) and ``schema_careful`` (the reference); the
checks below run vectorised on their common output, so a record gets the same row either way.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import functools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eos_assets.lib.contract.contract import Malformed, field_code
from eos_assets.lib.contract.registry_fields import extract_registry, schema_id
from eos_assets.lib.contract.schema_bulk import extract_fields
from eos_assets.lib.contract.schema_fields import (
    ARROW,
    ID_COLUMN,
    JSON_ERROR,
    JSON_KIND,
    SCHEMA_VERSION,
    TIME_COLUMN,
    kind_column,
)
from eos_assets.lib.contract.schema_time import (
    ISO_PROBLEM,
    UTC_MICROS,
    epoch_problem,
    parse_epoch_times,
    parse_event_times,
)
from eos_assets.lib.contract.stream_shape import (
    DOUBLE,
    LONG,
    STRING,
    TIMESTAMP,
    Contract,
    PayloadField,
)

if TYPE_CHECKING:
    from eos_assets.lib.schema_registry import SchemaBook

# A payload field's bronze type: as the fields table reads it, but a timestamp is parsed.
_ARROW = {**ARROW, TIMESTAMP: UTC_MICROS}
_INT32 = (-(2**31), 2**31 - 1)
SCHEMA_ID = "schema_id"  # the registry's id of a value's writer schema (registry streams only)
_QUOTE_LIMIT = 80  # characters of an offending value quoted in an error


@functools.lru_cache(maxsize=64)
def bronze_schema(contract: Contract) -> pa.Schema:
    """The bronze table's columns for a stream of ``contract``."""
    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("kafka_timestamp", UTC_MICROS),
            ("key", pa.binary()),
            ("value", pa.binary()),
            *([(SCHEMA_ID, pa.int32())] if contract.registry else []),
            (ID_COLUMN, pa.string()),
            (TIME_COLUMN, UTC_MICROS),
            *[(f.name, _ARROW[f.type]) for f in contract.fields],
            (SCHEMA_VERSION, pa.int32()),
            ("error", pa.string()),
        ]
    )


def to_bronze_table(
    contract: Contract,
    topic: str,
    partition: int,
    offsets: Sequence[int],
    timestamps_ms: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    schemas: "SchemaBook | None" = None,
) -> pa.Table:
    """Turn one batch of Kafka records of one topic-partition into bronze rows.

    Args:
        contract: what a record of the stream must hold.
        topic: the Kafka topic.
        partition: the Kafka partition.
        offsets: the offset of each record.
        timestamps_ms: the Kafka timestamp of each record, in milliseconds since the epoch.
        keys: the raw key of each record; None for a record without key.
        values: the raw value of each record; None for a tombstone.
        schemas: the writer schemas of a stream framed by a schema registry.

    Returns:
        A table of ``bronze_schema(contract)`` with one row per record, in input order.

    Raises:
        ValueError: the sequences differ in length, or a registry stream has no ``schemas``.
        RegistryError: the registry was asked for a schema and did not answer.
    """
    n = len(values)
    if not len(offsets) == len(timestamps_ms) == len(keys) == n:
        raise ValueError(
            f"offsets, timestamps_ms, keys and values differ in length "
            f"({len(offsets)}, {len(timestamps_ms)}, {len(keys)}, {n}): pass one entry per record"
        )
    value_array = pa.array(values, pa.binary())
    registry: dict[str, pa.Array] = {}
    if contract.registry:
        if schemas is None:
            raise ValueError(f"a stream of format {contract.format} needs its schema book")
        ids = {i for v in values if v is not None and isinstance(i := schema_id(v), int)}
        readers = schemas.readers(ids)
        fields, registry[SCHEMA_ID] = extract_registry(contract, values, readers, schemas.unknown)
    else:
        fields, _ = extract_fields(contract, values, value_array)
    millis = pa.array(timestamps_ms, pa.int64())
    millis = pc.if_else(pc.less(millis, 0), pa.scalar(None, pa.int64()), millis)
    columns = {
        "topic": pa.repeat(pa.scalar(topic, pa.string()), n),
        "partition": pa.repeat(pa.scalar(partition, pa.int32()), n),
        "offset": pa.array(offsets, pa.int64()),
        "kafka_timestamp": pc.multiply_checked(millis, 1000).cast(UTC_MICROS),
        "key": pa.array(keys, pa.binary()),
        "value": value_array,
        **registry,
        **_checked_fields(contract, fields),
    }
    schema = bronze_schema(contract)
    return pa.table([columns[name] for name in schema.names], schema=schema)


def _checked_fields(contract: Contract, fields: pa.Table) -> dict[str, pa.Array | pa.ChunkedArray]:
    """Validate the fields table; return the parsed columns of bronze, ``error`` included."""
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    # One validity mask per check, in precedence order, keyed by the column it checks.
    checks: dict[str, np.ndarray] = {}
    event_id = fields[ID_COLUMN]
    checks[ID_COLUMN] = _mask(pc.greater(pc.binary_length(event_id), 0))
    columns[ID_COLUMN] = _keep(event_id, checks[ID_COLUMN])
    if contract.epoch_time:
        times, checks[TIME_COLUMN] = parse_epoch_times(fields[TIME_COLUMN], contract.time_format)
    else:
        times, checks[TIME_COLUMN] = parse_event_times(fields[TIME_COLUMN])
    columns[TIME_COLUMN] = times
    for f in contract.fields:
        column, ok = _payload_column(f, fields)
        columns[f.name] = column
        if ok is not None:
            checks[f.name] = ok
    valid = _mask(pc.is_null(fields[JSON_ERROR]))
    for ok in checks.values():
        valid = valid & ok
    error: pa.Array = pa.nulls(fields.num_rows, pa.string())
    bad = np.flatnonzero(~valid)
    if len(bad):
        rows = fields.take(bad).to_pylist()
        messages: list[str | None] = [None] * fields.num_rows
        for i, row in zip(bad, rows, strict=True):
            failed = next((name for name, ok in checks.items() if not ok[i]), None)
            messages[i] = _error(contract, row, failed)
        error = pa.array(messages, pa.string())
    version = fields[SCHEMA_VERSION]
    integral = _mask(pc.equal(pc.floor(version), version))
    integral &= _mask(
        pc.and_(pc.greater_equal(version, _INT32[0]), pc.less_equal(version, _INT32[1]))
    )
    columns[SCHEMA_VERSION] = _keep(version, integral).cast(pa.int32())
    columns["error"] = error
    return columns


def _payload_column(
    f: PayloadField, fields: pa.Table
) -> tuple[pa.Array | pa.ChunkedArray, np.ndarray | None]:
    """A payload field's bronze column and, when it can make a record malformed, its mask."""
    column = fields[f.name]
    if f.type == STRING and f.values is not None:
        ok = _mask(pc.is_in(column, value_set=_value_set(f.values)))
        if not f.required:  # absent is fine; present of another kind is not
            ok |= _mask(pc.and_(pc.is_null(column), pc.is_null(fields[kind_column(f.name)])))
        return _keep(column, ok), ok
    if f.type == TIMESTAMP:
        times, ok = parse_event_times(column)
        return times, ok if f.required else None
    ok = _mask(pc.is_finite(column)) if f.type == DOUBLE else _mask(pc.is_valid(column))
    if f.type == DOUBLE:
        column = _keep(column, ok)  # inf past the float64 range
    return column, ok if f.required else None


@functools.lru_cache(maxsize=256)
def _value_set(values: tuple[str, ...]) -> pa.Array:
    return pa.array(values, pa.string())


def _mask(flags: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow result as numpy, null counting as False."""
    return flags.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def _keep(column: pa.Array | pa.ChunkedArray, ok: np.ndarray) -> pa.Array | pa.ChunkedArray:
    return pc.if_else(pa.array(ok), column, pa.scalar(None, column.type))


def _error(contract: Contract, row: dict[str, object], failed: str | None) -> str:
    """The ``error`` of one malformed row: its JSON error, or the first failed check's."""
    if row[JSON_ERROR] is not None or failed is None:
        return str(row[JSON_ERROR])
    value, kind = row[failed], row.get(kind_column(failed))
    if failed == ID_COLUMN:
        name = contract.id_field
        detail = f"{name} is empty" if value == "" else _absent(name, kind, "a string")
        return f"{Malformed.MISSING_EVENT_ID}: {detail}"
    if failed == TIME_COLUMN:
        name, epoch = contract.time_field, contract.epoch_time
        detail = _absent(name, kind, "a number" if epoch else "a string")
        if value is not None and epoch:
            detail = f"{name} {epoch_problem(cast('float', value), contract.time_format)}"
        elif value is not None:
            detail = f"{name} {_quote(value)} {ISO_PROBLEM}"
        return f"{Malformed.INVALID_EVENT_TIME}: {detail}"
    f = contract.field(failed)
    return f"{field_code(f)}: {_field_problem(f, value, kind)}"


def _field_problem(f: PayloadField, value: object, kind: object) -> str:
    """Why the payload field ``f`` holding ``value`` (or a ``kind`` of JSON) is not valid."""
    if value is None:
        if f.type == LONG and kind == "number":
            return f"{f.name} is not an integral number within the int64 range"
        return _absent(f.name, kind, f"a {JSON_KIND[f.type]}")
    if f.type == DOUBLE:
        return f"{f.name} is not a finite float64 number"
    if f.type == TIMESTAMP:
        return f"{f.name} {_quote(value)} {ISO_PROBLEM}"
    return f"{f.name} {_quote(value)} is not one of {', '.join(f.values or ())}"


def _absent(name: str, kind: object, expected: str) -> str:
    if kind is None:
        return f"{name} is missing or null"
    article = "an" if str(kind)[0] in "aeiou" else "a"
    return f"{name} is {article} {kind}, not {expected}"


def _quote(value: object) -> str:
    text = str(value)
    cut = text[:_QUOTE_LIMIT]
    return json.dumps(cut, ensure_ascii=False) + ("..." if len(text) > len(cut) else "")
