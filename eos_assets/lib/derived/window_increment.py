"""The windows a silver increment touches, counted with Arrow on the driver.

Planning a run of ``gold/window_aggregates`` needs, per bronze version, window and dimension
values of the new silver rows, how many there are and their max event time: three or four
narrow columns of the increment's files. Read with Arrow on the driver they cost milliseconds,
where a Spark job (a scan, a shuffle and a collect) cost a noticeable part of the step.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from eos_assets.lib.contract.stream_shape import WindowShape
from eos_assets.lib.derived.increments import AddedFile, read_columns
from eos_assets.lib.derived.windows import NO_VALUE


def touched_windows(
    files: Sequence[AddedFile], stored: pa.Schema, shape: WindowShape, size_us: int
) -> list[dict[str, Any]]:
    """Per ``bronze_version``, window start ``_start`` (micros) and dimension value (a missing
    one as ``NO_VALUE``) of the rows of the silver ``files`` (columns ``stored``): ``events``,
    the rows, and ``m``, their max event time in micros."""
    if not files:
        return []
    dims = list(shape.dimensions)
    schema = pa.schema([stored.field(n) for n in ("bronze_version", "event_time", *dims)])
    # A file written before a dimension was declared reads it as null, as Spark's reader does.
    rows = read_columns(files, schema)
    us = pc.cast(rows.column("event_time"), pa.int64())
    size = pa.scalar(size_us, pa.int64())
    # The start of the window: us - pmod(us, size), in integers as Spark computes it.
    rest = pc.subtract(us, pc.multiply(pc.divide(us, size), size))
    rest = pc.if_else(pc.less(rest, 0), pc.add(rest, size), rest)
    columns: dict[str, Any] = {
        "bronze_version": rows.column("bronze_version"),
        "_start": pc.subtract(us, rest),
        "_us": us,
    }
    for name in dims:
        columns[name] = pc.fill_null(rows.column(name), NO_VALUE)
    grouped = (
        pa.table(columns)
        .group_by(["bronze_version", "_start", *dims])
        .aggregate([([], "count_all"), ("_us", "max")])
    )
    names = {"count_all": "events", "_us_max": "m"}
    return grouped.rename_columns([names.get(n, n) for n in grouped.column_names]).to_pylist()
