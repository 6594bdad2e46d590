"""Declared KPI tables: their columns, and the one Spark job that aggregates a batch for all.

A KPI table's row (``kpi_schema``): its time key (``window_start``, ``window_end`` or
``day``), its ``by`` fields, its measures in declared order, ``revision`` and
``silver_version``. Its ``count_distinct`` values live in a table of their own
(``distinct_schema``: the key, ``measure``, ``value`` as a string, and the silver version that
first brought the value).

``aggregate`` reads the new silver rows once and groups them for every KPI of a stream in one
Spark job: per KPI and key the additive counters (count, sum, min, max, each under its
``when``) and the max event time; per KPI, key, distinct measure and value the first silver
version. The result is one Arrow table that ``Batch.counters`` and ``Batch.values`` split.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_assets.lib.contract.schema_time import UTC_MICROS
from eos_assets.lib.contract.stream_shape import (
    COUNT,
    COUNT_DISTINCT,
    DAY,
    MAX,
    MIN,
    STRING,
    SUM,
    WINDOW,
    Contract,
    KpiMeasure,
    KpiSpec,
    Measure,
)
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived import increments
from eos_assets.lib.derived.silver_events import PARTITION_BY, events_schema
from eos_assets.lib.derived.window_compute import measure_type
from eos_assets.lib.derived.windows import NO_VALUE
from eos_assets.lib.errors import EosError

_KPI, _PART, _MEASURE, _VALUE, _FIRST, _TOP = (
    "_kpi",
    "_part",
    "_measure",
    "_value",
    "_first",
    "_top",
)


def key_fields(spec: KpiSpec) -> list[pa.Field]:
    """The key columns of a KPI table (``window_end`` follows ``window_start``)."""
    if spec.time == WINDOW:
        time = [pa.field("window_start", UTC_MICROS), pa.field("window_end", UTC_MICROS)]
    elif spec.time == DAY:
        time = [pa.field("day", pa.date32())]
    else:
        time = []
    return [*time, *[pa.field(b, pa.string()) for b in spec.by]]


def kpi_schema(spec: KpiSpec, contract: Contract) -> pa.Schema:
    """The columns of a KPI table.

    Raises:
        EosError: the KPI has no key, a window no size, a ``by`` field is not a string, or a
            sum's field is not a number.
    """
    if spec.time == WINDOW and not spec.size_us:
        raise EosError(f"the KPI {spec.name} has windows without a size: declare time: 5m")
    if not spec.key:
        raise EosError(f"the KPI {spec.name} has neither time nor by: declare one of them")
    for name in spec.by:
        if contract.field(name).type != STRING:
            raise EosError(f"the KPI {spec.name} groups by {name}: group by string fields only")
    return pa.schema(
        [
            *key_fields(spec),
            *[(m.name, _type(m, contract)) for m in spec.measures],
            ("revision", pa.int64()),
            ("silver_version", pa.int64()),
        ]
    )


def distinct_schema(spec: KpiSpec) -> pa.Schema:
    """The columns of a KPI table's distinct values (without ``window_end``)."""
    keys = [f for f in key_fields(spec) if f.name != "window_end"]
    extra = [("measure", pa.string()), ("distinct_value", pa.string())]
    return pa.schema([*keys, *extra, ("silver_version", pa.int64())])


def _type(measure: KpiMeasure, contract: Contract) -> pa.DataType:
    if measure.formula is not None:
        return pa.float64()
    return measure_type(Measure(measure.name, measure.agg or "", measure.of), contract)


@dataclass(frozen=True)
class Batch:
    """The aggregates of one increment for every KPI (the rows of ``aggregate``'s job)."""

    specs: tuple[KpiSpec, ...]
    rows: pa.Table

    def _of(self, spec: KpiSpec, part: str) -> pa.Table:
        index = self.specs.index(spec)
        mine = self.rows.filter((pc.field(_KPI) == index) & (pc.field(_PART) == part))
        prefix = f"_{index}_"
        names = [n for n in mine.column_names if n.startswith(prefix)]
        return mine.select([*names, _MEASURE, _VALUE, _FIRST, _TOP]).rename_columns(
            [n.removeprefix(prefix) for n in names] + [_MEASURE, _VALUE, _FIRST, _TOP]
        )

    def counters(self, spec: KpiSpec) -> pa.Table:
        """Per key of ``spec`` (window start in micros): its aggregated measures and ``_top``,
        the max event time (micros)."""
        return self._of(spec, "c")

    def values(self, spec: KpiSpec) -> pa.Table:
        """Per key, distinct measure and value: ``_measure``, ``_value``, ``_first`` (the first
        silver version)."""
        return self._of(spec, "d")


