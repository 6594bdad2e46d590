"""KPI alerts reach a real HTTP endpoint at least once with one idempotency key per alert, so
that an endpoint honouring the key applies each exactly once, through crashes, failures,
timeouts and an endpoint that is down; the ledger ends in agreement with the endpoint."""

from collections import Counter
from pathlib import Path

import pytest

from eos_assets.lib.delta import delta_io, txn_ids
from eos_assets.lib.derived.windows import at
from eos_assets.lib.outbound import alert_ledger, alert_notify, alert_rules
from eos_assets.lib.outbound.alert_ledger import FAILED, PENDING, SENDING, SUCCESS
from eos_assets.lib.outbound.alert_notify import DeliveryPolicy, NotifyOutcome
from eos_assets_tests.faults.harness import Ledger
from eos_assets_tests.outbound.conftest import (
    CANCELLATION_MAX,
    ENV,
    REVENUE_MIN,
    kpi_uri,
    run_outbound,
)
from eos_assets_tests.outbound.endpoint import Endpoint, closed_port_url
from eos_assets_tests.outbound.run_once import kpi_window_rules


def policy(**changes: float) -> DeliveryPolicy:
    values = {"max_attempts": 3, "backoff_s": 0.05, "timeout_s": 5.0} | changes
    return DeliveryPolicy(**values)  # type: ignore[arg-type]


def notify(lake: Path, ledger: str, url: str | None, delivery: DeliveryPolicy) -> NotifyOutcome:
    """One run of the orders stream's declared rules over the lake's KPI window table."""
    return alert_rules.notify(kpi_window_rules(kpi_uri(lake)), ledger, url, delivery)


def expected(lake: Path) -> set[tuple[str, str, str]]:
    """(rule, window start, currency) of every final window breaking a rule, from the tables:
    final is a window that ended by the KPI window table's own watermark."""
    watermark = delta_io.load(kpi_uri(lake)).transaction_version(txn_ids.WATERMARK)
    assert watermark is not None
    final = [
        r
        for r in delta_io.read_arrow(kpi_uri(lake)).to_pylist()
        if r["window_end"] <= at(watermark)
    ]
    low = {
        ("revenue_below", r["window_start"], r["currency"])
        for r in final
        if r["revenue"] < REVENUE_MIN
    }
    high = {
        ("cancellation_rate_above", r["window_start"], r["currency"])
        for r in final
        if r["cancellation_rate"] is not None and r["cancellation_rate"] > CANCELLATION_MAX
    }
    return {(rule, start.isoformat(), currency) for rule, start, currency in low | high}


def score(endpoint: Endpoint, want: set[tuple[str, str, str]]) -> tuple[int, int, int]:
    """(applied twice, lost, invented): alerts the endpoint applied under several keys, alerts
    it never applied, and applications that are no alert of the tables."""
    alerts = Counter(
        (b["rule"], b["window_start"], b["currency"]) for b in endpoint.applied.values()
    )
    twice = sum(n - 1 for n in alerts.values() if n > 1)
    return twice, len(want - alerts.keys()), len(alerts.keys() - want)


def final_states(ledger: str) -> dict[str, str]:
    return {a: s.state for a, s in alert_ledger.read_states(ledger).items()}


@pytest.mark.parametrize("point", alert_notify.CRASH_POINTS)
def test_a_notifier_killed_at_any_point_and_rerun_applies_each_alert_once(
    point: str, kpi_lake: Path, endpoint: Endpoint, tmp_path: Path, outbound_ledger: Ledger
) -> None:
    lake = kpi_lake
    ledger = str(tmp_path / "ledger")
    args = ["notify", "--kpi", kpi_uri(lake), "--ledger", ledger]
    args += ["--url", endpoint.url]
    killed = run_outbound(*args, crash_at=point, env=ENV)
    assert killed.killed, killed.tail()
    want = expected(lake)
    # The SENDING rows were durable before any request went out.
    assert set(final_states(ledger).values()) == {SENDING}
    assert len(final_states(ledger)) == len(want) >= 5
    assert len(endpoint.posts) == (0 if point == alert_notify.BEFORE_SEND else 1)
    rerun = run_outbound(*args, env=ENV)
    assert rerun.outcome and rerun.outcome["ok"], rerun.tail()
    twice, lost, invented = score(endpoint, want)
    outbound_ledger.record(f"alerts: notifier SIGKILL at {point}", 1, lost, twice)
    assert (twice, lost, invented) == (0, 0, 0)
    assert set(final_states(ledger).values()) == {SUCCESS}
    assert set(endpoint.applied) == set(final_states(ledger))
    posts = Counter(endpoint.posts)
    if point == alert_notify.AFTER_SEND:
        assert rerun.outcome["confirmed"] == 1, "the applied one is confirmed by its key"
    assert set(posts.values()) == {1}, "no alert is POSTed again once the endpoint has it"


