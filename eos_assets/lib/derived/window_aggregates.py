"""``gold/window_aggregates`` and ``gold/late_events``, kept incrementally from silver/events.

Per window (``windows.py`` has the rules) and value of the stream's dimensions: the measures
the stream declares (``WindowShape``): ``count`` (events), ``count_distinct`` (distinct non-null
values of a field), ``sum`` (0 without a value), ``min`` and ``max`` (null without a value).
Distinct counts are not additive, so a window touched by new silver rows is recomputed from
the silver rows of that window only (files pruned by date and event-time statistics); every
other window is left alone, except that windows the watermark passes are
rewritten with ``is_final``.

**State.** ``gold/window_aggregates`` keeps, as ``txn`` actions committed with its rows, the
consumed silver version, the max event time and the watermark (microseconds since the epoch)
and the window size (a size change would mix grains, so it is refused). ``gold/late_events`` is
committed first with its own ``txn``; its rows carry their ``silver_version`` so that a re-run
after a crash between the two commits neither loses nor repeats a late event.

Columns of a window row (``window_compute.window_schema``; that module also computes the
measures in Spark): ``window_start``, ``window_end``, the dimensions, the measures, then
``late_events`` (late arrivals so far), ``revision``, ``is_final``, ``watermark`` (when the row
was last written), ``silver_version`` (consumed when recomputed). This module plans each run
and commits.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from eos_assets.lib import faults
from eos_assets.lib.contract.schema_time import UTC_MICROS
from eos_assets.lib.contract.stream_shape import Contract, WindowShape
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived import incremental, increments
from eos_assets.lib.derived.incremental import FromSilverOutcome
from eos_assets.lib.derived.silver_events import PARTITION_BY, events_schema, merge_ranges
from eos_assets.lib.derived.window_compute import (
    WindowStream,
    fill_dimensions,
    flag_late,
    late_schema,
    recompute,
    window_schema,
)
from eos_assets.lib.derived.window_increment import touched_windows
from eos_assets.lib.derived.windows import (
    APP,
    MAX_EVENT_TIME_APP,
    SIZE_APP,
    WATERMARK_APP,
    WindowSpec,
    at,
    is_late,
    key_columns,
    micros_of,
    progress,
    revise,
)
from eos_assets.lib.errors import EosError

AFTER_LATE_EVENTS = "windows_after_late_events"
AFTER_COMMIT = "windows_after_commit"
CRASH_POINTS = (AFTER_LATE_EVENTS, AFTER_COMMIT)


@dataclass
class WindowsOutcome(FromSilverOutcome):
    """What one run of the window tables did, besides what every table from silver reports."""

    late_version: int | None = None
    late_events: int = 0
    windows_recomputed: int = 0
    windows_finalized: int = 0
    silver_rows_read: int = 0
    watermark: datetime | None = None


def update_windows(
    spark: SparkSession,
    shape: WindowShape,
    contract: Contract,
    events_uri: str,
    windows_uri: str,
    late_uri: str,
    spec: WindowSpec,
    storage_options: dict[str, str] | None = None,
    upto: int | None = None,
) -> WindowsOutcome:
    """Recompute the windows touched by new silver rows (up to version ``upto``; None: the
    latest); flag late events and final windows.

    Raises:
        EosError: the window size differs from the table's, silver was rewritten,
            commits kept conflicting, or a dimension is not a string field.
    """
    delta_io.ensure_table(
        windows_uri,
        window_schema(shape, contract),
        configuration=delta_io.merged_table_config(),
        storage_options=storage_options,
    )
    delta_io.ensure_table(late_uri, late_schema(contract), storage_options=storage_options)
    size_s = int(spec.size.total_seconds())

    def check(dt: DeltaTable) -> None:
        built = dt.transaction_version(SIZE_APP)
        if built is not None and built != size_s:
            raise EosError(
                f"{windows_uri} holds {built}s windows, not {size_s}s: delete it and "
                "gold/late_events to rebuild with the new size, or keep the old size"
            )

    table = incremental.Derived(
        "gold/window_aggregates",
        windows_uri,
        events_uri,
        APP,
        storage_options,
        companions=(late_uri,),
        check=check,
        upto=upto,
    )
    stream = WindowStream(shape, contract)
    return incremental.run(table, WindowsOutcome, lambda a, o: _step(spark, stream, spec, a, o))


def _step(
    spark: SparkSession,
    stream: WindowStream,
    spec: WindowSpec,
    attempt: incremental.Attempt,
    outcome: WindowsOutcome,
) -> None:
    dt, (late_dt,) = attempt.target, attempt.companions
    late_columns = late_schema(stream.contract)
    state = delta_io.positions(dt, [MAX_EVENT_TIME_APP, WATERMARK_APP])
    increment = attempt.increment
    stored = delta_io.data_schema(events_schema(stream.contract), PARTITION_BY)
    events = fill_dimensions(
        increments.read_files(
            spark, increment.files, delta_io.spark_schema(stored), "silver_version"
        ),
        stream.shape,
    )
    # One pass over the increment's narrow columns, with Arrow on the driver, gives what
    # planning needs: per bronze version and window, the events and their max event time
    # (``window_increment``). Lateness depends only on those two (the watermark
    # before the version, the window's end), so the late rows themselves are read only when
    # some window has any.
    per_version = touched_windows(increment.files, stored, stream.shape, spec.size_us)
    maxima: dict[int, int] = {}
    for r in per_version:
        v, m = int(r["bronze_version"]), r["m"]
        if m is not None:
            maxima[v] = max(maxima.get(v, int(m)), int(m))
    moved = progress(state[MAX_EVENT_TIME_APP], state[WATERMARK_APP], maxima, spec.grace_us)
    counts: dict[tuple, int] = {}
    late: dict[tuple, int] = {}
    for r in per_version:
        key, n = stream.key(r), int(r["events"])
        counts[key] = counts.get(key, 0) + n
        start, before = r["_start"], moved.before.get(int(r["bronze_version"]))
        if start is not None and is_late(start + spec.size_us, before):
            late[key] = late.get(key, 0) + n
    if late:
        late_rows = (
            flag_late(spark, events, moved, spec.size_us)
            .where("late")
            .select(*late_columns.names)
            .toArrow()
        )
    else:
        late_rows = late_columns.empty_table()
    outcome.events = sum(counts.values())
    outcome.late_events = late_rows.num_rows
    keys = list(counts)
    recomputed, outcome.silver_rows_read = recompute(
        spark, stream, attempt.upstream, keys, spec.size_us
    )
    existing = _existing(
        dt, stream, recomputed, state[WATERMARK_APP], moved.watermark, spec.size_us
    )
    rows = revise(
        stream.shape,
        existing,
        recomputed,
        late,
        moved.watermark,
        increment.version,
        spec.size_us,
    )
    outcome.windows_recomputed = len(recomputed)
    outcome.windows_finalized = len(rows) - len(recomputed)
    outcome.seconds["compute"] = time.monotonic() - attempt.started

    began = time.monotonic()
    metadata = attempt.metadata("windows")
    outcome.late_version = _commit_late(late_dt, late_rows, late_columns, attempt.txns, metadata)
    faults.crash_point(AFTER_LATE_EVENTS)
    txns = attempt.txns | {SIZE_APP: int(spec.size.total_seconds())}
    if moved.max_event_time is not None and moved.watermark is not None:
        txns |= {MAX_EVENT_TIME_APP: moved.max_event_time, WATERMARK_APP: moved.watermark}
    delta_io.upsert(
        dt,
        _to_table(rows, stream.schema),
        list(key_columns(stream.shape)),
        "window_start",
        txns,
        metadata,
    )
    faults.crash_point(AFTER_COMMIT)
    outcome.watermark = _time(moved.watermark)
    outcome.seconds["commit"] = time.monotonic() - began


def _existing(
    dt: DeltaTable,
    stream: WindowStream,
    recomputed: Mapping[tuple, Any],
    watermark_before: int | None,
    watermark_after: int | None,
    size_us: int,
) -> list[dict[str, Any]]:
    """Current rows of the recomputed windows and of windows that become final now.

    A window becomes final when the watermark passes its end, so only windows starting in
    ``(watermark_before - size, watermark_after - size]`` can; earlier ones already are.
    """
    ranges = [(k[0], k[0] + 1) for k in recomputed]
    if watermark_before is not None and watermark_after is not None:
        ranges.append((watermark_before - size_us + 1, watermark_after - size_us + 1))
    if not ranges:
        return []
    merged = merge_ranges([(at(a), at(b)) for a, b in ranges])
    predicate = " OR ".join(
        f"(window_start >= '{a.isoformat()}' AND window_start < '{b.isoformat()}')"
        for a, b in merged
    )
    rows = []
    key_names = key_columns(stream.shape)
    for row in delta_io.read_rows(dt, stream.schema, predicate).to_pylist():
        row = {k: micros_of(v) for k, v in row.items()}
        becomes_final = (
            watermark_after is not None
            and row["window_end"] <= watermark_after
            and not row["is_final"]
        )
        if tuple(row[k] for k in key_names) in recomputed or becomes_final:
            rows.append(row)
    return rows


def _commit_late(
    late_dt: DeltaTable,
    late_rows: pa.Table,
    schema: pa.Schema,
    txns: Mapping[str, int],
    metadata: Mapping[str, Any],
) -> int | None:
    """Append the late events not committed yet (a re-run after a crash skips them)."""
    done = late_dt.transaction_version(APP)
    if done is not None:
        late_rows = late_rows.filter(pc.greater(late_rows["silver_version"], done))
    if late_rows.num_rows == 0:
        return None
    write_deltalake(
        late_dt,
        late_rows.select(schema.names).cast(schema),
        mode="append",
        commit_properties=delta_io.commit_properties(txns, metadata, text_values=True),
    )
    return late_dt.version()


def _to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    times = {f.name for f in schema if f.type == UTC_MICROS}
    converted = [{k: (_time(v) if k in times else v) for k, v in r.items()} for r in rows]
    return pa.Table.from_pylist(converted, schema=schema)


def _time(us: int | None) -> datetime | None:
    return None if us is None else at(us)
