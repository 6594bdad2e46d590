"""Declared alert rules over a KPI table's final rows, the alerts they raise, and the run that
raises and delivers them (delivery and ledger: ``alert_notify.py``).

A rule compares one measure of a KPI table kept from the events (``kpi_tables.py``) with a
bound, on final rows only: a row whose period ended at or before the table's watermark (the max
event time it consumed minus the stream's grace). An open hour's revenue is low because the
hour is not over, not because sales dropped. An alert is identified by ``alert_id`` = hash of
(rule, rule version, the row's key); the rule version is its comparison and bound, so a new
bound raises new alerts while evaluating the same rule again never raises one twice. The
``alert_id`` is the idempotency key of its delivery.
"""

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from eos_assets.lib.contract.stream_shape import DAY, WINDOW, KpiSpec
from eos_assets.lib.delta import delta_io, txn_ids
from eos_assets.lib.derived.windows import at, micros_of
from eos_assets.lib.outbound import alert_notify
from eos_assets.lib.outbound.alert_notify import DeliveryPolicy, NotifyOutcome

BELOW, ABOVE = "<", ">"


@dataclass(frozen=True)
class Rule:
    """``metric`` of a final row of the KPI ``kpi`` compared with ``threshold`` (``op``)."""

    name: str
    kpi: str
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
        return value < self.threshold if self.op == BELOW else value > self.threshold


def alert_id(rule: Rule, key: Sequence[Any]) -> str:
    """The deterministic id (and idempotency key) of ``rule``'s alert on the row ``key``
    (a window by its start in microseconds, a day by its ISO date)."""
    parts = [str(micros_of(v)) if isinstance(v, datetime) else str(v) for v in key]
    text = "|".join([rule.name, rule.version, *parts])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def period_end(spec: KpiSpec, row: Mapping[str, Any]) -> datetime:
    """When the period of a KPI row ends."""
    if spec.time == WINDOW:
        return row["window_end"]
    day: date = row["day"]
    return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)


def evaluate(
    spec: KpiSpec,
    rows: Iterable[Mapping[str, Any]],
    watermark: datetime | None,
    rules: Iterable[Rule],
) -> list[dict[str, Any]]:
    """The alerts ``rules`` raise on the final rows among ``rows`` of the KPI ``spec``."""
    if watermark is None or spec.time not in (WINDOW, DAY):
        return []
    key = list(spec.key)
    described = ["window_start", "window_end", *spec.by] if spec.time == WINDOW else key
    alerts = []
    for rule in rules:
        for row in rows:
            if period_end(spec, row) > watermark or not rule.breached(row[rule.metric]):
                continue
            alert = {
                "alert_id": alert_id(rule, [row[k] for k in key]),
                "rule": rule.name,
                "rule_version": rule.version,
                "kpi": spec.name,
                "metric": rule.metric,
                "value": row[rule.metric],
                "threshold": rule.threshold,
            }
            for name in described:
                value = row[name]
                alert[name] = value.isoformat() if isinstance(value, date) else value
            alert["kpi_revision"] = row["revision"]
            alerts.append(alert)
    return alerts


def notify(
    kpis: Sequence[tuple[KpiSpec, str, Sequence[Rule]]],
    ledger_uri: str,
    url: str | None,
    policy: DeliveryPolicy,
    storage_options: Mapping[str, str] | None = None,
) -> NotifyOutcome:
    """Record the alerts of the final rows of each KPI table (spec, uri, its rules); deliver
    every due one to ``url`` (None: record only)."""

    def raised() -> list[dict[str, Any]]:
        alerts = []
        for spec, uri, rules in kpis:
            metrics = sorted({r.metric for r in rules})
            window_end = ["window_end"] if spec.time == WINDOW else []
            columns = [*spec.key, *window_end, *metrics, "revision"]
            mark = delta_io.load(uri, storage_options).transaction_version(txn_ids.WATERMARK)
            rows = delta_io.read_arrow(uri, storage_options, columns).to_pylist()
            alerts += evaluate(spec, rows, None if mark is None else at(mark), rules)
        return alerts

    return alert_notify.notify(raised, ledger_uri, url, policy, storage_options)
