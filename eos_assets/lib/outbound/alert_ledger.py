"""The ledger of alerts and of every delivery attempt: an append-only Delta table.

Each row is one event of one alert; the alert's state is its latest event (highest ``seq``):

- ``PENDING``: raised, not sent yet (the row carries the alert as JSON in ``payload``);
- ``SENDING``: an attempt is about to send it; committed *before* the request goes out, so a
  crash during the request leaves a SENDING row for the next run to resolve;
- ``SUCCESS``: the endpoint accepted it (2xx) or says it has applied its key;
- ``FAILED``: the endpoint refused it, or the request could not be sent; retried with the same
  key while the attempt budget lasts, then kept as the final state (``detail`` says so);
- ``UNKNOWN``: the request may have been applied (timeout, connection lost after sending).

A row is never updated or deleted: the history of every alert stays readable.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from eos_assets.lib.contract.schema_time import UTC_MICROS
from eos_assets.lib.delta import delta_io

PENDING, SENDING, SUCCESS, FAILED, UNKNOWN = "PENDING", "SENDING", "SUCCESS", "FAILED", "UNKNOWN"
STATES = (PENDING, SENDING, SUCCESS, FAILED, UNKNOWN)
IN_FLIGHT = (SENDING, UNKNOWN)

LEDGER_SCHEMA = pa.schema(
    [
        ("alert_id", pa.string()),
        ("seq", pa.int64()),
        ("state", pa.string()),
        ("at", UTC_MICROS),
        ("attempt", pa.int64()),
        ("http_status", pa.int64()),
        ("retryable", pa.bool_()),
        ("detail", pa.string()),
        ("payload", pa.string()),
    ]
)


@dataclass(frozen=True)
class AlertState:
    """An alert as the ledger knows it: its latest event and the attempts made so far."""

    alert_id: str
    state: str
    seq: int
    at: datetime
    attempts: int
    retryable: bool
    detail: str | None
    payload: Mapping[str, Any]


def ensure(uri: str, storage_options: Mapping[str, str] | None = None) -> None:
    """Create the ledger table unless it exists."""
    delta_io.ensure_table(uri, LEDGER_SCHEMA, storage_options=storage_options)


def read_states(
    uri: str, storage_options: Mapping[str, str] | None = None
) -> dict[str, AlertState]:
    """The current state of every alert in the ledger."""
    events = sorted(
        delta_io.read_arrow(uri, storage_options).to_pylist(),
        key=lambda r: (r["alert_id"], r["seq"], r["at"]),
    )
    states: dict[str, AlertState] = {}
    for row in events:
        states[row["alert_id"]] = apply(states.get(row["alert_id"]), row)
    return states


def apply(previous: AlertState | None, row: Mapping[str, Any]) -> AlertState:
    """The state of an alert after ledger row ``row``."""
    payload = json.loads(row["payload"]) if row["payload"] else None
    return AlertState(
        alert_id=row["alert_id"],
        state=row["state"],
        seq=row["seq"],
        at=row["at"],
        attempts=(previous.attempts if previous else 0) + (row["state"] == SENDING),
        retryable=bool(row["retryable"]),
        detail=row["detail"],
        payload=payload or (previous.payload if previous else {}),
    )


def event(
    previous: AlertState | None,
    alert_id: str,
    state: str,
    *,
    http_status: int | None = None,
    retryable: bool = False,
    detail: str | None = None,
    payload: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The next ledger row of an alert whose latest known state is ``previous``."""
    return {
        "alert_id": alert_id,
        "seq": 0 if previous is None else previous.seq + 1,
        "state": state,
        "at": datetime.now(UTC),
        "attempt": (previous.attempts if previous else 0) + (1 if state == SENDING else 0),
        "http_status": http_status,
        "retryable": retryable,
        "detail": detail,
        "payload": json.dumps(payload, sort_keys=True) if payload is not None else None,
    }


def append(
    uri: str,
    states: dict[str, AlertState],
    rows: Sequence[Mapping[str, Any]],
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """Commit ``rows`` in one Delta commit (nothing when empty), then advance ``states``."""
    if not rows:
        return
    write_deltalake(
        uri,
        pa.Table.from_pylist(list(rows), schema=LEDGER_SCHEMA),
        mode="append",
        storage_options=dict(storage_options or {}),
    )
    for row in rows:
        states[row["alert_id"]] = apply(states.get(row["alert_id"]), row)
