"""``gold/window_aggregates`` and ``gold/late_events``, kept incrementally from silver/events.

Per window (``windows.py`` has the rules): event count, distinct orders, distinct customers,
amount sum. Distinct counts are not additive, so a window touched by new silver rows is
recomputed from the silver rows of that window only (files pruned by date and event-time
statistics); every other window is left alone, except that windows the watermark passes are
rewritten with ``is_final``.

**State.** ``gold/window_aggregates`` keeps, as ``txn`` actions committed with its rows, the
consumed silver version, the max event time and the watermark (microseconds since the epoch)
and the window size (a size change would mix grains, so it is refused). ``gold/late_events`` is
committed first with its own ``txn``; its rows carry their ``silver_version`` so that a re-run
after a crash between the two commits neither loses nor repeats a late event.

Columns of a window row: ``revision``, ``is_final``, ``late_events`` (late arrivals so far),
``watermark`` (when the row was last written), ``silver_version`` (consumed when recomputed).
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_assets.lib import delta_tables, faults, incremental, increments
from eos_assets.lib.errors import EosError
from eos_assets.lib.schema_time import UTC_MICROS
from eos_assets.lib.silver_events import (
    EVENTS_SCHEMA,
    PARTITION_BY,
    merge_ranges,
    time_ranges_predicate,
)
from eos_assets.lib.windows import (
    APP,
    KEY,
    MAX_EVENT_TIME_APP,
    NO_CURRENCY,
    SIZE_APP,
    WATERMARK_APP,
    Progress,
    WindowSpec,
    at,
    micros_of,
    progress,
    revise,
)

AFTER_LATE_EVENTS = "windows_after_late_events"
AFTER_COMMIT = "windows_after_commit"
CRASH_POINTS = (AFTER_LATE_EVENTS, AFTER_COMMIT)

WINDOW_SCHEMA = pa.schema(
    [
        ("window_start", UTC_MICROS),
        ("window_end", UTC_MICROS),
        ("event_type", pa.string()),
        ("currency", pa.string()),
        ("event_count", pa.int64()),
        ("distinct_orders", pa.int64()),
        ("distinct_customers", pa.int64()),
        ("amount_sum", pa.float64()),
        ("late_events", pa.int64()),
        ("revision", pa.int64()),
        ("is_final", pa.bool_()),
        ("watermark", UTC_MICROS),
        ("silver_version", pa.int64()),
    ]
)
LATE_SCHEMA = pa.schema(
    [
        *[EVENTS_SCHEMA.field(n) for n in EVENTS_SCHEMA.names if n != "event_date"],
        ("silver_version", pa.int64()),
        ("window_start", UTC_MICROS),
        ("window_end", UTC_MICROS),
        ("watermark", UTC_MICROS),
    ]
)
_STORED_EVENTS = delta_tables.data_schema(EVENTS_SCHEMA, PARTITION_BY)


@dataclass
class WindowsOutcome:
    """What one run did; ``version`` is None when nothing was committed."""

    version: int | None = None
    late_version: int | None = None
    silver_versions: tuple[int, int] | None = None
    events: int = 0
    late_events: int = 0
    windows_recomputed: int = 0
    windows_finalized: int = 0
    silver_rows_read: int = 0
    watermark: datetime | None = None
    attempts: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def update_windows(
    spark: SparkSession,
    events_uri: str,
    windows_uri: str,
    late_uri: str,
    spec: WindowSpec,
    storage_options: dict[str, str] | None = None,
) -> WindowsOutcome:
    """Recompute the windows touched by new silver rows; flag late events and final windows.

    Raises:
        EosError: the window size differs from the table's, silver was rewritten, or
            commits kept conflicting.
    """
    delta_tables.ensure(
        windows_uri,
        WINDOW_SCHEMA,
        configuration=delta_tables.merged_table_config(),
        storage_options=storage_options,
    )
    delta_tables.ensure(late_uri, LATE_SCHEMA, storage_options=storage_options)
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
    )
    return incremental.run(table, WindowsOutcome, lambda a, o: _step(spark, spec, a, o))


def _step(
    spark: SparkSession, spec: WindowSpec, attempt: incremental.Attempt, outcome: WindowsOutcome
) -> None:
    dt, (late_dt,) = attempt.target, attempt.companions
    state = delta_tables.txn_versions(dt, [MAX_EVENT_TIME_APP, WATERMARK_APP])
    increment = attempt.increment
    outcome.silver_versions = attempt.versions
    events = increments.read_files(
        spark, increment.files, delta_tables.spark_schema(_STORED_EVENTS), "silver_version"
    ).withColumn("currency", F.coalesce("currency", F.lit(NO_CURRENCY)))
    maxima = {
        int(r["v"]): int(r["m"])
        for r in events.groupBy(F.col("bronze_version").alias("v"))
        .agg(F.max(F.unix_micros("event_time")).alias("m"))
        .collect()
    }
    moved = progress(state[MAX_EVENT_TIME_APP], state[WATERMARK_APP], maxima, spec.grace_us)
    flagged = _flag_late(spark, events, moved, spec.size_us).cache()
    try:
        late_rows = flagged.where("late").select(*LATE_SCHEMA.names).toArrow()
        touched = (
            flagged.groupBy("_start", "event_type", "currency")
            .agg(F.count(F.lit(1)).alias("events"), F.sum(F.col("late").cast("long")).alias("late"))
            .collect()
        )
    finally:
        flagged.unpersist()
    outcome.events = sum(int(r["events"]) for r in touched)
    late = {(r["_start"], r["event_type"], r["currency"]): int(r["late"]) for r in touched}
    late = {k: n for k, n in late.items() if n}
    outcome.late_events = late_rows.num_rows
    keys = [(r["_start"], r["event_type"], r["currency"]) for r in touched]
    recomputed, outcome.silver_rows_read = _recompute(spark, attempt.upstream, keys, spec.size_us)
    existing = _existing(dt, recomputed, state[WATERMARK_APP], moved.watermark, spec.size_us)
    rows = revise(existing, recomputed, late, moved.watermark, increment.version, spec.size_us)
    outcome.windows_recomputed = len(recomputed)
    outcome.windows_finalized = len(rows) - len(recomputed)
    outcome.seconds["compute"] = time.monotonic() - attempt.started

    began = time.monotonic()
    metadata = attempt.metadata("windows")
    outcome.late_version = _commit_late(late_dt, late_rows, attempt.txns, metadata)
    faults.crash_point(AFTER_LATE_EVENTS)
    txns = attempt.txns | {SIZE_APP: int(spec.size.total_seconds())}
    if moved.max_event_time is not None and moved.watermark is not None:
        txns |= {MAX_EVENT_TIME_APP: moved.max_event_time, WATERMARK_APP: moved.watermark}
    delta_tables.upsert(dt, _to_table(rows), list(KEY), "window_start", txns, metadata)
    faults.crash_point(AFTER_COMMIT)
    outcome.watermark = _time(moved.watermark)
    outcome.seconds["commit"] = time.monotonic() - began


def _flag_late(spark: SparkSession, events: DataFrame, moved: Progress, size_us: int) -> DataFrame:
    """``events`` with their window (``_start`` in micros) and ``late``."""
    marks = spark.createDataFrame(
        [(v, w) for v, w in moved.before.items()], "bronze_version long, _before long"
    )
    start = F.col("_us") - F.pmod(F.col("_us"), F.lit(size_us))
    return (
        events.join(F.broadcast(marks), "bronze_version", "left")
        .withColumn("_us", F.unix_micros("event_time"))
        .withColumn("_start", start)
        .withColumn(
            "late",
            F.coalesce(F.col("_start") + F.lit(size_us) <= F.col("_before"), F.lit(False)),
        )
        .withColumn("window_start", F.timestamp_micros("_start"))
        .withColumn("window_end", F.timestamp_micros(F.col("_start") + F.lit(size_us)))
        .withColumn("watermark", F.timestamp_micros("_before"))
    )


def window_rows(
    spark: SparkSession, upstream: DeltaTable, starts: Iterable[int], size_us: int
) -> tuple[DataFrame, int]:
    """Silver rows (of snapshot ``upstream``) whose window starts at one of ``starts``.

    Only files whose date and event-time statistics overlap those windows are read. Returns
    the rows with ``_start`` (window start, micros) and the row count of the files read.
    """
    wanted = sorted(set(starts))
    predicate = time_ranges_predicate(merge_ranges([(at(s), at(s + size_us)) for s in wanted]))
    files = delta_tables.data_files(upstream, predicate) if predicate else []
    rows = delta_tables.read_spark(spark, [f.uri for f in files], EVENTS_SCHEMA, PARTITION_BY)
    keep = spark.createDataFrame([(s,) for s in wanted], "_start long")
    us = F.unix_micros("event_time")
    framed = rows.withColumn("_start", us - F.pmod(us, F.lit(size_us)))
    return framed.join(F.broadcast(keep), "_start"), sum(f.records for f in files)


def _recompute(
    spark: SparkSession, upstream: DeltaTable, keys: list[tuple], size_us: int
) -> tuple[dict[tuple, dict[str, Any]], int]:
    if not keys:
        return {}, 0
    rows, read = window_rows(spark, upstream, [k[0] for k in keys], size_us)
    wanted = spark.createDataFrame(keys, "_start long, event_type string, currency string")
    aggregates = (
        rows.withColumn("currency", F.coalesce("currency", F.lit(NO_CURRENCY)))
        .join(F.broadcast(wanted), ["_start", "event_type", "currency"])
        .groupBy("_start", "event_type", "currency")
        .agg(
            F.count(F.lit(1)).alias("event_count"),
            F.count_distinct("order_id").alias("distinct_orders"),
            F.count_distinct("customer_id").alias("distinct_customers"),
            F.sum("amount").alias("amount_sum"),
        )
        .collect()
    )
    fresh = {
        (r["_start"], r["event_type"], r["currency"]): {
            "event_count": int(r["event_count"]),
            "distinct_orders": int(r["distinct_orders"]),
            "distinct_customers": int(r["distinct_customers"]),
            "amount_sum": float(r["amount_sum"] or 0.0),
        }
        for r in aggregates
    }
    return fresh, read


def _existing(
    dt: DeltaTable,
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
    for row in delta_tables.read_rows(dt, WINDOW_SCHEMA, predicate).to_pylist():
        row = {k: micros_of(v) for k, v in row.items()}
        becomes_final = (
            watermark_after is not None
            and row["window_end"] <= watermark_after
            and not row["is_final"]
        )
        if tuple(row[k] for k in KEY) in recomputed or becomes_final:
            rows.append(row)
    return rows


def _commit_late(
    late_dt: DeltaTable, late_rows: pa.Table, txns: Mapping[str, int], metadata: Mapping[str, Any]
) -> int | None:
    """Append the late events not committed yet (a re-run after a crash skips them)."""
    done = late_dt.transaction_version(APP)
    if done is not None:
        late_rows = late_rows.filter(pc.greater(late_rows["silver_version"], done))
    if late_rows.num_rows == 0:
        return None
    write_deltalake(
        late_dt,
        late_rows.select(LATE_SCHEMA.names).cast(LATE_SCHEMA),
        mode="append",
        commit_properties=delta_tables.commit_properties(txns, metadata),
    )
    return late_dt.version()


def _to_table(rows: list[dict[str, Any]]) -> pa.Table:
    times = ("window_start", "window_end", "watermark")
    converted = [{k: (_time(v) if k in times else v) for k, v in r.items()} for r in rows]
    return pa.Table.from_pylist(converted, schema=WINDOW_SCHEMA)


def _time(us: int | None) -> datetime | None:
    return None if us is None else at(us)
