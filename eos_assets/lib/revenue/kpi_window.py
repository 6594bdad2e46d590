"""``gold/kpi_window``: the KPIs (``kpi.py``) per window and currency, touched windows recomputed.

A window touched by new silver rows is recomputed from that window's silver rows only (files
pruned by date and event-time statistics) and upserted with ``revision`` + 1; the consumed
silver version and the window size are ``txn`` actions of the same commit. A size change would
mix grains, so it is refused.
"""

import time
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eos_assets.lib import faults
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived import incremental, increments
from eos_assets.lib.derived.window_compute import window_rows
from eos_assets.lib.derived.windows import SIZE_APP, at, micros_of
from eos_assets.lib.errors import EosError
from eos_assets.lib.revenue.kpi import (
    AFTER_COMMIT,
    APP,
    KPI_WINDOW_KEY,
    KPI_WINDOW_SCHEMA,
    NO_CURRENCY,
    KpiOutcome,
    counters,
    finish,
)


def update_kpi_window(
    spark: SparkSession,
    events_uri: str,
    kpi_uri: str,
    size: timedelta,
    storage_options: dict[str, str] | None = None,
    upto: int | None = None,
) -> KpiOutcome:
    """Recompute the KPI windows touched by new silver rows, up to silver version ``upto``
    (None: the latest).

    Raises:
        EosError: the window size differs from the table's, silver was rewritten, or
            commits kept conflicting.
    """
    delta_io.ensure_table(
        kpi_uri,
        KPI_WINDOW_SCHEMA,
        configuration=delta_io.merged_table_config(),
        storage_options=storage_options,
    )
    size_us = int(size.total_seconds() * 1_000_000)

    def check(dt: DeltaTable) -> None:
        built = dt.transaction_version(SIZE_APP)
        if built is not None and built * 1_000_000 != size_us:
            raise EosError(
                f"{kpi_uri} holds {built}s windows, not {size_us // 1_000_000}s: delete it to "
                "rebuild with the new size, or keep the old size"
            )

    table = incremental.Derived(
        "gold/kpi_window", kpi_uri, events_uri, APP, storage_options, check=check, upto=upto
    )
    return incremental.run(table, KpiOutcome, lambda a, o: _step(spark, size_us, a, o))


def _step(
    spark: SparkSession, size_us: int, attempt: incremental.Attempt, outcome: KpiOutcome
) -> None:
    outcome.events = attempt.increment.records
    keys = window_keys(attempt.increment, size_us)
    rows, outcome.silver_rows_read = _window_kpis(
        spark, attempt.target, attempt.upstream, keys, size_us
    )
    for row in rows:
        row["silver_version"] = attempt.increment.version
    outcome.rows_written = len(rows)
    outcome.seconds["compute"] = time.monotonic() - attempt.started
    delta_io.upsert(
        attempt.target,
        pa.Table.from_pylist(rows, schema=KPI_WINDOW_SCHEMA),
        list(KPI_WINDOW_KEY),
        "window_start",
        attempt.txns | {SIZE_APP: size_us // 1_000_000},
        attempt.metadata("kpi_window"),
    )
    faults.crash_point(AFTER_COMMIT)


def window_keys(increment: increments.Increment, size_us: int) -> list[tuple[int, str]]:
    """The windows (start micros, currency; missing currency: "") the increment's silver rows
    fall in, from two columns read with Arrow on the driver (milliseconds, where a Spark job
    costs a round of scheduling)."""
    pieces = []
    for f in increment.files:
        fs, path = pafs.FileSystem.from_uri(delta_io.as_uri(f.uri))
        pieces.append(pq.read_table(path, filesystem=fs, columns=["event_time", "currency"]))
    if not pieces:
        return []
    rows = pa.concat_tables(pieces)
    micros = rows.column("event_time").cast(pa.int64()).to_numpy(zero_copy_only=False)
    starts = micros - np.mod(micros, size_us)  # the window of a time before 1970 too
    currency = pc.fill_null(rows.column("currency"), NO_CURRENCY).to_pylist()
    return sorted(set(zip(starts.tolist(), currency, strict=True)))


def _window_kpis(
    spark: SparkSession,
    dt: DeltaTable,
    upstream: DeltaTable,
    keys: list[tuple[int, str]],
    size_us: int,
) -> tuple[list[dict[str, Any]], int]:
    """Fresh KPI rows of windows ``keys`` (start micros, currency) from their silver rows."""
    if not keys:
        return [], 0
    silver, read = window_rows(spark, upstream, [k[0] for k in keys], size_us)
    silver = silver.withColumn("currency", F.coalesce("currency", F.lit(NO_CURRENCY)))
    wanted = set(keys)  # a touched window's other currencies come back too: not revised
    fresh = [
        r
        for r in counters(silver, ["_start", "currency"]).collect()
        if (r["_start"], r["currency"]) in wanted
    ]
    starts = [k[0] for k in keys]
    predicate = (
        f"window_start >= '{at(min(starts)).isoformat()}' AND "
        f"window_start <= '{at(max(starts)).isoformat()}'"
    )
    current = {
        (micros_of(r["window_start"]), r["currency"]): r
        for r in delta_io.read_rows(dt, KPI_WINDOW_SCHEMA, predicate).to_pylist()
    }
    rows = []
    for r in fresh:
        before = current.get((r["_start"], r["currency"]), {})
        rows.append(
            {
                "window_start": at(r["_start"]),
                "window_end": at(r["_start"] + size_us),
                "currency": r["currency"],
                **finish(r.asDict(), int(r["customers"])),
                "revision": before.get("revision", 0) + 1,
            }
        )
    return rows, read
