"""Burrow-style lag status, the launch rule, run keys and the thresholds: pure functions."""

import pytest

from eos_assets.lib.checks.audit import spans
from eos_assets.lib.checks.limits import Limits
from eos_assets.lib.errors import ConfigError
from eos_assets.lib.kafka.burrow import (
    LagHistory,
    Sample,
    Status,
    decide,
    evaluate,
    run_key,
    worst,
)
from eos_assets.settings import read_limits


def window(*points: tuple[int, int], every: float = 30.0) -> list[Sample]:
    """Samples ``(start, end)`` taken every ``every`` seconds from t=0."""
    return [Sample(i * every, start, end) for i, (start, end) in enumerate(points)]


def status(samples: list[Sample], moved_at: float = 0.0, stop_after: float = 900.0) -> Status:
    return evaluate(samples, moved_at, samples[-1].at, stop_after).status


def test_any_sample_without_lag_is_ok() -> None:
    assert status(window((10, 10), (10, 50), (10, 90))) is Status.OK


def test_offsets_not_moving_with_lag_is_stall() -> None:
    verdict = evaluate(window((10, 20), (10, 30), (10, 40)), 0.0, 60.0, 900.0)
    assert verdict.status is Status.STALL
    assert verdict.reason == "position 10 did not move over 3 samples, lag 30"


def test_moving_but_lag_never_shrinking_is_warn() -> None:
    assert status(window((10, 20), (15, 30), (20, 40))) is Status.WARN
    assert status(window((10, 20), (15, 25), (20, 30))) is Status.WARN  # steady lag


def test_lag_shrinking_is_ok() -> None:
    assert status(window((10, 40), (30, 50), (45, 55))) is Status.OK
    # One shrink in the window is enough (Burrow: lag must grow between *every* pair for WARN).
    assert status(window((10, 20), (15, 30), (30, 40), (35, 50))) is Status.OK


def test_no_progress_for_too_long_is_stop() -> None:
    samples = window((10, 20), (10, 30), (10, 40))
    verdict = evaluate(samples, moved_at=-1000.0, now=60.0, stop_after_s=900.0)
    assert verdict.status is Status.STOP
    assert verdict.reason == "no progress for 1060s (limit 900s), lag 30"


def test_too_few_samples_are_not_judged() -> None:
    assert status(window((10, 20), (10, 30))) is Status.OK


def test_worst_orders_the_statuses() -> None:
    assert worst([Status.OK, Status.STALL, Status.WARN]) is Status.STALL
    assert worst([Status.STOP, Status.STALL]) is Status.STOP
    assert worst([]) is Status.OK


def test_history_round_trips_keeps_a_window_and_notes_progress() -> None:
    history = LagHistory()
    for i, start in enumerate([0, 0, 5, 5, 5]):
        history.add("orders:0", Sample(float(i), start, 10), size=3)
    history.add("gone:0", Sample(0.0, 0, 1), size=3)
    history.requested = "ingest-abc"
    history.full_at = 1.5
    back = LagHistory.from_json(history.to_json())
    assert back == history
    assert [s.at for s in back.windows["orders:0"]] == [2.0, 3.0, 4.0]
    assert back.moved_at["orders:0"] == 2.0
    back.retain(["orders:0"])
    assert list(back.windows) == ["orders:0"] and list(back.moved_at) == ["orders:0"]
    assert back.evaluate(now=4.0, stop_after_s=900.0)["orders:0"].status is Status.STALL
    assert LagHistory.from_json("not json") == LagHistory()
    assert LagHistory.from_json(None) == LagHistory()


def test_a_run_is_lean_only_soon_after_a_full_one() -> None:
    history = LagHistory()
    assert not history.lean(now=100.0, every_s=30)  # no full run yet
    history.full_at = 80.0
    assert history.lean(now=100.0, every_s=30)
    assert not history.lean(now=110.0, every_s=30)
    assert not history.lean(now=70.0, every_s=30)  # a clock that went back: run everything


def test_decide_launches_on_records_age_or_markers_and_says_why_not() -> None:
    assert not decide(0, None, 100, 60).launch
    assert decide(100, None, 100, 60).reason == "lag 100 offsets reached EOS_LAG_MAX_RECORDS=100"
    assert decide(5, 61.0, 100, 60).launch
    assert decide(5, 0.0, 100, 60, only_markers=True).launch
    wait = decide(5, 12.4, 100, 60)
    assert not wait.launch
    assert wait.reason == (
        "waiting: lag 5 offsets < EOS_LAG_MAX_RECORDS=100 and oldest pending record 12s old "
        "< EOS_LAG_MAX_AGE_S=60"
    )


def test_run_key_depends_only_on_the_planned_ranges() -> None:
    spans = {("orders", 0): (0, 10), ("orders", 1): (3, 7)}
    assert run_key(spans) == run_key(dict(reversed(spans.items())))
    assert run_key(spans) != run_key({**spans, ("orders", 1): (3, 8)})
    # A capped run moved the start: the backlog it left is a new ingest.
    assert run_key(spans) != run_key({**spans, ("orders", 0): (5, 10)})


def test_limits_from_env() -> None:
    limits = read_limits({"EOS_LAG_MAX_RECORDS": "5", "EOS_MALFORMED_MAX_RATE": "0.2"})
    assert (limits.lag_max_records, limits.malformed_max_rate) == (5, 0.2)
    assert read_limits({}) == Limits()
    with pytest.raises(ConfigError, match=r"^EOS_LAG_WINDOW='-3' is not a positive whole number"):
        read_limits({"EOS_LAG_WINDOW": "-3"})
    with pytest.raises(ConfigError, match="EOS_AUDIT_BUDGET_S='soon'"):
        read_limits({"EOS_AUDIT_BUDGET_S": "soon"})


def test_spans_compress_offsets() -> None:
    assert spans([9, 3, 4, 5, 11]) == ["3-5", "9", "11"]
    assert spans(range(0, 40, 2), limit=3) == ["0", "2", "4"]
    assert spans([]) == []
