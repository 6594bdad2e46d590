"""The rows of ``gold/window_aggregates``: their columns, and what Spark computes for them.

A window row's columns (``window_schema``) and those of a late event (``late_schema``); which
new silver rows are late for their window (``flag_late``); and the measures of the windows
that new rows touched, recomputed from all the silver rows of those windows (``recompute``).
``window_aggregates`` plans each run and commits what this computes.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

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
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived.increments import ONE_TASK_ROWS
from eos_assets.lib.derived.silver_events import (
    events_schema,
    merge_ranges,
    stored_schema,
    time_ranges_predicate,
)
from eos_assets.lib.derived.windows import NO_VALUE, Progress, at
from eos_assets.lib.errors import EosError


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


@dataclass(frozen=True)
class WindowStream:
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


def flag_late(spark: SparkSession, events: DataFrame, moved: Progress, size_us: int) -> DataFrame:
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
    files = delta_io.data_files(upstream, predicate) if predicate else []
    rows = delta_io.read_spark(spark, [f.uri for f in files], stored_schema(upstream))
    read = sum(f.records for f in files)
    if read < ONE_TASK_ROWS:
        rows = rows.coalesce(1)  # one partition: grouping it (distinct counts too) needs no shuffle
    us = F.unix_micros("event_time")
    framed = rows.withColumn("_start", us - F.pmod(us, F.lit(size_us)))
    # A filter, not a join with a local relation: broadcasting one is a Spark job of its own.
    # The starts as one array constant, not ``isin``: Spark writes up to 10 values of an
    # ``isin`` into the generated code, new code for every batch's windows.
    starts_array = F.lit(wanted).cast("array<bigint>")
    return framed.where(F.array_contains(starts_array, F.col("_start"))), read


def recompute(
    spark: SparkSession, stream: WindowStream, upstream: DeltaTable, keys: list[tuple], size_us: int
) -> tuple[dict[tuple, dict[str, Any]], int]:
    if not keys:
        return {}, 0
    rows, read = window_rows(spark, upstream, [k[0] for k in keys], size_us)
    group = ["_start", *stream.dimensions]
    measures = stream.shape.measures
    aggregates = (
        fill_dimensions(rows, stream.shape)
        .groupBy(*group)
        .agg(*[_aggregate(m, stream.contract).alias(m.name) for m in measures])
        .collect()
    )
    # The touched windows' other keys come back too (rows of the same windows): only the
    # touched keys are revised.
    wanted = set(keys)
    fresh = {
        stream.key(r): {m.name: _value(r[m.name], m, stream.contract) for m in measures}
        for r in aggregates
        if stream.key(r) in wanted
    }
    return fresh, read


def fill_dimensions(frame: DataFrame, shape: WindowShape) -> DataFrame:
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
        # The size of the set of non-null values: the same count as ``count_distinct``, but
        # Spark aggregates it in one hash aggregation per window instead of expanding every row
        # once per distinct measure (1.6x faster for the 1M-event windows with two of them).
        return F.size(F.collect_set(of))
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
