"""The codes of a malformed record, whatever the stream (DESIGN.md, "The event contract").

A record that breaks its stream's ``Contract`` (``lib/contract/stream_shape.py``) is kept in
bronze with ``error`` set to ``"<code>: <detail>"``. The codes of ``Malformed`` apply to every
stream; a declared payload field adds its own code (``field_code``): ``unknown_<field>`` for a
string field with declared values, ``invalid_<field>`` for any other.
"""

from enum import StrEnum

from eos_assets.lib.contract.stream_shape import STRING, PayloadField


class Malformed(StrEnum):
    """Why a record is malformed, before any payload field is looked at, in precedence order."""

    NULL_VALUE = "null_value"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_EVENT_ID = "missing_event_id"
    INVALID_EVENT_TIME = "invalid_event_time"


def field_code(field: PayloadField) -> str:
    """The code of a record whose payload ``field`` is not valid."""
    if field.type == STRING and field.values is not None:
        return f"unknown_{field.name}"
    return f"invalid_{field.name}"


def error_code(error: str | None) -> str | None:
    """Return the code of a bronze ``error`` value, or None for a valid record."""
    if error is None:
        return None
    return error.split(":", 1)[0]
