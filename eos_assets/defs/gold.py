"""Gold layer: windowed aggregates with grace, late events, KPI tables and their DuckDB mirror."""

from datetime import timedelta
from typing import Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field

from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.silver import EVENTS, run_or_fail, seconds, versions_json
from eos_assets.lib import kpi, serving
from eos_assets.lib.kpi_daily import update_kpi_daily
from eos_assets.lib.kpi_window import update_kpi_window
from eos_assets.lib.window_aggregates import update_windows
from eos_assets.lib.windows import WindowSpec
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import spark_session
from eos_assets.resources.warehouse import WarehouseResource

WINDOW_AGGREGATES = dg.AssetKey(["gold", "window_aggregates"])
LATE_EVENTS = dg.AssetKey(["gold", "late_events"])
KPI_WINDOW = dg.AssetKey(["gold", "kpi_window"])
KPI_DAILY = dg.AssetKey(["gold", "kpi_daily"])
KPI_DAILY_CUSTOMERS = dg.AssetKey(["gold", "kpi_daily_customers"])
SERVING_KPI = dg.AssetKey(["serving", "kpi"])
DELTA = {"spark", "delta"}


class WindowConfig(dg.Config):
    """Tumbling event-time windows."""

    window_minutes: float = Field(default=5.0, gt=0, description="Window size in minutes.")
    grace_minutes: float = Field(
        default=10.0,
        ge=0,
        description="A window is final once max event time seen minus this passes its end.",
    )


class KpiWindowConfig(dg.Config):
    """Windows of the per-window KPIs."""

    window_minutes: float = Field(default=5.0, gt=0, description="Window size in minutes.")


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            WINDOW_AGGREGATES,
            deps=[EVENTS],
            group_name="gold",
            kinds=DELTA,
            description="Tumbling event-time windows per event_type and currency: events, "
            "distinct orders and customers, amount; revision, is_final and the watermark.",
        ),
        dg.AssetSpec(
            LATE_EVENTS,
            deps=[EVENTS],
            group_name="gold",
            kinds=DELTA,
            description="Events that arrived for a window already final, with the watermark "
            "they missed; their windows were recomputed, never silently lost.",
        ),
    ],
    op_tags=AFTER_SERVING,
)
def window_aggregates(
    context: dg.AssetExecutionContext,
    config: WindowConfig,
    lake: LakeResource,
    pyspark: LazyPySparkResource,
):
    """Recompute the windows touched by new silver rows; flag late events and final windows."""
    spec = WindowSpec(
        size=timedelta(minutes=config.window_minutes),
        grace=timedelta(minutes=config.grace_minutes),
    )
    outcome = run_or_fail(
        lambda: update_windows(
            spark_session(pyspark),
            lake.table_uri(*EVENTS.path),
            lake.table_uri(*WINDOW_AGGREGATES.path),
            lake.table_uri(*LATE_EVENTS.path),
            spec,
            lake.storage_options,
        )
    )
    if outcome.silver_versions is None:
        context.log.info("no new silver versions: nothing to do")
    yield dg.MaterializeResult(
        asset_key=WINDOW_AGGREGATES,
        metadata={
            "delta_version": outcome.version,
            "silver_versions_consumed": versions_json(outcome.silver_versions),
            "events_in": outcome.events,
            "windows_recomputed": outcome.windows_recomputed,
            "windows_finalized": outcome.windows_finalized,
            "silver_rows_read_for_recompute": outcome.silver_rows_read,
            "late_events": outcome.late_events,
            "watermark": str(outcome.watermark) if outcome.watermark else None,
            "window_minutes": config.window_minutes,
            "grace_minutes": config.grace_minutes,
            "attempts": outcome.attempts,
            "seconds": seconds(outcome.seconds),
        },
    )
    yield dg.MaterializeResult(
        asset_key=LATE_EVENTS,
        metadata={"delta_version": outcome.late_version, "late_events": outcome.late_events},
    )


