"""Values framed by a schema registry, read into the fields table of the JSON path.

The Confluent wire format: a magic byte 0, the schema id as 4 big-endian bytes, then the value
written with that schema. Each record is read with the schema of its own id (its writer's
schema: never another version's defaults), then each declared field is read from the decoded
record exactly as the careful JSON path reads it from a JSON object (``schema_careful``), so
the checks, the reasons and the columns of bronze are the JSON path's. A declared field may name
a nested field by a path of names joined by dots (``customer.id``); a field that the record's
schema does not have reads as missing.

Decoded values are given the JSON kinds: numbers (``int``, ``long``, ``float``, ``double``,
``decimal``) are numbers, records and maps objects, arrays arrays, enum symbols and ``uuid``
strings, ``bytes`` and ``fixed`` the kind ``bytes`` (kept as Avro's JSON text of them in a
string field that keeps any value). An instant (``timestamp-millis``, ``timestamp-micros``)
reads as the declared time format writes it: an ISO 8601 text, or a number of epoch
milliseconds or seconds; a ``date`` as its ISO 8601 text.

Record-level reasons, in precedence order after ``null_value``: ``not_framed`` (no registry
header), ``unknown_schema_id`` (the registry has no schema of that id), ``invalid_avro`` (the
value does not read with its schema), ``not_an_object`` (its schema is not a record).
"""

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

import pyarrow as pa

from eos_assets.lib.contract.avro_careful import AvroInvalid, Reader, decode
from eos_assets.lib.contract.schema_careful import Number, as_object, failed_row, read_slot
from eos_assets.lib.contract.schema_fields import Slot, layout
from eos_assets.lib.contract.stream_shape import EPOCH_MILLIS, Contract

HEADER = 5  # the magic byte and the 4 bytes of the schema id
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Framed(StrEnum):
    """Why a registry-framed value is malformed, in precedence order (after ``null_value``)."""

    NOT_FRAMED = "not_framed"
    UNKNOWN_SCHEMA_ID = "unknown_schema_id"
    INVALID_AVRO = "invalid_avro"
    NOT_AN_OBJECT = "not_an_object"


def schema_id(value: bytes) -> int | str:
    """The schema id of a framed value, or why it is not framed."""
    if len(value) < HEADER:
        return f"the value has {len(value)} bytes, fewer than the {HEADER} of a registry header"
    if value[0] != 0:
        return f"the value starts with 0x{value[0]:02x}, not the magic byte 0"
    return int.from_bytes(value[1:HEADER], "big")


def extract_registry(
    contract: Contract,
    values: Sequence[bytes | None],
    readers: Mapping[int, Reader | None],
    unknown: Callable[[int], str],
) -> tuple[pa.Table, pa.Array]:
    """The fields table of ``values`` and the schema id of each (null when not framed).

    Args:
        readers: the reader of each schema id the values name (None: the registry has none).
        unknown: the detail of an id the registry does not have (it names the registry).
    """
    schema = layout(contract).schema
    rows, ids = [], []
    for value in values:
        row, found = registry_row(contract, value, readers, unknown)
        rows.append(row)
        ids.append(found)
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    table = pa.table(
        [pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )
    return table, pa.array(ids, pa.int32())


def registry_row(
    contract: Contract,
    value: bytes | None,
    readers: Mapping[int, Reader | None],
    unknown: Callable[[int], str],
) -> tuple[tuple[object, ...], int | None]:
    """The fields table row of one framed value, and its schema id."""
    if value is None:
        return failed_row(contract, None), None
    found = schema_id(value)
    if isinstance(found, str):
        return failed_row(contract, f"{Framed.NOT_FRAMED}: {found}"), None
    reader = readers.get(found)
    if reader is None:
        return failed_row(contract, f"{Framed.UNKNOWN_SCHEMA_ID}: {unknown(found)}"), found
    try:
        record = decode(reader, value[HEADER:])
    except AvroInvalid as invalid:
        return failed_row(
            contract, f"{Framed.INVALID_AVRO}: {invalid.detail} (schema {found})"
        ), found
    if not isinstance(record, dict):
        kind = _kind_of(record)
        error = f"{Framed.NOT_AN_OBJECT}: the value of schema {found} is {kind}, not a record"
        return failed_row(contract, error), found
    slots = layout(contract).slots
    read = [read_slot(slot, _json(_at(record, slot.key), slot, contract)) for slot in slots]
    kinds = [kind for slot, (_, kind) in zip(slots, read, strict=True) if slot.checked]
    return (None, *(v for v, _ in read), *kinds), found


def _at(record: dict[str, Any], path: str) -> Any:
    """The value at ``path`` (names joined by dots) of a decoded record; None when absent."""
    value: Any = record
    for name in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def _json(value: Any, slot: Slot, contract: Contract) -> object:
    """A decoded value as the careful JSON path holds a parsed one."""
    if isinstance(value, datetime):
        if slot.kind != "number":
            return _iso(value)
        micros = Decimal((value - _EPOCH) // _MICROSECOND)  # an epoch time in the declared unit
        return Number(micros.scaleb(-3 if contract.time_format == EPOCH_MILLIS else -6))
    if value is None or isinstance(value, bool | str | bytes):
        return value
    if isinstance(value, float):
        if math.isinf(value):  # as JSON writes it: a number past the float64 range
            return Number("1e999" if value > 0 else "-1e999")
        return Number(repr(value))  # nan too: neither a finite number nor a long
    if isinstance(value, int | Decimal):
        return Number(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, dict):
        return as_object({k: _json(v, slot, contract) for k, v in value.items()})
    if isinstance(value, list):
        return [_json(v, slot, contract) for v in value]
    return value


_MICROSECOND = timedelta(microseconds=1)


def _iso(instant: datetime) -> str:
    """An instant as ISO 8601 text in UTC, to the microsecond."""
    return instant.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _kind_of(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float | Decimal):
        return "a number"
    if isinstance(value, bytes):
        return "bytes"
    return "null" if value is None else "a string"
