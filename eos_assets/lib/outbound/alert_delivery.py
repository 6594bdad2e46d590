"""HTTP delivery of one alert with its idempotency key, and the status question by key.

``POST <url>`` with the alert as JSON and the header ``Idempotency-Key: <alert_id>``; an
endpoint that honours the key applies each key once and answers a repeat with the first
result. ``GET <url>/<alert_id>`` asks whether a key was applied: 200 yes, 404 no, anything else
is no answer (the caller then retries the POST with the same key, which is safe).

Outcomes: 2xx is SUCCESS; an HTTP error status is FAILED (retryable for 408, 409, 425, 429 and
5xx, final for the other 4xx); a refused connection is FAILED and retryable (nothing was
sent); a timeout or a connection lost after connecting is UNKNOWN (it may have been applied).
"""

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from eos_assets.lib.outbound.alert_ledger import FAILED, SUCCESS, UNKNOWN

IDEMPOTENCY_HEADER = "Idempotency-Key"
_RETRYABLE_4XX = (408, 409, 425, 429)


@dataclass(frozen=True)
class Outcome:
    """What one POST achieved."""

    state: str
    http_status: int | None
    retryable: bool
    detail: str


def post(url: str, alert_id: str, alert: Mapping[str, Any], timeout_s: float) -> Outcome:
    """POST ``alert`` to ``url`` with ``alert_id`` as its idempotency key."""
    request = urllib.request.Request(
        url,
        data=json.dumps(dict(alert), sort_keys=True).encode(),
        headers={"Content-Type": "application/json", IDEMPOTENCY_HEADER: alert_id},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
            return Outcome(SUCCESS, response.status, False, f"HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        retryable = exc.code >= 500 or exc.code in _RETRYABLE_4XX
        return Outcome(FAILED, exc.code, retryable, f"HTTP {exc.code} {exc.reason}")
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return Outcome(FAILED, None, True, f"connection refused: {exc.reason}")
        return Outcome(UNKNOWN, None, True, f"no answer: {_one_line(exc.reason)}")
    except (TimeoutError, http.client.HTTPException, OSError) as exc:
        return Outcome(UNKNOWN, None, True, f"no answer: {_one_line(exc)}")


def applied(url: str, alert_id: str, timeout_s: float) -> bool | None:
    """Whether the endpoint applied ``alert_id``: True, False, or None when it cannot tell."""
    target = f"{url.rstrip('/')}/{quote(alert_id, safe='')}"
    try:
        with urllib.request.urlopen(target, timeout=timeout_s) as response:
            response.read()
            return 200 <= response.status < 300
    except urllib.error.HTTPError as exc:
        return False if exc.code == 404 else None
    except (urllib.error.URLError, TimeoutError, http.client.HTTPException, OSError):
        return None


def _one_line(reason: object) -> str:
    return " ".join(str(reason).split())[:200] or type(reason).__name__
