"""The rows of a declared KPI table: their keys, the files that may hold them, a batch merged
into a row, and the watermark a batch moves.

A batch's aggregates (``kpi_compute.Batch.counters``) are merged into the touched keys'
current rows: counts and sums added, min and max combined, each ``count_distinct`` grown by the
batch's new values (``kpi_distinct``), formulas evaluated again in declared order,
``revision`` + 1.
"""

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from deltalake import DeltaTable

from eos_assets.lib.contract.stream_shape import (
    COUNT,
    COUNT_DISTINCT,
    DAY,
    MIN,
    SUM,
    WINDOW,
    KpiSpec,
)
from eos_assets.lib.delta import delta_io, txn_ids
from eos_assets.lib.derived.kpi_formula import evaluate
from eos_assets.lib.derived.windows import at, micros


def progress(dt: DeltaTable, tops: list[int | None], grace: timedelta) -> dict[str, int]:
    """The max event time consumed and the watermark (it minus ``grace``, never going back),
    as ``txn`` actions; none before the first event."""
    state = delta_io.positions(dt, [txn_ids.MAX_EVENT_TIME, txn_ids.WATERMARK])
    known = [t for t in [*tops, state[txn_ids.MAX_EVENT_TIME]] if t is not None]
    if not known:
        return {}
    top = max(known)
    marks = [m for m in (top - micros(grace), state[txn_ids.WATERMARK]) if m is not None]
    return {txn_ids.MAX_EVENT_TIME: top, txn_ids.WATERMARK: max(marks)}


def key_of(spec: KpiSpec, row: Mapping[str, Any]) -> tuple:
    """The key of a row of ``Batch.counters`` (a window start as a datetime)."""
    names = list(spec.key)
    return tuple(at(row[n]) if n == "window_start" else row[n] for n in names)


def predicate(spec: KpiSpec, keys: list[tuple]) -> str | None:
    """A file pruning predicate on the time key covering ``keys`` (None: every file)."""
    if not keys or spec.time is None:
        return None
    if spec.time == DAY:
        return f"day IN ({', '.join(repr(d.isoformat()) for d in sorted({k[0] for k in keys}))})"
    starts = [k[0] for k in keys]
    low, high = min(starts).isoformat(), max(starts).isoformat()
    return f"window_start >= '{low}' AND window_start <= '{high}'"


def merge(
    spec: KpiSpec,
    key: tuple,
    batch: Mapping[str, Any],
    was: Mapping[str, Any] | None,
    added: Mapping[tuple, int],
) -> dict[str, Any]:
    """The row of ``key`` after adding the batch's aggregates to its current row ``was``."""
    names = list(spec.key)
    row: dict[str, Any] = dict(zip(names, key, strict=True))
    if spec.time == WINDOW:
        row["window_end"] = key[0] + timedelta(microseconds=spec.size_us or 0)
    measures: dict[str, Any] = {}
    for m in spec.measures:
        before = was[m.name] if was else None
        if m.formula is not None:
            value = evaluate(m.formula, measures)
        elif m.agg in (COUNT, SUM):
            value = (before or 0) + batch[m.name]
        elif m.agg == COUNT_DISTINCT:
            value = (before or 0) + added.get((key, m.name), 0)
        else:
            pick = min if m.agg == MIN else max
            both = [v for v in (before, batch[m.name]) if v is not None]
            value = pick(both) if both else None
        measures[m.name] = value
    return row | measures | {"revision": (was["revision"] if was else 0) + 1}