@dg.asset(key=KPI_WINDOW, deps=[EVENTS], group_name="gold", kinds=DELTA)
def kpi_window(
    context: dg.AssetExecutionContext,
    config: KpiWindowConfig,
    lake: LakeResource,
    pyspark: LazyPySparkResource,
) -> dg.MaterializeResult:
    """Per-window KPIs per currency: revenue, orders created/paid/cancelled, AOV, customers.

    Revenue is paid minus refunded amount, AOV paid amount per paid order, cancellation rate
    cancelled per created order (see eos_assets/lib/kpi.py). Touched windows are recomputed.
    """
    outcome = run_or_fail(
        lambda: update_kpi_window(
            spark_session(pyspark),
            lake.table_uri(*EVENTS.path),
            lake.table_uri(*KPI_WINDOW.path),
            timedelta(minutes=config.window_minutes),
            lake.storage_options,
        )
    )
    if outcome.silver_versions is None:
        context.log.info("no new silver versions: nothing to do")
    return dg.MaterializeResult(metadata=_kpi_metadata(outcome))


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            KPI_DAILY,
            deps=[EVENTS],
            group_name="gold",
            kinds=DELTA,
            description="Per-day KPIs per currency: revenue (paid minus refunded), orders "
            "created/paid/cancelled, average order value, unique customers, cancellation rate.",
        ),
        dg.AssetSpec(
            KPI_DAILY_CUSTOMERS,
            deps=[EVENTS],
            group_name="gold",
            kinds=DELTA,
            description="The set of (day, currency, customer) behind kpi_daily's unique "
            "customers, so that the daily count grows with new data only.",
        ),
    ]
)
def kpi_daily(context: dg.AssetExecutionContext, lake: LakeResource, pyspark: LazyPySparkResource):
    """Add new silver rows to their days' KPIs; distinct customers through the day's set."""
    outcome = run_or_fail(
        lambda: update_kpi_daily(
            spark_session(pyspark),
            lake.table_uri(*EVENTS.path),
            lake.table_uri(*KPI_DAILY.path),
            lake.table_uri(*KPI_DAILY_CUSTOMERS.path),
            lake.storage_options,
        )
    )
    if outcome.silver_versions is None:
        context.log.info("no new silver versions: nothing to do")
    yield dg.MaterializeResult(asset_key=KPI_DAILY, metadata=_kpi_metadata(outcome))
    yield dg.MaterializeResult(
        asset_key=KPI_DAILY_CUSTOMERS,
        metadata={
            "delta_version": outcome.customers_version,
            "new_customer_days": outcome.new_customers,
        },
    )


@dg.asset(
    key=SERVING_KPI, deps=[KPI_WINDOW, KPI_DAILY], group_name="serving", kinds={"delta", "duckdb"}
)
def serving_kpi(
    context: dg.AssetExecutionContext, lake: LakeResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """The KPI tables in the DuckDB serving database, upserted with the Delta version they reflect.

    Tables ``kpi_window`` and ``kpi_daily`` (primary keys: period and currency) and
    ``eos_delta_versions`` change in one DuckDB transaction, made in a copy of the file that
    is then swapped in: readers with the file open keep their version and never block this.
    """
    tables = served_tables(lake)
    outcome = run_or_fail(lambda: serving.serve(warehouse.path, tables, lake.storage_options))
    if not outcome.upserted:
        context.log.info("DuckDB already reflects the current Delta versions")
    return dg.MaterializeResult(
        metadata={
            "delta_versions": dg.MetadataValue.json(outcome.versions),
            "rows_upserted": dg.MetadataValue.json(outcome.upserted),
            "up_to_date": dg.MetadataValue.json(outcome.skipped),
            "warehouse": warehouse.path,
            "seconds": round(outcome.seconds, 3),
        }
    )


def served_tables(lake: LakeResource) -> list[serving.ServedTable]:
    """The KPI tables the serving database mirrors."""
    return [
        serving.ServedTable(
            "kpi_window",
            lake.table_uri(*KPI_WINDOW.path),
            kpi.KPI_WINDOW_SCHEMA,
            kpi.KPI_WINDOW_KEY,
        ),
        serving.ServedTable(
            "kpi_daily", lake.table_uri(*KPI_DAILY.path), kpi.KPI_DAILY_SCHEMA, kpi.KPI_DAILY_KEY
        ),
    ]


def _kpi_metadata(outcome: kpi.KpiOutcome) -> dict[str, Any]:
    return {
        "delta_version": outcome.version,
        "silver_versions_consumed": versions_json(outcome.silver_versions),
        "events_in": outcome.events,
        "rows_upserted": outcome.rows_written,
        "silver_rows_read_for_recompute": outcome.silver_rows_read,
        "new_customer_days": outcome.new_customers,
        "customer_set_rows_read": outcome.set_rows_read,
        "attempts": outcome.attempts,
        "seconds": seconds(outcome.seconds),
    }
