"""Offset ranges: what one run reads from each topic-partition.

Ranges are half-open ``[start, end)``. ``start`` comes from the Delta table's own ``txn`` record
(the sink is the source of truth for positions), ``end`` is the partition's last stable offset at
plan time, optionally capped so one run's size is bounded.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from eos_assets.lib.delta.txn_ids import partition_app
from eos_assets.lib.errors import EosError

TopicPartition = tuple[str, int]


class RangeDict(TypedDict):
    """An offset range as the Delta commit metadata holds it."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Number of offsets covered (records plus transaction markers and aborted records)."""
        return self.end - self.start

    @property
    def app_id(self) -> str:
        """Delta ``txn`` app id of this range's topic-partition."""
        return partition_app(self.topic, self.partition)

    def as_dict(self) -> RangeDict:
        """JSON-ready form, as written into the Delta commit metadata."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "start": self.start,
            "end": self.end,
        }


@dataclass(frozen=True)
class PartitionPlan:
    """Where one topic-partition stands between Kafka and the table at plan time.

    Attributes:
        position: next offset recorded in Delta, or None when the table has never read it.
        low: the partition's earliest retained offset.
        end: the last stable offset (read_committed end).
        start: the offset the next read starts at (never below the low watermark).
    """

    topic: str
    partition: int
    position: int | None
    low: int
    end: int
    start: int

    @property
    def lag(self) -> int:
        """Offsets not yet in the table (records, transaction markers, aborted records)."""
        return self.end - self.start

    @property
    def lost(self) -> OffsetRange | None:
        """Offsets ``[position, low)`` Kafka deleted before the table read them, if any."""
        return lost_range(self.topic, self.partition, self.position, self.low)

    @property
    def first_read(self) -> OffsetRange | None:
        """For a partition the table has never read: ``[low, start)``, the offsets its declared
        start passes over (empty when it starts at the low watermark); None once it was read."""
        if self.position is not None:
            return None
        return OffsetRange(self.topic, self.partition, self.low, self.start)


def start_offsets(
    positions: Mapping[TopicPartition, int | None],
    bounds: Mapping[TopicPartition, tuple[int, int]],
    fallback: Mapping[TopicPartition, int] | None = None,
) -> list[PartitionPlan]:
    """Decide where each partition starts.

    Args:
        positions: next offset per partition from the table's ``txn`` record (None if never read).
        bounds: ``(low watermark, last stable offset)`` per partition.
        fallback: start for partitions the table has never read (default: the low watermark).

    A partition whose position is below its low watermark starts at the low watermark; its
    plan's ``lost`` names the offsets Kafka deleted in between, and the ingest refuses to go
    past them unless told to accept the loss.

    Raises:
        EosError: the table is ahead of the topic (the topic was recreated, or this is not the
            broker the table was filled from).
    """
    plans: list[PartitionPlan] = []
    for tp in sorted(bounds):
        low, stable_end = bounds[tp]
        position = positions.get(tp)
        if position is None:
            start = (fallback or {}).get(tp, low)
            start = min(max(start, low), stable_end)
        elif position > stable_end:
            raise EosError(
                f"the table has read {tp[0]}[{tp[1]}] up to offset {position} but the topic ends "
                f"at {stable_end}: the topic was recreated or EOS_KAFKA_BOOTSTRAP points to "
                "another cluster; restore the topic or ingest into a new lake root"
            )
        else:
            start = max(position, low)
        plans.append(PartitionPlan(tp[0], tp[1], position, low, stable_end, start))
    return plans


def lost_range(topic: str, partition: int, position: int | None, low: int) -> OffsetRange | None:
    """Offsets ``[position, low)`` Kafka deleted before the table read them, if any.

    Retention (or delete-records) moved the low watermark past the table's position: these
    offsets can never be read. They may have held records, markers or aborted records; no
    one can tell any more, so every one of them counts as lost.
    """
    if position is None or position >= low:
        return None
    return OffsetRange(topic, partition, position, low)


def offsets_in(ranges: Sequence[OffsetRange]) -> int:
    """How many offsets ``ranges`` cover in all."""
    return sum(r.size for r in ranges)


def lost_ranges(plans: Sequence[PartitionPlan]) -> list[OffsetRange]:
    """The offsets Kafka deleted before the table read them, one range per partition."""
    return [lost for p in plans if (lost := p.lost) is not None]


def skipped_ranges(plans: Sequence[PartitionPlan]) -> list[OffsetRange]:
    """The retained offsets a declared start passes over, one range per never-read partition."""
    return [r for p in plans if (r := p.first_read) is not None and r.size > 0]


def accept_loss(asset: str) -> str:
    """How a user accepts offsets Kafka deleted before they were ingested into ``asset``."""
    return f"materialize {asset} once with run config accept_data_loss: true"


def loss_summary(lost: Sequence[OffsetRange]) -> str:
    """``Kafka deleted orders[0] offsets [10, 25) before they were ingested (15 offsets ...)``."""
    return (
        f"Kafka deleted {describe(lost)} before they were ingested ({offsets_in(lost)} offsets "
        "lost to retention or delete-records)"
    )


def describe(ranges: Sequence[OffsetRange], limit: int = 3) -> str:
    """``orders[0] offsets [10, 25), orders[2] offsets [4, 9)``, at most ``limit`` named."""
    named = [f"{r.topic}[{r.partition}] offsets [{r.start}, {r.end})" for r in ranges[:limit]]
    more = len(ranges) - limit
    return ", ".join(named) + (f" and {more} more partition(s)" if more > 0 else "")


def plan_ranges(
    plans: Sequence[PartitionPlan], max_records: int | None = None
) -> list[OffsetRange]:
    """Turn partition plans into ranges, sharing ``max_records`` fairly across partitions.

    Each partition gets an equal share of the cap; what a partition with little lag does not
    use goes to the others, so a capped run still reads as much as the cap allows.
    Partitions with nothing to read produce no range.
    """
    budget = {(p.topic, p.partition): p.lag for p in plans if p.lag > 0}
    if max_records is not None:
        if max_records <= 0:
            raise EosError("max_records_per_run must be positive: raise it or leave it unset")
        budget = _share(budget, max_records)
    return [
        OffsetRange(p.topic, p.partition, p.start, p.start + budget[(p.topic, p.partition)])
        for p in plans
        if budget.get((p.topic, p.partition), 0) > 0
    ]


def _share(wants: dict[TopicPartition, int], cap: int) -> dict[TopicPartition, int]:
    given = dict.fromkeys(wants, 0)
    left = cap
    hungry = sorted(tp for tp, want in wants.items() if want > 0)
    while left > 0 and hungry:
        share, extra = divmod(left, len(hungry))
        for i, tp in enumerate(hungry):
            take = min(wants[tp] - given[tp], share + (1 if i < extra else 0))
            given[tp] += take
            left -= take
        hungry = [tp for tp in hungry if given[tp] < wants[tp]]
    return given


def split_for_slots(
    ranges: Sequence[OffsetRange], slots: int, min_size: int = 10_000
) -> list[OffsetRange]:
    """Split ranges into more pieces when there are fewer ranges than task slots.

    One range per partition is the default; only when partitions are fewer than the slots are
    the largest ranges halved (never below ``min_size`` offsets) until every slot has work.
    """
    pieces = list(ranges)
    while len(pieces) < slots:
        largest = max(pieces, key=lambda r: r.size, default=None)
        if largest is None or largest.size < 2 * min_size:
            break
        mid = largest.start + largest.size // 2
        i = pieces.index(largest)
        pieces[i : i + 1] = [
            OffsetRange(largest.topic, largest.partition, largest.start, mid),
            OffsetRange(largest.topic, largest.partition, mid, largest.end),
        ]
    return sorted(pieces, key=lambda r: (r.topic, r.partition, r.start))


def merged_ends(ranges: Sequence[OffsetRange]) -> dict[TopicPartition, int]:
    """The new position (end of the last range) of each partition touched by ``ranges``."""
    ends: dict[TopicPartition, int] = {}
    for r in ranges:
        tp = (r.topic, r.partition)
        ends[tp] = max(ends.get(tp, r.end), r.end)
    return ends
