"""Delta file statistics (numRecords, min/max, null counts) for files written by Spark tasks."""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import json
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        # Delta stats keep timestamps at millisecond precision.
        return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return value


def file_stats(table: pa.Table) -> str:
    """Return the Delta ``stats`` JSON of one file holding ``table``.

    Min/max values are given for numeric, timestamp and string columns; binary columns get null
    counts only, as Delta writers do for types without an ordering used in data skipping.
    """
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for field in table.schema:
        column = table.column(field.name)
        nulls[field.name] = column.null_count
        orderable = (
            pa.types.is_integer(field.type)
            or pa.types.is_floating(field.type)
            or pa.types.is_timestamp(field.type)
            or pa.types.is_string(field.type)
        )
        if not orderable or column.null_count == table.num_rows:
            continue
        if pa.types.is_floating(field.type) and pc.any(pc.is_nan(column)).as_py():
            continue
        bounds = pc.min_max(column)
        if pa.types.is_timestamp(field.type):
            # Truncated to milliseconds, the max must round up so it still bounds the data.
            low = pc.floor_temporal(bounds["min"], unit="millisecond")
            high = pc.ceil_temporal(bounds["max"], unit="millisecond")
            mins[field.name] = _json_value(low.as_py())
            maxs[field.name] = _json_value(high.as_py())
        elif pa.types.is_string(field.type):
            low_s, high_s = bounds["min"].as_py(), bounds["max"].as_py()
            # Long strings are left out rather than truncated, so bounds stay exact.
            if len(low_s) <= 64 and len(high_s) <= 64:
                mins[field.name], maxs[field.name] = low_s, high_s
        else:
            mins[field.name] = bounds["min"].as_py()
            maxs[field.name] = bounds["max"].as_py()
    return json.dumps(
        {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
        separators=(",", ":"),
    )
