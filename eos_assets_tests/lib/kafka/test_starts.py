"""Where a partition never read starts, as declared: the planning alone, no broker."""

import pytest

from eos_assets.lib.errors import EosError
from eos_assets.lib.ingest.ranges import OffsetRange, plan_ranges, skipped_ranges, start_offsets
from eos_assets.lib.kafka.starts import declared_starts, start_ms

# t[0] has offsets [5, 30) retained and was never read; t[1] was read up to 12 of [0, 40);
# t[2] is empty.
BOUNDS = {("t", 0): (5, 30), ("t", 1): (0, 40), ("t", 2): (7, 7)}
POSITIONS: dict[tuple[str, int], int | None] = {("t", 0): None, ("t", 1): 12}


def plan(start: str, at_time: dict[tuple[str, int], int | None] | None = None):
    firsts = declared_starts(start, BOUNDS, POSITIONS, at_time)
    return firsts, start_offsets(POSITIONS, BOUNDS, firsts)


def test_earliest_starts_at_the_low_watermark_and_skips_nothing() -> None:
    firsts, plans = plan("earliest")
    assert firsts == {("t", 0): 5, ("t", 2): 7}
    assert [p.start for p in plans] == [5, 12, 7]
    assert skipped_ranges(plans) == []


def test_latest_starts_at_the_last_stable_offset_and_names_what_it_passes_over() -> None:
    firsts, plans = plan("latest")
    assert firsts == {("t", 0): 30, ("t", 2): 7}
    # A partition read before continues from its position, whatever the declaration says.
    assert [(p.partition, p.start, p.lag) for p in plans] == [(0, 30, 0), (1, 12, 28), (2, 7, 0)]
    assert skipped_ranges(plans) == [OffsetRange("t", 0, 5, 30)]
    # Every never-read partition has a first read to pin, even one with nothing skipped.
    assert [p.first_read for p in plans] == [
        OffsetRange("t", 0, 5, 30),
        None,
        OffsetRange("t", 2, 7, 7),
    ]
    assert plan_ranges(plans) == [OffsetRange("t", 1, 12, 40)]


def test_a_time_starts_at_the_first_offset_at_or_after_it() -> None:
    firsts, plans = plan("2026-11-25T10:00:00+01:00", {("t", 0): 17, ("t", 2): None})
    assert firsts == {("t", 0): 17, ("t", 2): 7}
    assert skipped_ranges(plans) == [OffsetRange("t", 0, 5, 17)]
    assert plan_ranges(plans) == [OffsetRange("t", 0, 17, 30), OffsetRange("t", 1, 12, 40)]


def test_a_time_after_every_record_starts_at_the_last_stable_offset() -> None:
    for none_yet in (None, -1):
        firsts, _ = plan("2999-01-01T00:00:00Z", {("t", 0): none_yet, ("t", 2): none_yet})
        assert firsts == {("t", 0): 30, ("t", 2): 7}


def test_an_offset_outside_the_retained_log_is_clamped_into_it() -> None:
    firsts, _ = plan("2026-11-25T10:00:00Z", {("t", 0): 2, ("t", 2): 99})
    assert firsts == {("t", 0): 5, ("t", 2): 7}


def test_start_times_need_a_zone() -> None:
    assert start_ms("latest") is None and start_ms("earliest") is None
    assert start_ms("2026-11-25T10:00:00+01:00") == start_ms("2026-11-25T09:00:00Z")
    assert start_ms("1970-01-01T00:00:01Z") == 1000
    for bad in ("2026-11-25T10:00:00", "yesterday", ""):
        with pytest.raises(EosError, match="not earliest, latest or an ISO-8601 time"):
            start_ms(bad)
