"""The careful path: one Kafka value at a time, and the reference meaning of a value.

The bulk path (``schema_bulk``) hands here every record it cannot prove it reads exactly as
this module does, so this module defines the semantics and the bulk path only goes faster.

JSON rules, strict where Python's ``json`` is lenient:
- the text is UTF-8 (no BOM, no lone surrogates) and one JSON value with only whitespace around;
- ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON and are rejected;
- nesting deeper than ``MAX_DEPTH`` is rejected (a fixed limit rather than Python's stack depth,
  so the answer cannot depend on where the code is called from);
- a contract key that appears twice at the top level is rejected (readers would disagree on
  which copy counts); duplicated extra keys are tolerated, like any extra field;
- numbers are kept as written, so huge or long numbers never fail and can be re-emitted exactly.

Each record becomes one row of ``FIELDS_SCHEMA``: the JSON-level error, if any, then the contract
fields with, for the four checked fields, the JSON kind found when it is the wrong kind.
"""

import json
import re
from collections.abc import Sequence

import pyarrow as pa

from eos_assets.lib.contract import Malformed

MAX_DEPTH = 512
CHECKED_FIELDS = ("event_id", "event_type", "event_time", "amount")
TEXT_FIELDS = ("order_id", "customer_id", "currency")
CONTRACT_KEYS = (*CHECKED_FIELDS, *TEXT_FIELDS, "schema_version")

FIELDS_SCHEMA = pa.schema(
    [
        ("json_error", pa.string()),
        ("event_id", pa.string()),
        ("event_type", pa.string()),
        ("event_time", pa.string()),
        ("amount", pa.float64()),
        *[(f"{name}_kind", pa.string()) for name in CHECKED_FIELDS],
        *[(name, pa.string()) for name in TEXT_FIELDS],
        ("schema_version", pa.float64()),
    ]
)

# A JSON string (escapes included) or one structural bracket, for measuring nesting depth.
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class _Number(str):
    """A JSON number token exactly as written."""

    __slots__ = ()


class _Object(dict):
    """A JSON object that remembers which contract keys it held more than once."""

    __slots__ = ("duplicates",)


def _object(pairs: list[tuple[str, object]]) -> _Object:
    obj = _Object(pairs)
    obj.duplicates = ()
    if len(obj) != len(pairs):
        keys = [key for key, _ in pairs]
        obj.duplicates = tuple(name for name in CONTRACT_KEYS if keys.count(name) > 1)
    return obj


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object,
    parse_float=_Number,
    parse_int=_Number,
    parse_constant=_reject_constant,
)


def extract_careful(values: Sequence[bytes | None]) -> pa.Table:
    """Return the ``FIELDS_SCHEMA`` rows of ``values``, parsed one by one."""
    rows = [careful_fields(value) for value in values]
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(FIELDS_SCHEMA)
    return pa.table(
        [pa.array(c, f.type) for c, f in zip(columns, FIELDS_SCHEMA, strict=True)],
        schema=FIELDS_SCHEMA,
    )


def careful_fields(value: bytes | None) -> tuple[object, ...]:
    """Return the ``FIELDS_SCHEMA`` row of one Kafka value."""
    if value is None:
        return _failed(f"{Malformed.NULL_VALUE}: the record has no value (a tombstone)")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _failed(f"{Malformed.INVALID_UTF8}: {exc.reason} at byte {exc.start}")
    doc, problem = _load(text)
    if problem is not None:
        return _failed(f"{Malformed.INVALID_JSON}: {problem}")
    if not isinstance(doc, _Object):
        return _failed(f"{Malformed.NOT_AN_OBJECT}: the value is a JSON {_kind(doc)}")
    checked = [_checked(name, doc.get(name)) for name in CHECKED_FIELDS]
    texts = [_text(doc.get(name)) for name in TEXT_FIELDS]
    version = doc.get("schema_version")
    return (
        None,
        *(value for value, _ in checked),
        *(kind for _, kind in checked),
        *texts,
        float(version) if type(version) is _Number else None,
    )


def _failed(error: str) -> tuple[object, ...]:
    return (error, *[None] * (len(FIELDS_SCHEMA) - 1))


def _load(text: str) -> tuple[object, str | None]:
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
    if isinstance(doc, _Object) and doc.duplicates:
        return None, f'duplicate key "{doc.duplicates[0]}"'
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
    if type(value) is _Number:
        return "number"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string" if isinstance(value, str) else "null"


def _checked(name: str, value: object) -> tuple[object, str | None]:
    """Return (value, None) when of the expected kind, (None, kind) when not; null is missing."""
    if value is None:
        return None, None
    expected = "number" if name == "amount" else "string"
    if _kind(value) != expected:
        return None, _kind(value)
    if isinstance(value, _Number):
        # float() of a JSON number token is exact-rounded and gives inf past the float64 range.
        return float(value), None
    return value, None


def _text(value: object) -> str | None:
    """A free-text field: strings as they are, any other JSON value as compact JSON text."""
    if value is None or type(value) is str:
        return value
    return _json_text(value)


def _json_text(value: object) -> str:
    if isinstance(value, dict):
        members = (f"{json.dumps(k, ensure_ascii=False)}:{_json_text(v)}" for k, v in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    if type(value) is _Number:
        return str(value)
    return json.dumps(value, ensure_ascii=False)