def test_an_endpoint_failing_then_recovering_gets_each_alert_once(
    kpi_lake: Path, endpoint: Endpoint, tmp_path: Path, outbound_ledger: Ledger
) -> None:
    lake, ledger = kpi_lake, str(tmp_path / "ledger")
    want = expected(lake)
    endpoint.behaviour.fail_next = len(want) + 2  # the whole first round and two more
    outcome = notify(lake, ledger, endpoint.url, policy())
    twice, lost, invented = score(endpoint, want)
    outbound_ledger.record("alerts: endpoint answers 500, then recovers", 1, lost, twice)
    assert (twice, lost, invented) == (0, 0, 0)
    assert outcome.rounds >= 2 and outcome.requests == len(want) * 2 + 2
    assert set(final_states(ledger).values()) == {SUCCESS}


def test_a_timeout_after_the_endpoint_applied_is_resolved_by_asking_it(
    kpi_lake: Path, endpoint: Endpoint, tmp_path: Path, outbound_ledger: Ledger
) -> None:
    lake, ledger = kpi_lake, str(tmp_path / "ledger")
    endpoint.behaviour.hang_next, endpoint.behaviour.hang_s = 2, 3.0
    outcome = notify(lake, ledger, endpoint.url, policy(timeout_s=0.5))
    want = expected(lake)
    twice, lost, invented = score(endpoint, want)
    outbound_ledger.record("alerts: timeout after the endpoint applied", 2, lost, twice)
    assert (twice, lost, invented) == (0, 0, 0)
    assert outcome.confirmed == 2 and outcome.requests == len(want)
    assert set(final_states(ledger).values()) == {SUCCESS}
    events = delta_io.read_arrow(ledger).to_pylist()
    assert sum(1 for e in events if e["state"] == "UNKNOWN") == 2


def test_failures_that_outlast_the_retry_budget_stay_failed_in_the_ledger(
    kpi_lake: Path, endpoint: Endpoint, tmp_path: Path, outbound_ledger: Ledger
) -> None:
    lake = kpi_lake
    want = expected(lake)
    down = str(tmp_path / "down")
    outcome = notify(lake, down, closed_port_url(), policy())
    assert len(outcome.gave_up) == len(want) and outcome.requests == 3 * len(want)
    assert set(final_states(down).values()) == {FAILED}
    endpoint.behaviour.fail_always = True
    refused = str(tmp_path / "refused")
    outcome = notify(lake, refused, endpoint.url, policy())
    assert len(outcome.gave_up) == len(want) and Counter(endpoint.posts).most_common(1)[0][1] == 3
    assert set(final_states(refused).values()) == {FAILED} and endpoint.applied == {}
    again = notify(lake, refused, endpoint.url, policy())
    assert again.requests == 0 and set(final_states(refused).values()) == {FAILED}
    outbound_ledger.record("alerts: endpoint down / failing for good", 2, 0, 0, "FAILED, kept")


def test_without_an_endpoint_alerts_are_recorded_and_delivered_once_one_is_set(
    kpi_lake: Path, endpoint: Endpoint, tmp_path: Path
) -> None:
    lake, ledger = kpi_lake, str(tmp_path / "ledger")
    want = expected(lake)
    quiet = notify(lake, ledger, None, policy())
    assert (quiet.raised, quiet.requests, quiet.states) == (len(want), 0, {PENDING: len(want)})
    again = notify(lake, ledger, None, policy())
    assert again.raised == 0, "re-evaluating raises nothing twice"
    loud = notify(lake, ledger, endpoint.url, policy())
    assert (loud.raised, loud.delivered, loud.states) == (0, len(want), {SUCCESS: len(want)})
    assert score(endpoint, want) == (0, 0, 0)
