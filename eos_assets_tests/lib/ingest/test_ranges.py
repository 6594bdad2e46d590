import itertools

import pytest

from eos_assets.lib.errors import EosError
from eos_assets.lib.ingest.ingest import SMALL_READ, task_count
from eos_assets.lib.ingest.ranges import (
    OffsetRange,
    describe,
    lost_ranges,
    merged_ends,
    plan_ranges,
    split_for_slots,
    start_offsets,
)


def test_start_from_table_position_else_low_watermark() -> None:
    plans = start_offsets(
        {("t", 0): 40, ("t", 1): None},
        {("t", 0): (0, 100), ("t", 1): (7, 50)},
    )
    assert [(p.partition, p.start, p.lag) for p in plans] == [(0, 40, 60), (1, 7, 43)]


def test_position_below_the_low_watermark_names_the_lost_offsets() -> None:
    plans = start_offsets(
        {("t", 0): 10, ("t", 1): 25, ("t", 2): 4},
        {("t", 0): (25, 30), ("t", 1): (25, 40), ("t", 2): (9, 9)},
    )
    assert [(p.start, p.lost) for p in plans] == [
        (25, OffsetRange("t", 0, 10, 25)),
        (25, None),
        (9, OffsetRange("t", 2, 4, 9)),
    ]
    # A partition with nothing left to read still has its loss named.
    assert lost_ranges(plans) == [OffsetRange("t", 0, 10, 25), OffsetRange("t", 2, 4, 9)]
    assert plan_ranges(plans) == [OffsetRange("t", 0, 25, 30), OffsetRange("t", 1, 25, 40)]


def test_a_partition_never_read_loses_nothing_by_starting_at_the_low_watermark() -> None:
    (plan,) = start_offsets({}, {("t", 0): (25, 30)})
    assert (plan.start, plan.lost) == (25, None)


def test_lost_ranges_are_described_in_one_line() -> None:
    lost = [OffsetRange("t", p, 10 * p, 10 * p + 5) for p in range(5)]
    assert describe(lost[:1]) == "t[0] offsets [0, 5)"
    assert describe(lost) == (
        "t[0] offsets [0, 5), t[1] offsets [10, 15), t[2] offsets [20, 25) and 2 more partition(s)"
    )


def test_table_ahead_of_topic_is_a_clear_error() -> None:
    with pytest.raises(EosError, match="recreated"):
        start_offsets({("t", 0): 500}, {("t", 0): (0, 30)})


def test_fallback_start_is_clamped_to_the_partition() -> None:
    plans = start_offsets({}, {("t", 0): (5, 30), ("t", 1): (0, 30)}, {("t", 0): 0, ("t", 1): 99})
    assert [p.start for p in plans] == [5, 30]


def test_ranges_are_half_open_and_idle_partitions_are_left_out() -> None:
    plans = start_offsets({("t", 0): 10, ("t", 1): 20}, {("t", 0): (0, 10), ("t", 1): (0, 35)})
    assert plan_ranges(plans) == [OffsetRange("t", 1, 20, 35)]


def test_cap_is_shared_and_unused_share_goes_to_others() -> None:
    bounds = {("t", 0): (0, 3), ("t", 1): (0, 100), ("t", 2): (0, 100)}
    ranges = plan_ranges(start_offsets({}, bounds), max_records=60)
    assert [r.size for r in ranges] == [3, 29, 28]
    assert sum(r.size for r in ranges) == 60


def test_cap_must_be_positive() -> None:
    with pytest.raises(EosError):
        plan_ranges(start_offsets({}, {("t", 0): (0, 3)}), max_records=0)


def test_split_only_when_fewer_ranges_than_slots_and_pieces_tile() -> None:
    r = OffsetRange("t", 0, 100, 100_100)
    pieces = split_for_slots([r], slots=4, min_size=1000)
    assert len(pieces) == 4
    assert pieces[0].start == 100 and pieces[-1].end == 100_100
    assert all(a.end == b.start for a, b in itertools.pairwise(pieces))
    assert split_for_slots([r, OffsetRange("t", 1, 0, 10)], slots=2) == [
        r,
        OffsetRange("t", 1, 0, 10),
    ]
    assert split_for_slots([OffsetRange("t", 0, 0, 50)], slots=8, min_size=100) == [
        OffsetRange("t", 0, 0, 50)
    ]


def test_small_reads_take_no_more_tasks_than_slots_big_ones_one_per_range() -> None:
    small = [OffsetRange("t", p, 0, 1500) for p in range(6)]
    assert task_count(small, slots=2) == 2
    assert task_count(small[:1], slots=2) == 1
    big = [OffsetRange("t", p, 0, SMALL_READ // 3) for p in range(6)]
    assert task_count(big, slots=2) == 6
    assert task_count([], slots=2) == 1


def test_merged_ends_take_the_last_piece() -> None:
    pieces = [OffsetRange("t", 0, 0, 5), OffsetRange("t", 0, 5, 9), OffsetRange("u", 1, 3, 4)]
    assert merged_ends(pieces) == {("t", 0): 9, ("u", 1): 4}
