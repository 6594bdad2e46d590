"""Record alerts and deliver them at least once, idempotently, through the ledger.

One run: record the alerts its caller raises that the ledger does not hold yet as PENDING (an
``alert_id`` is raised once); then, in rounds,
resolve what is in flight (SENDING or UNKNOWN: a crashed run, a timeout) by asking the endpoint
whether it applied the key, and POST what is due (PENDING, retryable FAILED, in flight and not
applied) with the same key each time. Every round commits its SENDING rows before any request
and the outcomes after; rounds are ``backoff_s`` apart, doubling, until every alert succeeded or
spent ``max_attempts``. An alert that spent them stays in the ledger: FAILED, or UNKNOWN when
its last request may have been applied (later runs keep asking the endpoint about it).
"""

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from eos_assets.lib import faults
from eos_assets.lib.outbound import alert_delivery, alert_ledger
from eos_assets.lib.outbound.alert_ledger import (
    FAILED,
    IN_FLIGHT,
    PENDING,
    SENDING,
    SUCCESS,
    UNKNOWN,
)

BEFORE_SEND = "alerts_before_send"  # SENDING committed, request not sent
AFTER_SEND = "alerts_after_send"  # request answered, its outcome not in the ledger
CRASH_POINTS = (BEFORE_SEND, AFTER_SEND)

_MAX_WAIT_S = 60.0


@dataclass(frozen=True)
class DeliveryPolicy:
    """How alerts are delivered.

    Attributes:
        max_attempts: POSTs of one alert before it is given up (FAILED, kept in the ledger).
        backoff_s: wait before the second round of attempts; doubles at each round.
        timeout_s: HTTP timeout; a request without an answer in time is UNKNOWN.
        stuck_after_s: the ledger check warns about alerts SENDING or UNKNOWN longer than this.
    """

    max_attempts: int = 5
    backoff_s: float = 1.0
    timeout_s: float = 10.0
    stuck_after_s: float = 900.0


@dataclass
class NotifyOutcome:
    """What one run did; ``states`` counts every alert of the ledger by its state after it."""

    endpoint: str | None
    raised: int = 0
    delivered: int = 0
    confirmed: int = 0
    requests: int = 0
    rounds: int = 0
    gave_up: list[str] = field(default_factory=list)
    states: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def notify(
    raise_alerts: Callable[[], Iterable[Mapping[str, Any]]],
    ledger_uri: str,
    url: str | None,
    policy: DeliveryPolicy,
    storage_options: Mapping[str, str] | None = None,
) -> NotifyOutcome:
    """Record new alerts; deliver every due one to ``url`` (None: record only).

    ``raise_alerts`` is called once the ledger exists; each alert it returns is a JSON object
    with its ``alert_id``, the payload POSTed.
    """
    clock = time.monotonic()
    alert_ledger.ensure(ledger_uri, storage_options)
    states = alert_ledger.read_states(ledger_uri, storage_options)
    outcome = NotifyOutcome(endpoint=url)
    new = [a for a in raise_alerts() if a["alert_id"] not in states]
    rows = [alert_ledger.event(None, a["alert_id"], PENDING, payload=a) for a in new]
    alert_ledger.append(ledger_uri, states, rows, storage_options)
    outcome.raised = len(new)
    while url is not None:
        _resolve_in_flight(url, ledger_uri, states, policy, outcome, storage_options)
        due = _due(ledger_uri, states, policy, storage_options, outcome)
        if not due:
            break
        if outcome.rounds:
            time.sleep(min(policy.backoff_s * 2 ** (outcome.rounds - 1), _MAX_WAIT_S))
        outcome.rounds += 1
        sending = [alert_ledger.event(states[a], a, SENDING) for a in due]
        alert_ledger.append(ledger_uri, states, sending, storage_options)
        faults.crash_point(BEFORE_SEND)
        results = []
        for alert in due:
            sent = alert_delivery.post(url, alert, states[alert].payload, policy.timeout_s)
            outcome.requests += 1
            faults.crash_point(AFTER_SEND)
            results.append(
                alert_ledger.event(
                    states[alert],
                    alert,
                    sent.state,
                    http_status=sent.http_status,
                    retryable=sent.retryable,
                    detail=sent.detail,
                )
            )
            outcome.delivered += sent.state == SUCCESS
        alert_ledger.append(ledger_uri, states, results, storage_options)
    outcome.states = dict(Counter(s.state for s in states.values()))
    outcome.seconds = time.monotonic() - clock
    return outcome


def _resolve_in_flight(
    url: str,
    ledger_uri: str,
    states: dict[str, alert_ledger.AlertState],
    policy: DeliveryPolicy,
    outcome: NotifyOutcome,
    storage_options: Mapping[str, str] | None,
) -> None:
    """Ask the endpoint about every alert SENDING or UNKNOWN; record the ones it applied."""
    rows = []
    for alert, state in sorted(states.items()):
        if state.state not in IN_FLIGHT:
            continue
        answer = alert_delivery.applied(url, alert, policy.timeout_s)
        if answer:
            rows.append(alert_ledger.event(state, alert, SUCCESS, detail="applied (status)"))
            outcome.confirmed += 1
        elif state.state == SENDING:
            # A crashed run's request: sent or not, the endpoint cannot say it applied it.
            detail = "not applied (status)" if answer is False else "no status answer"
            rows.append(alert_ledger.event(state, alert, UNKNOWN, retryable=True, detail=detail))
    alert_ledger.append(ledger_uri, states, rows, storage_options)


def _due(
    ledger_uri: str,
    states: dict[str, alert_ledger.AlertState],
    policy: DeliveryPolicy,
    storage_options: Mapping[str, str] | None,
    outcome: NotifyOutcome,
) -> list[str]:
    """Alerts to POST now; the ones whose retryable failure spent the budget become final."""
    due, final = [], []
    for alert, state in sorted(states.items()):
        retry = state.state == PENDING or (state.state in (FAILED, UNKNOWN) and state.retryable)
        if not retry:
            continue
        if state.attempts < policy.max_attempts:
            due.append(alert)
        elif state.state == FAILED:
            detail = f"gave up after {state.attempts} attempts: {state.detail}"
            final.append(alert_ledger.event(state, alert, FAILED, detail=detail))
            outcome.gave_up.append(alert)
    alert_ledger.append(ledger_uri, states, final, storage_options)
    return due


def stuck(
    states: Mapping[str, alert_ledger.AlertState], older_than_s: float, now: datetime | None = None
) -> list[alert_ledger.AlertState]:
    """Alerts SENDING or UNKNOWN for longer than ``older_than_s``."""
    limit = (now or datetime.now(UTC)) - timedelta(seconds=older_than_s)
    return [s for s in states.values() if s.state in IN_FLIGHT and s.at < limit]
