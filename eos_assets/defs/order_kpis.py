"""The revenue KPIs of a stream with the order shape, and their DuckDB mirror.

``gold/kpi_window`` (per window and currency) and ``gold/kpi_daily`` (per day and currency:
revenue, orders created, paid and cancelled, average order value, unique customers) are computed
by the code that knows the order events' fields (``lib/revenue/``); ``serving/kpi`` mirrors
them into DuckDB, and ``outbound/kpi_alerts`` raises alerts on them (``order_alerts.py``). A
stream gets them when its declaration has the order shape (``lib/revenue/shape.py``); every
stream gets its declared KPIs (``serving.py``), the generic way to the same tables.
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import dagster as dg
import duckdb
from dagster_pyspark import LazyPySparkResource
from deltalake.exceptions import TableNotFoundError
from pydantic import Field

from eos_assets.defs.automation import check_with_asset
from eos_assets.defs.checks import report_result
from eos_assets.defs.derived_checks import missing
from eos_assets.defs.silver import Context, from_silver_metadata, run_or_fail
from eos_assets.defs.stream import GOLD, OUTBOUND, SERVING, Stream
from eos_assets.lib.checks.reconcile import Served, reconcile_serving
from eos_assets.lib.errors import EosError
from eos_assets.lib.revenue import kpi
from eos_assets.lib.revenue.kpi_daily import update_kpi_daily
from eos_assets.lib.revenue.kpi_window import update_kpi_window
from eos_assets.lib.serving import serving
from eos_assets.lib.serving.serving import VERSIONS_TABLE
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import spark_session
from eos_assets.resources.warehouse import WarehouseResource

SERVING_RECONCILE = "duckdb_matches_delta"


@dataclass(frozen=True)
class OrderKpiKeys:
    """The keys of a stream's revenue KPI tables."""

    kpi_window: dg.AssetKey
    kpi_daily: dg.AssetKey
    kpi_daily_customers: dg.AssetKey
    serving_kpi: dg.AssetKey
    kpi_alerts: dg.AssetKey

    @classmethod
    def of(cls, stream: Stream) -> "OrderKpiKeys":
        return cls(
            stream.key(GOLD, "kpi_window"),
            stream.key(GOLD, "kpi_daily"),
            stream.key(GOLD, "kpi_daily_customers"),
            stream.key(SERVING, "kpi"),
            stream.key(OUTBOUND, "kpi_alerts"),
        )


class KpiWindowConfig(dg.Config):
    """Windows of the per-window KPIs."""

    window_minutes: float = Field(default=5.0, gt=0, description="Window size in minutes.")


