"""KPI tables: ``gold/kpi_window`` and ``gold/kpi_daily``, per period and currency.

Definitions (event time, UTC; one row per period and ``currency``, ``""`` when missing; amounts
are never converted between currencies):

- ``orders_created`` / ``orders_paid`` / ``orders_cancelled`` / ``orders_refunded``: events of
  that type in the period;
- ``paid_amount`` / ``refunded_amount``: sum of the amounts of ``order_paid`` /
  ``order_refunded`` events in the period;
- ``revenue`` = ``paid_amount - refunded_amount`` (a refund counts in the period it happens);
- ``average_order_value`` = ``paid_amount / orders_paid`` (null without paid orders);
- ``unique_customers``: distinct ``customer_id`` among all events of the period;
- ``cancellation_rate`` = ``orders_cancelled / orders_created`` (null when nothing was created;
  it may exceed 1 when orders created earlier are cancelled in the period).

How the tables are kept: ``kpi_window.py`` (touched windows recomputed) and ``kpi_daily.py``
(additive counters plus a customer set for the distinct count). This module holds what they
share: the schemas, the formulas (``finish``) and the counters computed with Spark.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_assets.lib.contract.schema_time import UTC_MICROS
from eos_assets.lib.delta import delta_io, txn_ids
from eos_assets.lib.derived import increments
from eos_assets.lib.derived.incremental import FromSilverOutcome
from eos_assets.lib.derived.windows import NO_VALUE

UPSTREAM = "silver/events"
APP = txn_ids.FROM_SILVER
KINDS = ("created", "paid", "cancelled", "refunded")
NO_CURRENCY = NO_VALUE

AFTER_CUSTOMERS = "kpi_daily_after_customers"
AFTER_COMMIT = "kpi_after_commit"
CRASH_POINTS = (AFTER_CUSTOMERS, AFTER_COMMIT)  # used by kpi_window.py and kpi_daily.py

COUNTERS = (
    *[(f"orders_{kind}", pa.int64()) for kind in KINDS],
    ("paid_amount", pa.float64()),
    ("refunded_amount", pa.float64()),
)
MEASURES = (
    *COUNTERS,
    ("revenue", pa.float64()),
    ("average_order_value", pa.float64()),
    ("unique_customers", pa.int64()),
    ("cancellation_rate", pa.float64()),
    ("revision", pa.int64()),
    ("silver_version", pa.int64()),
)
KPI_WINDOW_SCHEMA = pa.schema(
    [("window_start", UTC_MICROS), ("window_end", UTC_MICROS), ("currency", pa.string()), *MEASURES]
)
KPI_DAILY_SCHEMA = pa.schema([("day", pa.date32()), ("currency", pa.string()), *MEASURES])
CUSTOMERS_SCHEMA = pa.schema(
    [
        ("day", pa.date32()),
        ("currency", pa.string()),
        ("customer_id", pa.string()),
        ("silver_version", pa.int64()),
    ]
)
KPI_WINDOW_KEY = ("window_start", "currency")
KPI_DAILY_KEY = ("day", "currency")
# The silver/events columns the orders KPIs read, typed as the orders declaration types them.
_READ_EVENTS = pa.schema(
    [
        ("event_type", pa.string()),
        ("event_time", UTC_MICROS),
        ("customer_id", pa.string()),
        ("amount", pa.float64()),
        ("currency", pa.string()),
    ]
)


@dataclass
class KpiOutcome(FromSilverOutcome):
    """What one run of a KPI table did, besides what every table from silver reports.

    Attributes:
        rows_written: KPI rows upserted (one per touched period and currency).
        silver_rows_read: kpi_window: the silver rows read to recompute the touched windows.
        new_customers: kpi_daily: (day, currency, customer) rows new to the customer set,
            after reading ``set_rows_read`` rows of it; ``customers_version`` is the set's
            version this run committed (None: none).
    """

    rows_written: int = 0
    silver_rows_read: int = 0
    new_customers: int = 0
    set_rows_read: int = 0
    customers_version: int | None = None


def finish(counters: Mapping[str, Any], unique_customers: int) -> dict[str, Any]:
    """The KPI columns of one period from its counters (see the module docstring)."""
    paid, created = counters["orders_paid"], counters["orders_created"]
    return {
        **{name: counters[name] for name, _ in COUNTERS},
        "revenue": counters["paid_amount"] - counters["refunded_amount"],
        "average_order_value": counters["paid_amount"] / paid if paid else None,
        "unique_customers": unique_customers,
        "cancellation_rate": counters["orders_cancelled"] / created if created else None,
    }


def counters(rows: DataFrame, group: list[str], *more: Column) -> DataFrame:
    """Counters of ``rows`` (silver events) per ``group``, plus ``customers`` (distinct) and
    the aggregates ``more``."""

    def of(kind: str) -> Column:
        return F.col("event_type") == f"order_{kind}"

    return rows.groupBy(*group).agg(
        *[F.count(F.when(of(k), 1)).alias(f"orders_{k}") for k in KINDS],
        F.coalesce(F.sum(F.when(of("paid"), F.col("amount"))), F.lit(0.0)).alias("paid_amount"),
        F.coalesce(F.sum(F.when(of("refunded"), F.col("amount"))), F.lit(0.0)).alias(
            "refunded_amount"
        ),
        F.count_distinct("customer_id").alias("customers"),
        F.count(F.lit(1)).alias("events"),
        *more,
    )


def read_increment(spark: SparkSession, increment: increments.Increment) -> DataFrame:
    """The new silver rows of ``increment`` with ``silver_version`` (missing currency: "";
    the version a decimal, ``increments.PLAN_STABLE_VERSION``)."""
    return increments.read_files(
        spark,
        increment.files,
        delta_io.spark_schema(_READ_EVENTS),
        "silver_version",
        increments.PLAN_STABLE_VERSION,
    ).withColumn("currency", F.coalesce("currency", F.lit(NO_CURRENCY)))
