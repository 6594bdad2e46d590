"""``gold/kpi_daily`` and its customer set ``gold/kpi_daily_customers``, kept additively.

Every count and sum of a day is additive, so the new silver rows are aggregated per day and
currency and added to the day's row. Distinct customers are not additive: the set of
``(day, currency, customer_id)`` lives in ``gold/kpi_daily_customers`` (insert-if-absent, each
row with the silver version that first brought it), and a day's count grows by the batch's
customers not in that set. Work per run grows with the batch and the customers of the days it
touches, never with the events already consumed.

The set is committed first with its own ``txn``; counting only the set rows with
``silver_version <= consumed`` keeps a re-run after a crash between the two commits exact.
"""

import time
from collections.abc import Mapping
from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_assets.lib import faults
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived import incremental
from eos_assets.lib.revenue.kpi import (
    AFTER_COMMIT,
    AFTER_CUSTOMERS,
    APP,
    COUNTERS,
    CUSTOMERS_SCHEMA,
    KPI_DAILY_KEY,
    KPI_DAILY_SCHEMA,
    KpiOutcome,
    counters,
    finish,
    read_increment,
)


def update_kpi_daily(
    spark: SparkSession,
    events_uri: str,
    kpi_uri: str,
    customers_uri: str,
    storage_options: dict[str, str] | None = None,
    upto: int | None = None,
) -> KpiOutcome:
    """Add the new silver rows to their days' KPIs (and their customers to the day's set),
    up to silver version ``upto`` (None: the latest).

    Raises:
        EosError: silver was rewritten or its log is gone, or commits kept conflicting.
    """
    delta_io.ensure_table(
        kpi_uri,
        KPI_DAILY_SCHEMA,
        configuration=delta_io.merged_table_config(),
        storage_options=storage_options,
    )
    delta_io.ensure_table(customers_uri, CUSTOMERS_SCHEMA, storage_options=storage_options)

    table = incremental.Derived(
        "gold/kpi_daily",
        kpi_uri,
        events_uri,
        APP,
        storage_options,
        companions=(customers_uri,),
        upto=upto,
    )
    return incremental.run(table, KpiOutcome, lambda a, o: _step(spark, a, o))


def _step(spark: SparkSession, attempt: incremental.Attempt, outcome: KpiOutcome) -> None:
    dt, (customers_dt,) = attempt.target, attempt.companions
    increment = attempt.increment
    outcome.events = increment.records
    new = read_increment(spark, increment).withColumn("day", F.to_date("event_time"))
    if increment.fits_one_task:
        new = new.coalesce(1)  # one partition: the grouping needs no shuffle
    per_customer = _per_customer(new)
    batch = _batch_counters(per_customer)
    added, missing, outcome.set_rows_read = _new_customers(
        per_customer, customers_dt, sorted({k[0] for k in batch}), increment.consumed
    )
    rows = _daily_rows(dt, batch, added)
    for row in rows:
        row["silver_version"] = increment.version
    outcome.rows_written = len(rows)
    outcome.new_customers = sum(added.values())
    outcome.seconds["compute"] = time.monotonic() - attempt.started
    metadata = attempt.metadata("kpi_daily")
    done = customers_dt.transaction_version(APP)
    if missing.num_rows and (done is None or done < increment.version):
        write_deltalake(
            customers_dt,
            missing,
            mode="append",
            commit_properties=delta_io.commit_properties(attempt.txns, metadata, text_values=True),
        )
        outcome.customers_version = customers_dt.version()
    faults.crash_point(AFTER_CUSTOMERS)
    delta_io.upsert(
        dt,
        pa.Table.from_pylist(rows, schema=KPI_DAILY_SCHEMA),
        list(KPI_DAILY_KEY),
        "day",
        attempt.txns,
        metadata,
    )
    faults.crash_point(AFTER_COMMIT)


def _per_customer(new: DataFrame) -> pa.Table:
    """The counters of the new silver rows per day, currency and customer (null: events
    without one), with the first silver version of each: the run's one Spark job. The day's
    counters and the batch's customers are both taken from it in Arrow (it holds one row per
    customer and day of the batch)."""
    first = F.min("silver_version").alias("silver_version")
    # silver_version arrives a decimal (read_increment); the set's schema casts it to a long.
    return counters(new, ["day", "currency", "customer_id"], first).toArrow()


def _batch_counters(per_customer: pa.Table) -> dict[tuple, dict[str, Any]]:
    """``(day, currency) -> counters`` of the batch, summed over its customers."""
    names = [name for name, _ in COUNTERS]
    summed = per_customer.group_by(["day", "currency"]).aggregate([(n, "sum") for n in names])
    return {
        (r["day"], r["currency"]): {n: r[f"{n}_sum"] for n in names} for r in summed.to_pylist()
    }


def _new_customers(
    per_customer: pa.Table, customers_dt: DeltaTable, days: list[date], consumed: int | None
) -> tuple[dict[tuple, int], pa.Table, int]:
    """Per (day, currency): customers of the batch not seen up to silver version
    ``consumed``; the set rows still missing (a crashed earlier attempt may have committed
    some); and the number of set rows read.

    The days' set is read with delta-rs and compared in Arrow: it is small (one row per
    customer and day), and reading it with Spark would cost a job per comparison over a file
    per earlier batch.
    """
    seen = (
        per_customer.filter(pc.field("customer_id").is_valid())
        .select(CUSTOMERS_SCHEMA.names)
        .cast(CUSTOMERS_SCHEMA)
    )
    known, read = _customers(customers_dt, days)
    key = ["day", "currency", "customer_id"]
    limit = -1 if consumed is None else consumed
    before = known.filter(pc.field("silver_version") <= limit).select(key)
    fresh = seen.join(before, key, join_type="left anti")
    counted = fresh.group_by(["day", "currency"]).aggregate([("customer_id", "count")])
    added = {(r["day"], r["currency"]): int(r["customer_id_count"]) for r in counted.to_pylist()}
    missing = seen.join(known.select(key), key, join_type="left anti")
    return added, missing.select(CUSTOMERS_SCHEMA.names).cast(CUSTOMERS_SCHEMA), read


def _daily_rows(
    dt: DeltaTable, batch: Mapping[tuple, Mapping[str, Any]], added: Mapping[tuple, int]
) -> list[dict[str, Any]]:
    """The days' rows after adding the batch's counters and new customers to the current ones."""
    days = sorted({k[0] for k in batch})
    predicate = " OR ".join(f"day = '{d.isoformat()}'" for d in days)
    current = {
        (r["day"], r["currency"]): r
        for r in (delta_io.read_rows(dt, KPI_DAILY_SCHEMA, predicate).to_pylist() if days else [])
    }
    rows = []
    for key, counted in batch.items():
        was = current.get(key)
        total = {n: (was[n] if was else 0) + counted[n] for n, _ in COUNTERS}
        unique = (was["unique_customers"] if was else 0) + added.get(key, 0)
        rows.append(
            {
                "day": key[0],
                "currency": key[1],
                **finish(total, unique),
                "revision": (was["revision"] if was else 0) + 1,
            }
        )
    return rows


def _customers(dt: DeltaTable, days: list[date]) -> tuple[pa.Table, int]:
    """The customer set rows of ``days`` (files pruned by the ``day`` statistics), and the
    number of rows in the files read."""
    if not days:
        return CUSTOMERS_SCHEMA.empty_table(), 0
    predicate = f"day IN ({', '.join(repr(d.isoformat()) for d in days)})"
    rows = delta_io.read_rows(dt, CUSTOMERS_SCHEMA, predicate)
    return rows.filter(pc.field("day").isin(days)), rows.num_rows
