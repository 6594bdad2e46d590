"""Asset checks of silver and gold: DuckDB over the Delta tables and the serving database.

``event_id_unique`` is blocking: gold never computes from a silver table with a duplicated
event. The reconciliations fail with severity ERROR but block nothing downstream (serving
reads gold tables, not their totals).
"""

import dagster as dg
import duckdb
from deltalake.exceptions import TableNotFoundError

from eos_assets.defs.automation import CHECK_WITH_ASSET
from eos_assets.defs.gold import SERVING_KPI, WINDOW_AGGREGATES, served_tables
from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.silver import EVENTS
from eos_assets.lib import delta_io, windows
from eos_assets.lib.errors import EosError
from eos_assets.lib.reconcile import (
    Report,
    Served,
    read_version,
    reconcile_serving,
    reconcile_windows,
    unique_event_ids,
)
from eos_assets.lib.serving import VERSIONS_TABLE
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.warehouse import WarehouseResource

EVENT_ID_UNIQUE = "event_id_unique"
WINDOWS_RECONCILE = "final_windows_match_silver"
SERVING_RECONCILE = "duckdb_matches_delta"

EVENT_ID_UNIQUE_KEY = dg.AssetCheckKey(EVENTS, EVENT_ID_UNIQUE)
WINDOWS_RECONCILE_KEY = dg.AssetCheckKey(WINDOW_AGGREGATES, WINDOWS_RECONCILE)
SERVING_RECONCILE_KEY = dg.AssetCheckKey(SERVING_KPI, SERVING_RECONCILE)


def _result(report: Report) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=report.ok,
        description=report.summary(),
        metadata={
            k: dg.MetadataValue.json(v) if isinstance(v, list | dict) else v  # type: ignore[misc]
            for k, v in report.metadata().items()
        },
    )


def _missing(what: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, description=f"{what}: materialize it first")


@dg.asset_check(
    asset=EVENTS,
    name=EVENT_ID_UNIQUE,
    blocking=True,
    automation_condition=CHECK_WITH_ASSET,
    description="Every event_id is present once in silver/events (and never null).",
)
def event_id_unique(lake: LakeResource) -> dg.AssetCheckResult:
    """Prove silver's insert-if-absent kept one row per event_id."""
    uri = lake.table_uri(*EVENTS.path)
    try:
        report = unique_event_ids(delta_io.read_arrow(uri, lake.storage_options, ["event_id"]))
        if report.problem_count:  # read again to say where each duplicate came from
            columns = ["event_id", "topic", "partition", "offset"]
            report = unique_event_ids(delta_io.read_arrow(uri, lake.storage_options, columns))
    except TableNotFoundError:
        return _missing(f"no Delta table at {uri}")
    return _result(report)


@dg.asset_check(
    asset=WINDOW_AGGREGATES,
    op_tags=AFTER_SERVING,
    name=WINDOWS_RECONCILE,
    automation_condition=CHECK_WITH_ASSET,
    description="Final windows (end at or before the watermark) have the totals of the silver "
    "rows of the same window, silver read at the version the windows consumed.",
)
def final_windows_match_silver(lake: LakeResource) -> dg.AssetCheckResult:
    """Reconcile window aggregates with silver/events for final windows."""
    uri = lake.table_uri(*WINDOW_AGGREGATES.path)
    try:
        dt = delta_io.load(uri, lake.storage_options)
    except TableNotFoundError:
        return _missing(f"no Delta table at {uri}")
    state = {a: dt.transaction_version(a) for a in (windows.APP, windows.WATERMARK_APP)}
    size_s = dt.transaction_version(windows.SIZE_APP)
    if state[windows.APP] is None or size_s is None:
        return _missing(f"{uri} has consumed no silver version yet")
    gold = delta_io.read_arrow(uri, lake.storage_options)
    silver = read_version(
        lake.table_uri(*EVENTS.path),
        state[windows.APP],
        ["event_time", "event_type", "currency", "order_id", "customer_id", "amount"],
        lake.storage_options,
    )
    report = reconcile_windows(gold, silver, size_s, state[windows.WATERMARK_APP])
    report.counts["silver_version"] = state[windows.APP]
    return _result(report)


@dg.asset_check(
    asset=SERVING_KPI,
    name=SERVING_RECONCILE,
    automation_condition=CHECK_WITH_ASSET,
    description="Each KPI table in DuckDB equals, key by key, its Delta table at the version "
    "DuckDB records as mirrored.",
)
def duckdb_matches_delta(lake: LakeResource, warehouse: WarehouseResource) -> dg.AssetCheckResult:
    """Reconcile the DuckDB serving tables with the Delta KPI tables."""
    served = [Served(t.name, t.key, t.uri) for t in served_tables(lake)]
    try:
        with warehouse.read() as con:
            report = reconcile_serving(con, served, VERSIONS_TABLE, lake.storage_options)
    except (EosError, TableNotFoundError, duckdb.Error) as exc:
        cause = " ".join(str(exc).split())[:300]
        return _missing(f"cannot read the serving database {warehouse.path} ({cause})")
    return _result(report)
