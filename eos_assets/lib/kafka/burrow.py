"""Consumer-lag status over a window of samples, in the spirit of LinkedIn Burrow's rules.

One sample per sensor tick and topic-partition: when it was taken, the next offset recorded in
Delta (where the next ingest starts) and the last stable offset. Over the window, in order:

1. **OK** when any sample of the window has no lag (the table caught up).
2. **STOP** when there is lag and the position has not moved for longer than ``stop_after_s``.
3. **OK** while the window holds fewer than ``min_samples`` samples (not enough to judge).
4. **STALL** when the position did not move over the whole window although there is lag.
5. **WARN** when the position moved but the lag never shrank between two samples.
6. **OK** otherwise (the lag is shrinking).

The samples live in the sensor's cursor as JSON (``LagHistory``), so the status survives
daemon restarts; nothing here talks to Kafka, Delta or Dagster.
"""

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class Status(StrEnum):
    """Partition status, from healthy to worst."""

    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"


_RANK = {s: i for i, s in enumerate(Status)}


def worst(statuses: Iterable[Status]) -> Status:
    """The worst of ``statuses`` (OK when there are none)."""
    return max(statuses, key=_RANK.__getitem__, default=Status.OK)


@dataclass(frozen=True)
class Sample:
    """One observation of a topic-partition."""

    at: float
    start: int
    end: int

    @property
    def lag(self) -> int:
        """Offsets between the table's position and the last stable offset."""
        return max(0, self.end - self.start)


@dataclass(frozen=True)
class Verdict:
    """A status and the one-line reason for it."""

    status: Status
    reason: str


def evaluate(
    window: Sequence[Sample],
    moved_at: float,
    now: float,
    stop_after_s: float,
    min_samples: int = 3,
) -> Verdict:
    """Apply the rules above to one partition's ``window`` (oldest first, not empty).

    Args:
        window: the latest samples of the partition, oldest first.
        moved_at: when the partition's position was last seen to change (or first seen).
        now: the current time, in the samples' clock.
        stop_after_s: lag without any progress for longer than this is STOP.
        min_samples: fewer samples than this are not enough for STALL or WARN.
    """
    last = window[-1]
    if any(s.lag == 0 for s in window):
        return Verdict(Status.OK, "caught up within the window")
    idle = now - moved_at
    if idle > stop_after_s:
        return Verdict(
            Status.STOP, f"no progress for {idle:.0f}s (limit {stop_after_s:.0f}s), lag {last.lag}"
        )
    if len(window) < min_samples:
        return Verdict(Status.OK, f"lag {last.lag}; {len(window)} of {min_samples} samples")
    if window[0].start == last.start:
        return Verdict(
            Status.STALL,
            f"position {last.start} did not move over {len(window)} samples, lag {last.lag}",
        )
    if all(b.lag >= a.lag for a, b in itertools.pairwise(window)):
        return Verdict(
            Status.WARN, f"position moves but lag does not shrink ({window[0].lag} -> {last.lag})"
        )
    return Verdict(Status.OK, f"lag shrinking ({window[0].lag} -> {last.lag})")


