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

Columns of a window row (``window_schema``): ``window_start``, ``window_end``, the dimensions,
the measures, then ``revision``, ``is_final``, ``late_events`` (late arrivals so far),
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
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from eos_assets.lib import faults
from eos_assets.lib.contract.schema_time import UTC_MICROS
from eos_assets.lib.contract.stream_shape import (
    COUNT,
    COUNT_DISTINCT,
    DOUBLE,
    LONG,
    MIN,
    STRING,
    SUM,
    Contract,
    Measure,
    WindowShape,
)
from eos_assets.lib.delta import delta_tables
from eos_assets.lib.derived import incremental, increments
from eos_assets.lib.derived.silver_events import (
    PARTITION_BY,
    events_schema,
    merge_ranges,
    stored_schema,
    time_ranges_predicate,
)
from eos_assets.lib.derived.windows import (
    APP,
    MAX_EVENT_TIME_APP,
    NO_VALUE,
    SIZE_APP,
    WATERMARK_APP,
    Progress,
    WindowSpec,
    at,
    key_columns,
    micros_of,
    progress,
    revise,
)
from eos_assets.lib.errors import EosError

AFTER_LATE_EVENTS = "windows_after_late_events"
AFTER_COMMIT = "windows_after_commit"
CRASH_POINTS = (AFTER_LATE_EVENTS, AFTER_COMMIT)


def measure_type(measure: Measure, contract: Contract) -> pa.DataType:
    """The column type of a measure: counts are int64, a sum of a long int64 and of a double
    float64, a min or max has its field's type.

    Raises:
        EosError: a sum of a field that is not a number.
    """
    if measure.agg in (COUNT, COUNT_DISTINCT):
        return pa.int64()
    field = contract.field(measure.of or "")
    if measure.agg == SUM:
        if field.type not in (LONG, DOUBLE):
            raise EosError(
                f"the measure {measure.name} sums {field.name}, a {field.type}: sum a "
                "long or double field"
            )
        return pa.int64() if field.type == LONG else pa.float64()
    return events_schema(contract).field(field.name).type


def window_schema(shape: WindowShape, contract: Contract) -> pa.Schema:
    """The columns of ``gold/window_aggregates`` for the stream's windows.

    Raises:
        EosError: a dimension is not a string field (a window's key never holds a null, and
            only a string has a value, ``""``, that stands for a missing one).
    """
    for name in shape.dimensions:
        kind = contract.field(name).type
        if kind != STRING:
            raise EosError(
                f"the window dimension {name} is a {kind}: group windows by string fields only"
            )
    return pa.schema(
        [
            ("window_start", UTC_MICROS),
            ("window_end", UTC_MICROS),
            *[(name, pa.string()) for name in shape.dimensions],
            *[(m.name, measure_type(m, contract)) for m in shape.measures],
            ("late_events", pa.int64()),
            ("revision", pa.int64()),
            ("is_final", pa.bool_()),
            ("watermark", UTC_MICROS),
            ("silver_version", pa.int64()),
        ]
    )


def late_schema(contract: Contract) -> pa.Schema:
    """The columns of ``gold/late_events``: the silver event, and the window it was late for."""
    events = events_schema(contract)
    return pa.schema(
        [
            *[events.field(n) for n in events.names if n != "event_date"],
            ("silver_version", pa.int64()),
            ("window_start", UTC_MICROS),
            ("window_end", UTC_MICROS),
            ("watermark", UTC_MICROS),
        ]
    )


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
    shape: WindowShape,
    contract: Contract,
    events_uri: str,
    windows_uri: str,
    late_uri: str,
    spec: WindowSpec,
    storage_options: dict[str, str] | None = None,
) -> WindowsOutcome:
    """Recompute the windows touched by new silver rows; flag late events and final windows.

    Raises:
        EosError: the window size differs from the table's, silver was rewritten,
            commits kept conflicting, or a dimension is not a string field.
    """
    delta_tables.ensure(
        windows_uri,
        window_schema(shape, contract),
        configuration=delta_tables.merged_table_config(),
        storage_options=storage_options,
    )
    delta_tables.ensure(late_uri, late_schema(contract), storage_options=storage_options)
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
    stream = _Stream(shape, contract)
    return incremental.run(table, WindowsOutcome, lambda a, o: _step(spark, stream, spec, a, o))


@dataclass(frozen=True)
class _Stream:
    """What one stream's windows group by and compute, and the columns of its events."""

    shape: WindowShape
    contract: Contract

    @property
    def dimensions(self) -> list[str]:
        return list(self.shape.dimensions)

    @property
    def schema(self) -> pa.Schema:
        return window_schema(self.shape, self.contract)

    def key(self, row: Any) -> tuple:
        """The key of the window of a Spark row: start (``_start``, micros), dimensions."""
        return (row["_start"], *(row[d] for d in self.shape.dimensions))


