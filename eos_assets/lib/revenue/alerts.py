"""KPI alert rules and their thresholds, the alerts they raise on ``gold/kpi_window``, and the
run that raises and delivers them (delivery and ledger: ``lib/outbound/alert_notify.py``).

A rule compares one column of ``gold/kpi_window`` with a threshold, for final windows only
(window end at or before the watermark of ``gold/window_aggregates``): an open window's revenue
is low because it is not over yet, not because sales dropped. An alert is identified by
``alert_id`` = hash of (rule, rule version, window start, currency); the rule version is its
comparison and threshold, so changing a threshold raises new alerts while re-evaluating the
same rule never raises one twice. The ``alert_id`` is the idempotency key of its delivery.
"""

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived.windows import EPOCH, WATERMARK_APP, micros_of
from eos_assets.lib.outbound import alert_notify
from eos_assets.lib.outbound.alert_notify import DeliveryPolicy, NotifyOutcome

KPI_COLUMNS = ["window_start", "window_end", "currency", "revenue", "cancellation_rate", "revision"]


@dataclass(frozen=True)
class Rule:
    """``metric`` of a final window compared with ``threshold`` (``<`` or ``>``)."""

    name: str
    metric: str
    op: str
    threshold: float

    @property
    def version(self) -> str:
        """What the rule tests; a new threshold is a new version."""
        return f"{self.metric} {self.op} {self.threshold!r}"

    def breached(self, value: float | None) -> bool:
        """True when ``value`` (None: undefined, never breached) breaks the rule."""
        if value is None:
            return False
        return value < self.threshold if self.op == "<" else value > self.threshold


@dataclass(frozen=True)
class AlertPolicy(DeliveryPolicy):
    """Rules of KPI alerts and their delivery (``DeliveryPolicy``); every field has an
    ``EOS_ALERT_<FIELD NAME>`` variable (``settings.read_alert_policy``).

    Attributes:
        revenue_min: alert when a final window's revenue (per currency) is below this.
        cancellation_rate_max: alert when a final window's cancellation rate is above this.
    """

    revenue_min: float | None = None
    cancellation_rate_max: float | None = None

    def rules(self) -> list[Rule]:
        """The rules that are switched on (a threshold is set)."""
        rules = []
        if self.revenue_min is not None:
            rules.append(Rule("revenue_below", "revenue", "<", self.revenue_min))
        if self.cancellation_rate_max is not None:
            rules.append(
                Rule(
                    "cancellation_rate_above", "cancellation_rate", ">", self.cancellation_rate_max
                )
            )
        return rules


def alert_id(rule: Rule, window_start: datetime, currency: str) -> str:
    """The deterministic id (and idempotency key) of ``rule``'s alert on one window."""
    text = "|".join([rule.name, rule.version, str(micros_of(window_start)), currency])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def evaluate(
    windows: Iterable[Mapping[str, Any]], watermark: datetime | None, rules: Iterable[Rule]
) -> list[dict[str, Any]]:
    """The alerts ``rules`` raise on the final windows among ``windows`` (kpi_window rows)."""
    if watermark is None:
        return []
    alerts = []
    for rule in rules:
        for row in windows:
            if row["window_end"] > watermark or not rule.breached(row[rule.metric]):
                continue
            alerts.append(
                {
                    "alert_id": alert_id(rule, row["window_start"], row["currency"]),
                    "rule": rule.name,
                    "rule_version": rule.version,
                    "metric": rule.metric,
                    "value": row[rule.metric],
                    "threshold": rule.threshold,
                    "window_start": row["window_start"].isoformat(),
                    "window_end": row["window_end"].isoformat(),
                    "currency": row["currency"],
                    "kpi_revision": row["revision"],
                }
            )
    return alerts


def notify(
    kpi_uri: str,
    windows_uri: str,
    ledger_uri: str,
    url: str | None,
    policy: AlertPolicy,
    storage_options: Mapping[str, str] | None = None,
) -> NotifyOutcome:
    """Record the alerts of the final KPI windows; deliver every due one to ``url`` (None:
    record only)."""

    def raised() -> list[dict[str, Any]]:
        watermark = delta_io.load(windows_uri, storage_options).transaction_version(WATERMARK_APP)
        windows = delta_io.read_arrow(kpi_uri, storage_options, KPI_COLUMNS).to_pylist()
        limit = None if watermark is None else EPOCH + timedelta(microseconds=watermark)
        return evaluate(windows, limit, policy.rules())

    return alert_notify.notify(raised, ledger_uri, url, policy, storage_options)
