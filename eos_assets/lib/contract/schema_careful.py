"""The careful path: one Kafka value at a time, and the reference meaning of a value.

The bulk path (``schema_bulk``) hands here every record it cannot prove it reads exactly as
this module does, so this module defines the semantics and the bulk path only goes faster.

JSON rules, strict where Python's ``json`` is lenient:
- the text is UTF-8 (no BOM, no lone surrogates) and one JSON value with only whitespace around;
- ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON and are rejected;
- nesting deeper than ``MAX_DEPTH`` is rejected (a fixed limit rather than Python's stack depth,
  so the answer cannot depend on where the code is called from);
- a key the contract reads that appears twice at the top level is rejected (readers would
  disagree on which copy counts); duplicated extra keys are tolerated, like any extra field;
- numbers are kept as written, so huge or long numbers never fail and can be re-emitted exactly;
  a double is the nearest float64 (``inf`` past its range, found non-finite later), a long is
  exact: an integral value (``2.0`` and ``1e3`` included) within int64, else invalid.

Each record becomes one row of the contract's fields table (``schema_fields.layout``): the
JSON-level error, if any, then each slot's value, then the kinds of the checked slots.
"""

import json
import re
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal

import pyarrow as pa

from eos_assets.lib.contract.contract import Malformed
from eos_assets.lib.contract.schema_fields import Slot, layout
from eos_assets.lib.contract.stream_shape import Contract

MAX_DEPTH = 512
_INT64 = (-(2**63), 2**63 - 1)
_INT64_DIGITS = 20  # characters of the longest int64 token, -9223372036854775808

# A JSON string (escapes included) or one structural bracket, for measuring nesting depth.
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class Number(str):
    """A JSON number token exactly as written."""

    __slots__ = ()


class JsonObject(dict):
    """A JSON object that remembers which keys it held more than once."""

    __slots__ = ("duplicates",)


def as_object(members: dict[str, object]) -> JsonObject:
    """``members`` as a parsed JSON object (no key twice)."""
    return _object(list(members.items()))


def _object(pairs: list[tuple[str, object]]) -> JsonObject:
    obj = JsonObject(pairs)
    obj.duplicates = frozenset()
    if len(obj) != len(pairs):
        counts = Counter(key for key, _ in pairs)
        obj.duplicates = frozenset(key for key, count in counts.items() if count > 1)
    return obj


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object,
    parse_float=Number,
    parse_int=Number,
    parse_constant=_reject_constant,
)


def extract_careful(contract: Contract, values: Sequence[bytes | None]) -> pa.Table:
    """Return the fields table rows of ``values``, parsed one by one."""
    schema = layout(contract).schema
    rows = [careful_fields(contract, value) for value in values]
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    return pa.table(
        [pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )


def careful_fields(contract: Contract, value: bytes | None) -> tuple[object, ...]:
    """Return the fields table row of one Kafka value."""
    slots = layout(contract).slots
    if value is None:
        return failed_row(contract, None)
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return failed_row(contract, f"{Malformed.INVALID_UTF8}: {exc.reason} at byte {exc.start}")
    doc, problem = _load(text, slots)
    if problem is not None:
        return failed_row(contract, f"{Malformed.INVALID_JSON}: {problem}")
    if not isinstance(doc, JsonObject):
        return failed_row(contract, f"{Malformed.NOT_AN_OBJECT}: the value is a JSON {_kind(doc)}")
    read = [read_slot(slot, doc.get(slot.key)) for slot in slots]
    kinds = [kind for slot, (_, kind) in zip(slots, read, strict=True) if slot.checked]
    return (None, *(value for value, _ in read), *kinds)


def failed_row(contract: Contract, error: str | None) -> tuple[object, ...]:
    """The fields table row of a record that fails as a whole with ``error``."""
    if error is None:
        error = f"{Malformed.NULL_VALUE}: the record has no value (a tombstone)"
    return (error, *[None] * (len(layout(contract).schema) - 1))


def _load(text: str, slots: Sequence[Slot]) -> tuple[object, str | None]:
    """Parse JSON text; return (document, None) or (None, why it is rejected)."""
    too_deep = f"nesting deeper than {MAX_DEPTH} levels"
    if not text.strip(" \t\n\r"):
        return None, "the value is empty or blank"
    if text.startswith("\ufeff"):
        return None, "the value starts with a byte order mark (BOM)"
    if text.count("{") + text.count("[") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        return None, too_deep
    try:
        doc = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} at char {exc.pos}"
    except ValueError as exc:  # raised by _reject_constant
        return None, str(exc)
    except RecursionError:  # unreachable below MAX_DEPTH; kept so no input can escape
        return None, too_deep
    if "\\u" in text and _has_lone_surrogate(doc):
        return None, "a string holds an unpaired UTF-16 surrogate escape"
    if isinstance(doc, JsonObject) and doc.duplicates:
        twice = next((s.key for s in slots if s.key in doc.duplicates), None)
        if twice is not None:
            return None, f'duplicate key "{twice}"'
    return doc, None


def _depth(text: str) -> int:
    depth = deepest = 0
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth -= 1
    return deepest


def _has_lone_surrogate(doc: object) -> bool:
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _kind(value: object) -> str:
    if type(value) is Number:
        return "number"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bytes):  # a value of a registry format: JSON has none
        return "bytes"
    return "string" if isinstance(value, str) else "null"


def read_slot(slot: Slot, value: object) -> tuple[object, str | None]:
    """Return (value, None) when of the slot's kind, else (None or its JSON text, kind found)."""
    if value is None:
        return None, None
    kind = _kind(value)
    if kind != slot.kind:
        return (_json_text(value), None) if slot.text else (None, kind)
    if type(value) is not Number:
        return value, None
    if slot.long:
        number = _long(value)
        return number, None if number is not None else kind
    # float() of a JSON number token is exact-rounded and gives inf past the float64 range.
    return float(value), None


def _long(token: str) -> int | None:
    """The exact int64 value of a JSON number token, or None when it is not one."""
    if "." not in token and "e" not in token and "E" not in token:
        if len(token) > _INT64_DIGITS or not token.lstrip("-").isdigit():
            return None  # also keeps int() below its digit limit; nan and inf are no long
        number = int(token)
    else:
        exact = Decimal(token)
        if not exact:
            return 0
        if exact.adjusted() >= _INT64_DIGITS or exact != exact.to_integral_value():
            return None
        number = int(exact)
    return number if _INT64[0] <= number <= _INT64[1] else None


def _json_text(value: object) -> str:
    if isinstance(value, dict):
        members = (f"{json.dumps(k, ensure_ascii=False)}:{_json_text(v)}" for k, v in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    if type(value) is Number:
        return str(value)
    if isinstance(value, bytes):  # as Avro's JSON encoding writes bytes: one char a byte
        return json.dumps(value.decode("latin-1"), ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)