def aggregate(
    spark: SparkSession,
    specs: Sequence[KpiSpec],
    contract: Contract,
    increment: increments.Increment,
) -> Batch:
    """The increment's aggregates for every KPI of ``specs``: one Spark job."""
    stored = delta_io.data_schema(events_schema(contract), PARTITION_BY)
    new = increments.read_files(
        spark,
        increment.files,
        delta_io.spark_schema(stored),
        "silver_version",
        increments.PLAN_STABLE_VERSION,
    ).withColumn("_us", F.unix_micros("event_time"))
    if increment.fits_one_task:
        new = new.coalesce(1)  # one partition: the groupings need no shuffle
    frames: list[DataFrame] = []
    for index, spec in enumerate(specs):
        keyed = new.select("*", *_keys(spec, index))
        keys = [f"_{index}_{k}" for k in spec.key]
        tag = [F.lit(index).alias(_KPI)]
        counters = keyed.groupBy(*keys).agg(
            *[_measure(m, index) for m in spec.measures if m.agg and m.agg != COUNT_DISTINCT],
            F.max("_us").alias(_TOP),
        )
        frames.append(counters.select(*tag, F.lit("c").alias(_PART), "*"))
        for m in spec.distinct:
            value = F.when(_when(m), F.col(m.of or "").cast("string"))
            pairs = keyed.select(*keys, value.alias(_VALUE), "silver_version").where(
                F.col(_VALUE).isNotNull()
            )
            first = F.min("silver_version").cast("long").alias(_FIRST)
            grouped = pairs.groupBy(*keys, _VALUE).agg(first)
            frames.append(
                grouped.select(*tag, F.lit("d").alias(_PART), F.lit(m.name).alias(_MEASURE), "*")
            )
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other, allowMissingColumns=True)
    for name, kind in ((_MEASURE, "string"), (_VALUE, "string"), (_FIRST, "long")):
        if name not in frame.columns:  # no KPI counts distinct values
            frame = frame.withColumn(name, F.lit(None).cast(kind))
    return Batch(tuple(specs), frame.toArrow())


def _keys(spec: KpiSpec, index: int) -> list[Column]:
    """The key columns of ``spec`` over silver rows, prefixed with the KPI's index."""
    columns = []
    if spec.time == WINDOW:
        start = F.col("_us") - F.pmod(F.col("_us"), F.lit(spec.size_us))
        columns.append(start.alias(f"_{index}_window_start"))
    elif spec.time == DAY:
        columns.append(F.to_date("event_time").alias(f"_{index}_day"))
    for name in spec.by:
        columns.append(F.coalesce(F.col(name), F.lit(NO_VALUE)).alias(f"_{index}_{name}"))
    return columns


def _when(measure: KpiMeasure) -> Column:
    condition = F.lit(True)
    for name, value in measure.when:
        condition = condition & (F.col(name) == F.lit(value))
    return condition


def _measure(measure: KpiMeasure, index: int) -> Column:
    name = f"_{index}_{measure.name}"
    condition = _when(measure)
    if measure.agg == COUNT:
        return F.count(F.when(condition, 1)).alias(name)
    of = F.when(condition, F.col(measure.of or ""))
    if measure.agg == SUM:
        return F.coalesce(F.sum(of), F.lit(0)).alias(name)  # 0 without a value, typed as the sum
    if measure.agg == MIN:
        return F.min(of).alias(name)
    if measure.agg == MAX:
        return F.max(of).alias(name)
    raise EosError(f"the measure {measure.name} has no aggregate {measure.agg!r}")
