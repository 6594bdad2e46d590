"""The distinct values of a declared KPI table: insert-if-absent, counted exactly.

Each KPI with a ``count_distinct`` measure keeps, in a table of its own (``distinct_schema``),
one row per key, measure and value, with the silver version that first brought the value. A
key's count grows by the batch's values not seen before. The rows are committed before the
KPI's own (with the same ``txn``); counting as seen only the rows with
``silver_version <= consumed`` keeps a re-run after a crash between the two commits exact.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from eos_assets.lib.contract.schema_time import UTC_MICROS
from eos_assets.lib.contract.stream_shape import KpiSpec
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived.kpi_compute import distinct_schema


def pairs(spec: KpiSpec, values: pa.Table) -> pa.Table:
    """The batch's distinct values as rows of the distinct table."""
    schema = distinct_schema(spec)
    columns = {n: values.column(n) for n in schema.names if n in values.column_names}
    if "window_start" in columns:
        columns["window_start"] = pc.cast(columns["window_start"], pa.int64()).cast(UTC_MICROS)
    columns |= {
        "measure": values.column("_measure"),
        "distinct_value": values.column("_value"),
        "silver_version": values.column("_first"),
    }
    return pa.table(columns).select(schema.names).cast(schema)


def new_values(
    spec: KpiSpec,
    batch: pa.Table,
    distinct_dt: DeltaTable,
    predicate: str | None,
    consumed: int | None,
) -> tuple[dict[tuple, int], pa.Table, int]:
    """Per (key, measure): the values of ``batch`` (``pairs``) not seen up to silver version
    ``consumed``; the distinct rows still missing (a crashed earlier attempt may have committed
    some); and the number of distinct rows read."""
    schema = distinct_schema(spec)
    names = list(spec.key)
    known = delta_io.read_rows(distinct_dt, schema, predicate) if batch.num_rows else None
    if known is None:
        return {}, schema.empty_table(), 0
    match = [*names, "measure", "distinct_value"]
    limit = -1 if consumed is None else consumed
    seen = known.filter(pc.field("silver_version") <= limit).select(match)
    fresh = batch.join(seen, match, join_type="left anti")
    counted = fresh.group_by([*names, "measure"]).aggregate([("distinct_value", "count")])
    added = {
        (tuple(r[n] for n in names), r["measure"]): int(r["distinct_value_count"])
        for r in counted.to_pylist()
    }
    missing = batch.join(known.select(match), match, join_type="left anti")
    return added, missing.select(schema.names).cast(schema), known.num_rows


def commit(
    dt: DeltaTable,
    missing: pa.Table,
    app: str,
    txns: Mapping[str, int],
    metadata: Mapping[str, Any],
) -> int | None:
    """Append the ``missing`` rows from snapshot ``dt`` with ``txns``, unless its ``app``
    already reached the version they come from (a re-run after a crash); the version made."""
    done = dt.transaction_version(app)
    if not missing.num_rows or (done is not None and done >= txns[app]):
        return None
    props = delta_io.commit_properties(txns, metadata, text_values=True)
    write_deltalake(dt, missing, mode="append", commit_properties=props)
    return dt.version()
