"""How a peer's output differs from ours: the records an ingest kept, the windows a peer counted.

Plain functions over Arrow tables and dicts, so that the bench's verdicts ("the same records",
"12 windows differ, 30 events fewer") can be tested without running any peer.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.delta.delta_io import read_rows
from eos_assets.lib.derived.window_aggregates import window_schema
from eos_assets.lib.derived.windows import EPOCH

# (window start in microseconds since the epoch, event type, currency; "" for none)
WindowKey = tuple[int, str, str]
_US = timedelta(microseconds=1)


@dataclass(frozen=True)
class OffsetDiff:
    """Records of one table against another's, by (partition, offset)."""

    ours: int
    theirs: int
    missing: int
    extra: int
    repeated: int

    @property
    def same(self) -> bool:
        """True when both kept exactly the same records, each once."""
        return self.missing == 0 and self.extra == 0 and self.repeated == 0


def offset_diff(ours: pa.Table, theirs: pa.Table) -> OffsetDiff:
    """Compare the ``partition`` and ``offset`` columns of two tables of one topic's records.

    ``missing``: records we have and they lack; ``extra``: the reverse; ``repeated``: their
    rows beyond the first of a (partition, offset).
    """

    def keys(t: pa.Table) -> np.ndarray:
        partition = t.column("partition").to_numpy().astype(np.int64)
        return (partition << 40) | t.column("offset").to_numpy().astype(np.int64)

    a, b = keys(ours), keys(theirs)
    ua, ub = np.unique(a), np.unique(b)
    return OffsetDiff(
        ours=len(a),
        theirs=len(b),
        missing=len(np.setdiff1d(ua, ub, assume_unique=True)),
        extra=len(np.setdiff1d(ub, ua, assume_unique=True)),
        repeated=len(b) - len(ub),
    )


@dataclass(frozen=True)
class WindowDiff:
    """A peer's window counts against gold's.

    Attributes:
        windows: windows in gold.
        same: windows with the same count in both.
        only_gold: windows the peer never emitted.
        only_peer: windows the peer has and gold lacks.
        differ: windows in both with different counts.
        fewer_events: gold's events minus the peer's, over all windows (> 0: the peer counted
            fewer, e.g. late events it dropped or windows it had not closed).
        events: gold's events over all windows.
        missing_at_end: of ``only_gold``, the windows that start after the peer's last window
            (still open when it stopped, rather than lost in the middle of the stream).
    """

    windows: int
    same: int
    only_gold: int
    only_peer: int
    differ: int
    fewer_events: int
    events: int
    missing_at_end: int = 0

    @property
    def mismatched(self) -> int:
        """Windows that are not the same in both."""
        return self.only_gold + self.only_peer + self.differ

    def label(self, system: str) -> str:
        """``system`` for the chart, named as doing less when it counted fewer events."""
        if self.fewer_events <= 0 or not self.events:
            return system
        return f"{system}\n(counted {self.fewer_events / self.events:.0%} fewer events)"

    def summary(self) -> str:
        """One short line for the result table."""
        return (
            f"{self.mismatched} of {self.windows} windows differ ({self.differ} counted "
            f"differently, {self.only_gold} missing of which {self.missing_at_end} after its "
            f"last window, {self.only_peer} extra), "
            f"{self.fewer_events:,} events fewer than gold"
        )


def window_diff(gold: Mapping[WindowKey, int], peer: Mapping[WindowKey, int]) -> WindowDiff:
    """Compare event counts per window (start, event type, currency)."""
    both = gold.keys() & peer.keys()
    differ = sum(1 for k in both if gold[k] != peer[k])
    only_gold = gold.keys() - peer.keys()
    last = max((k[0] for k in peer), default=None)
    return WindowDiff(
        windows=len(gold),
        same=len(both) - differ,
        only_gold=len(only_gold),
        only_peer=len(peer.keys() - gold.keys()),
        differ=differ,
        fewer_events=sum(gold.values()) - sum(peer.values()),
        events=sum(gold.values()),
        missing_at_end=sum(1 for k in only_gold if last is None or k[0] > last),
    )


def gold_counts(windows_uri: str) -> dict[WindowKey, int]:
    """Event count per window of ``gold/window_aggregates`` (its latest revision)."""
    columns = ["window_start", "event_type", "currency", "event_count"]
    rows = read_rows(
        DeltaTable(windows_uri), window_schema(ORDERS.windows, ORDERS.contract), columns=columns
    ).to_pylist()
    return {
        ((r["window_start"] - EPOCH) // _US, r["event_type"], r["currency"]): r["event_count"]
        for r in rows
    }