def _step(
    spark: SparkSession,
    stream: _Stream,
    spec: WindowSpec,
    attempt: incremental.Attempt,
    outcome: WindowsOutcome,
) -> None:
    dt, (late_dt,) = attempt.target, attempt.companions
    late_columns = late_schema(stream.contract)
    state = delta_tables.txn_versions(dt, [MAX_EVENT_TIME_APP, WATERMARK_APP])
    increment = attempt.increment
    outcome.silver_versions = attempt.versions
    stored = delta_tables.data_schema(events_schema(stream.contract), PARTITION_BY)
    events = _fill_dimensions(
        increments.read_files(
            spark, increment.files, delta_tables.spark_schema(stored), "silver_version"
        ),
        stream.shape,
    )
    maxima = {
        int(r["v"]): int(r["m"])
        for r in events.groupBy(F.col("bronze_version").alias("v"))
        .agg(F.max(F.unix_micros("event_time")).alias("m"))
        .collect()
    }
    moved = progress(state[MAX_EVENT_TIME_APP], state[WATERMARK_APP], maxima, spec.grace_us)
    flagged = _flag_late(spark, events, moved, spec.size_us).cache()
    try:
        late_rows = flagged.where("late").select(*late_columns.names).toArrow()
        touched = (
            flagged.groupBy("_start", *stream.dimensions)
            .agg(F.count(F.lit(1)).alias("events"), F.sum(F.col("late").cast("long")).alias("late"))
            .collect()
        )
    finally:
        flagged.unpersist()
    outcome.events = sum(int(r["events"]) for r in touched)
    late = {stream.key(r): int(r["late"]) for r in touched}
    late = {k: n for k, n in late.items() if n}
    outcome.late_events = late_rows.num_rows
    keys = [stream.key(r) for r in touched]
    recomputed, outcome.silver_rows_read = _recompute(
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
    delta_tables.upsert(
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

    The columns are those the snapshot's files hold (``silver_events.stored_schema``). Only
    files whose date and event-time statistics overlap those windows are read. Returns the rows
    with ``_start`` (window start, micros) and the row count of the files read.
    """
    wanted = sorted(set(starts))
    predicate = time_ranges_predicate(merge_ranges([(at(s), at(s + size_us)) for s in wanted]))
    files = delta_tables.data_files(upstream, predicate) if predicate else []
    rows = delta_tables.read_spark(spark, [f.uri for f in files], stored_schema(upstream))
    keep = spark.createDataFrame([(s,) for s in wanted], "_start long")
    us = F.unix_micros("event_time")
    framed = rows.withColumn("_start", us - F.pmod(us, F.lit(size_us)))
    return framed.join(F.broadcast(keep), "_start"), sum(f.records for f in files)


def _recompute(
    spark: SparkSession, stream: _Stream, upstream: DeltaTable, keys: list[tuple], size_us: int
) -> tuple[dict[tuple, dict[str, Any]], int]:
    if not keys:
        return {}, 0
    rows, read = window_rows(spark, upstream, [k[0] for k in keys], size_us)
    group = ["_start", *stream.dimensions]
    wanted = spark.createDataFrame(
        keys,
        StructType(
            [
                StructField("_start", LongType()),
                *[StructField(d, StringType()) for d in stream.dimensions],
            ]
        ),
    )
    measures = stream.shape.measures
    aggregates = (
        _fill_dimensions(rows, stream.shape)
        .join(F.broadcast(wanted), group)
        .groupBy(*group)
        .agg(*[_aggregate(m, stream.contract).alias(m.name) for m in measures])
        .collect()
    )
    fresh = {
        stream.key(r): {m.name: _value(r[m.name], m, stream.contract) for m in measures}
        for r in aggregates
    }
    return fresh, read


def _fill_dimensions(frame: DataFrame, shape: WindowShape) -> DataFrame:
    """``frame`` with a missing dimension value as ``NO_VALUE``: a window key is never null."""
    for name in shape.dimensions:
        frame = frame.withColumn(name, F.coalesce(F.col(name), F.lit(NO_VALUE)))
    return frame


def _aggregate(measure: Measure, contract: Contract) -> Column:
    """The Spark aggregate of ``measure``; a timestamp min or max in microseconds."""
    if measure.agg == COUNT:
        return F.count(F.lit(1))
    of = F.col(measure.of or "")
    if measure.agg == COUNT_DISTINCT:
        return F.count_distinct(of)
    kind = measure_type(measure, contract)
    if measure.agg == SUM:
        spark_type = "bigint" if kind == pa.int64() else "double"
        return F.coalesce(F.sum(of), F.lit(0)).cast(spark_type)
    extreme = F.min(of) if measure.agg == MIN else F.max(of)
    return F.unix_micros(extreme) if kind == UTC_MICROS else extreme


def _value(value: Any, measure: Measure, contract: Contract) -> Any:
    """A collected aggregate as the window row holds it (times in microseconds)."""
    if value is None:
        return None
    kind = measure_type(measure, contract)
    if kind == pa.int64() or kind == UTC_MICROS:
        return int(value)
    if kind == pa.float64():
        return float(value)
    return value


def _existing(
    dt: DeltaTable,
    stream: _Stream,
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
    for row in delta_tables.read_rows(dt, stream.schema, predicate).to_pylist():
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
        commit_properties=delta_tables.commit_properties(txns, metadata),
    )
    return late_dt.version()


def _to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    times = {f.name for f in schema if f.type == UTC_MICROS}
    converted = [{k: (_time(v) if k in times else v) for k, v in r.items()} for r in rows]
    return pa.Table.from_pylist(converted, schema=schema)


def _time(us: int | None) -> datetime | None:
    return None if us is None else at(us)