def kpi_assets(stream: Stream) -> list[dg.AssetsDefinition]:
    """The stream's revenue KPI tables and their DuckDB mirror."""
    keys = OrderKpiKeys.of(stream)

    @stream.spark_table(keys.kpi_window, [stream.events])
    def kpi_window(
        context: dg.AssetExecutionContext,
        config: KpiWindowConfig,
        lake: LakeResource,
        pyspark: LazyPySparkResource,
    ) -> dg.MaterializeResult:
        """Per-window KPIs per currency: revenue, orders created/paid/cancelled, AOV, customers.

        Revenue is paid minus refunded amount, AOV paid amount per paid order, cancellation rate
        cancelled per created order (see eos_assets/lib/revenue/kpi.py). Touched windows are
        recomputed.
        """
        outcome = run_or_fail(
            lambda: update_kpi_window(
                spark_session(pyspark),
                lake.table_uri(*stream.events.path),
                lake.table_uri(*keys.kpi_window.path),
                timedelta(minutes=config.window_minutes),
                lake.storage_options,
            )
        )
        return dg.MaterializeResult(metadata=kpi_metadata(context, outcome))

    @dg.multi_asset(
        name=keys.kpi_daily.to_python_identifier(),
        specs=stream.spark_tables(
            [stream.events],
            {
                keys.kpi_daily: "Per-day KPIs per currency: revenue (paid minus refunded), "
                "orders created/paid/cancelled, average order value, unique customers, "
                "cancellation rate.",
                keys.kpi_daily_customers: "The set of (day, currency, customer) behind "
                "kpi_daily's unique customers, so that the daily count grows with new data only.",
            },
        ),
    )
    def kpi_daily(
        context: dg.AssetExecutionContext, lake: LakeResource, pyspark: LazyPySparkResource
    ):
        """Add new silver rows to their days' KPIs; distinct customers through the day's set."""
        outcome = run_or_fail(
            lambda: update_kpi_daily(
                spark_session(pyspark),
                lake.table_uri(*stream.events.path),
                lake.table_uri(*keys.kpi_daily.path),
                lake.table_uri(*keys.kpi_daily_customers.path),
                lake.storage_options,
            )
        )
        yield dg.MaterializeResult(
            asset_key=keys.kpi_daily, metadata=kpi_metadata(context, outcome)
        )
        yield dg.MaterializeResult(
            asset_key=keys.kpi_daily_customers,
            metadata={
                "delta_version": outcome.customers_version,
                "new_customer_days": outcome.new_customers,
            },
        )

    @dg.asset(
        key=keys.serving_kpi,
        deps=[keys.kpi_window, keys.kpi_daily],
        group_name=stream.group(SERVING),
        kinds={"delta", "duckdb"},
    )
    def serving_kpi(
        context: dg.AssetExecutionContext, lake: LakeResource, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        """The KPI tables in the serving database, upserted with the Delta version they reflect.

        Tables ``kpi_window`` and ``kpi_daily`` (primary keys: period and currency) and
        ``eos_delta_versions`` change in one DuckDB transaction, made in a copy of the file that
        is then swapped in: readers with the file open keep their version and never block this.
        """
        tables = served_tables(keys, lake)
        outcome = run_or_fail(lambda: serving.serve(warehouse.path, tables, lake.storage_options))
        return dg.MaterializeResult(metadata=serving_metadata(context, outcome, warehouse.path))

    return [kpi_window, kpi_daily, serving_kpi]


def serving_check(stream: Stream) -> dg.AssetChecksDefinition:
    """``duckdb_matches_delta`` on ``<stream>/serving/kpi``."""
    keys = OrderKpiKeys.of(stream)

    @check_with_asset(
        keys.serving_kpi,
        SERVING_RECONCILE,
        "Each KPI table in DuckDB equals, key by key, its Delta table at the version DuckDB "
        "records as mirrored.",
    )
    def duckdb_matches_delta(
        lake: LakeResource, warehouse: WarehouseResource
    ) -> dg.AssetCheckResult:
        """Reconcile the DuckDB serving tables with the Delta KPI tables."""
        served = [Served(t.name, t.key, t.uri) for t in served_tables(keys, lake)]
        try:
            with warehouse.read() as con:
                report = reconcile_serving(con, served, VERSIONS_TABLE, lake.storage_options)
        except (EosError, TableNotFoundError, duckdb.Error) as exc:
            cause = " ".join(str(exc).split())[:300]
            return missing(f"cannot read the serving database {warehouse.path} ({cause})")
        return report_result(report)

    return duckdb_matches_delta


def served_tables(keys: "OrderKpiKeys", lake: LakeResource) -> list[serving.ServedTable]:
    """The KPI tables the serving database mirrors."""
    return [
        serving.ServedTable(
            "kpi_window",
            lake.table_uri(*keys.kpi_window.path),
            kpi.KPI_WINDOW_SCHEMA,
            kpi.KPI_WINDOW_KEY,
        ),
        serving.ServedTable(
            "kpi_daily",
            lake.table_uri(*keys.kpi_daily.path),
            kpi.KPI_DAILY_SCHEMA,
            kpi.KPI_DAILY_KEY,
        ),
    ]


def kpi_metadata(context: Context, outcome: kpi.KpiOutcome) -> dict[str, Any]:
    """The metadata of one update of a revenue KPI table."""
    details = {
        "rows_upserted": outcome.rows_written,
        "silver_rows_read_for_recompute": outcome.silver_rows_read,
        "new_customer_days": outcome.new_customers,
        "customer_set_rows_read": outcome.set_rows_read,
    }
    return from_silver_metadata(context, outcome, details)


def serving_metadata(context: Context, outcome: serving.MirrorOutcome, path: str) -> dict[str, Any]:
    """The metadata of one refresh of the DuckDB serving tables."""
    if not outcome.upserted:
        context.log.info("DuckDB already reflects the current Delta versions")
    return {
        "delta_versions": dg.MetadataValue.json(outcome.versions),
        "rows_upserted": dg.MetadataValue.json(outcome.upserted),
        "up_to_date": dg.MetadataValue.json(outcome.skipped),
        "warehouse": path,
        "seconds": round(outcome.seconds, 3),
    }
