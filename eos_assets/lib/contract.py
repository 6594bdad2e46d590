"""The event contract of topic ``orders`` (DESIGN.md, "The event contract")."""

from enum import StrEnum

EVENT_TYPES: tuple[str, ...] = (
    "order_created",
    "order_paid",
    "order_cancelled",
    "order_refunded",
)


class Malformed(StrEnum):
    """Why a record is malformed; the bronze ``error`` column starts with ``<code>: ``."""

    NULL_VALUE = "null_value"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_EVENT_ID = "missing_event_id"
    UNKNOWN_EVENT_TYPE = "unknown_event_type"
    INVALID_EVENT_TIME = "invalid_event_time"
    INVALID_AMOUNT = "invalid_amount"


def error_code(error: str | None) -> Malformed | None:
    """Return the code of a bronze ``error`` value, or None for a valid record."""
    if error is None:
        return None
    return Malformed(error.split(":", 1)[0])
