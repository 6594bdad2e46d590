"""The file-pruning predicates the incremental silver reads rely on."""

from datetime import UTC, datetime, timedelta

from eos_assets.lib.derived.silver_events import existing_files_predicate, merge_ranges

T0 = datetime(2026, 11, 21, 23, 30, tzinfo=UTC)


def test_ranges_merge_when_they_touch_or_overlap() -> None:
    m = timedelta(minutes=1)
    ranges = [(T0 + 5 * m, T0 + 6 * m), (T0, T0 + 2 * m), (T0 + 2 * m, T0 + 3 * m)]
    assert merge_ranges(ranges) == [(T0, T0 + 3 * m), (T0 + 5 * m, T0 + 6 * m)]


def test_existing_files_predicate_names_every_date_of_a_span() -> None:
    spans = [T0, T0 + timedelta(minutes=15), T0 + timedelta(hours=2)]
    predicate = existing_files_predicate(spans)
    assert predicate is not None
    first, second = predicate.split(" OR ")
    assert "event_date IN ('2026-11-21')" in first
    assert "event_time >= '2026-11-21T23:30:00+00:00'" in first
    assert "event_time < '2026-11-22T00:00:00+00:00'" in first
    assert "event_date IN ('2026-11-22')" in second
    assert existing_files_predicate([]) is None