@dataclass
class LagHistory:
    """The sensor's memory between ticks, stored as its cursor.

    Attributes:
        windows: the latest samples per partition key (``topic:partition``), oldest first.
        moved_at: when each partition's position was last seen to change.
        requested: run key of the last ingest the sensor requested.
        full_at: when the sensor last requested a run of every asset (not only the KPI path).
    """

    windows: dict[str, list[Sample]] = field(default_factory=dict)
    moved_at: dict[str, float] = field(default_factory=dict)
    requested: str | None = None
    full_at: float | None = None

    @classmethod
    def from_json(cls, text: str | None) -> "LagHistory":
        """Rebuild from a cursor (None or an unreadable cursor: an empty history)."""
        try:
            raw = json.loads(text or "{}")
            return cls(
                windows={k: [Sample(*s) for s in v] for k, v in raw.get("windows", {}).items()},
                moved_at={k: float(v) for k, v in raw.get("moved_at", {}).items()},
                requested=raw.get("requested"),
                full_at=raw.get("full_at"),
            )
        except (ValueError, TypeError, AttributeError):
            return cls()

    def to_json(self) -> str:
        """Serialise for the cursor."""
        return json.dumps(
            {
                "windows": {
                    k: [[s.at, s.start, s.end] for s in v] for k, v in self.windows.items()
                },
                "moved_at": self.moved_at,
                "requested": self.requested,
                "full_at": self.full_at,
            },
            sort_keys=True,
        )

    def add(self, key: str, sample: Sample, size: int) -> None:
        """Append ``sample`` to the window of ``key`` (keeping ``size``) and note progress."""
        window = self.windows.setdefault(key, [])
        if not window or window[-1].start != sample.start:
            self.moved_at[key] = sample.at
        window.append(sample)
        del window[:-size]

    def lean(self, now: float, every_s: float) -> bool:
        """Whether a run of every asset was requested less than ``every_s`` seconds ago."""
        return self.full_at is not None and 0 <= now - self.full_at < every_s

    def retain(self, keys: Iterable[str]) -> None:
        """Forget partitions that are no longer watched (a topic left ``EOS_TOPICS``)."""
        keep = set(keys)
        self.windows = {k: v for k, v in self.windows.items() if k in keep}
        self.moved_at = {k: v for k, v in self.moved_at.items() if k in keep}

    def evaluate(self, now: float, stop_after_s: float) -> dict[str, Verdict]:
        """The verdict of every partition in the history."""
        return {
            key: evaluate(window, self.moved_at.get(key, window[0].at), now, stop_after_s)
            for key, window in sorted(self.windows.items())
            if window
        }


def run_key(spans: Mapping[tuple[str, int], tuple[int, int]]) -> str:
    """A run key derived from the planned ``(start, end)`` offsets of every partition.

    Two ticks that plan the same ranges get the same key, so Dagster (and the sensor) never
    launch the same ingest twice; a run capped by ``max_records_per_run`` moves the starts, so
    the backlog it left gets a new key and the next tick launches it.
    """
    text = ",".join(f"{t}:{p}={s}-{e}" for (t, p), (s, e) in sorted(spans.items()))
    return "ingest-" + hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Decision:
    """Whether to launch an ingest now, and why (the reason a skipped tick shows)."""

    launch: bool
    reason: str


def decide(
    total_lag: int,
    oldest_age_s: float | None,
    max_records: int,
    max_age_s: float,
    only_markers: bool = False,
) -> Decision:
    """Launch when the lag reaches ``max_records`` or the oldest pending record ``max_age_s``.

    Args:
        total_lag: offsets not yet in the table, all partitions.
        oldest_age_s: age of the oldest pending committed record (None: unknown or not read).
        max_records: lag that triggers an ingest.
        max_age_s: age that triggers an ingest.
        only_markers: the pending offsets hold no committed record at all (transaction markers,
            aborted records): no record will ever age, so an ingest moves the position now.
    """
    if total_lag <= 0:
        return Decision(
            False, "nothing to do: bronze is at the last stable offset of every partition"
        )
    if total_lag >= max_records:
        return Decision(True, f"lag {total_lag} offsets reached EOS_LAG_MAX_RECORDS={max_records}")
    if only_markers:
        return Decision(
            True, f"only transaction markers or aborted records pending ({total_lag} offsets)"
        )
    if oldest_age_s is not None and oldest_age_s >= max_age_s:
        return Decision(
            True,
            f"oldest pending record is {oldest_age_s:.0f}s old: EOS_LAG_MAX_AGE_S={max_age_s:g}",
        )
    age = "unknown" if oldest_age_s is None else f"{oldest_age_s:.0f}s"
    return Decision(
        False,
        f"waiting: lag {total_lag} offsets < EOS_LAG_MAX_RECORDS={max_records} and oldest "
        f"pending record {age} old < EOS_LAG_MAX_AGE_S={max_age_s:g}",
    )
