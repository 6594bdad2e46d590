"""Asset checks of a stream's silver events and windows: DuckDB over the Delta tables.

``event_id_unique`` is blocking: gold never computes from a silver table with a duplicated
event. The window reconciliation fails with severity ERROR but blocks nothing downstream.
"""

import dagster as dg
from deltalake.exceptions import TableNotFoundError

from eos_assets.defs.automation import check_with_asset
from eos_assets.defs.checks import report_result
from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.stream import Stream
from eos_assets.lib.checks.reconcile import (
    read_version,
    reconcile_windows,
    silver_columns,
    unique_event_ids,
)
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived import windows
from eos_assets.resources.lake import LakeResource

EVENT_ID_UNIQUE = "event_id_unique"
WINDOWS_RECONCILE = "final_windows_match_silver"


def missing(what: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, description=f"{what}: materialize it first")


def derived_checks(stream: Stream) -> list[dg.AssetChecksDefinition]:
    """The checks of the stream's silver events and windows."""

    @check_with_asset(
        stream.events,
        EVENT_ID_UNIQUE,
        "Every event_id is present once in silver/events (and never null).",
        blocking=True,
    )
    def event_id_unique(lake: LakeResource) -> dg.AssetCheckResult:
        """Prove silver's insert-if-absent kept one row per event_id."""
        uri = lake.table_uri(*stream.events.path)
        try:
            report = unique_event_ids(delta_io.read_arrow(uri, lake.storage_options, ["event_id"]))
            if report.problem_count:  # read again to say where each duplicate came from
                columns = ["event_id", "topic", "partition", "offset"]
                report = unique_event_ids(delta_io.read_arrow(uri, lake.storage_options, columns))
        except TableNotFoundError:
            return missing(f"no Delta table at {uri}")
        return report_result(report)

    @check_with_asset(
        stream.window_aggregates,
        WINDOWS_RECONCILE,
        "Final windows (end at or before the watermark) have the totals of the silver rows of the "
        "same window, silver read at the version the windows consumed.",
        op_tags=AFTER_SERVING,
    )
    def final_windows_match_silver(lake: LakeResource) -> dg.AssetCheckResult:
        """Reconcile window aggregates with silver/events for final windows."""
        uri = lake.table_uri(*stream.window_aggregates.path)
        try:
            dt = delta_io.load(uri, lake.storage_options)
        except TableNotFoundError:
            return missing(f"no Delta table at {uri}")
        state = delta_io.positions(dt, [windows.APP, windows.WATERMARK_APP])
        size_s = dt.transaction_version(windows.SIZE_APP)
        if state[windows.APP] is None or size_s is None:
            return missing(f"{uri} has consumed no silver version yet")
        gold = delta_io.read_arrow(uri, lake.storage_options)
        silver = read_version(
            lake.table_uri(*stream.events.path),
            state[windows.APP],
            silver_columns(stream.windows),
            lake.storage_options,
        )
        report = reconcile_windows(
            stream.windows, gold, silver, size_s, state[windows.WATERMARK_APP]
        )
        report.counts["silver_version"] = state[windows.APP]
        return report_result(report)

    return [event_id_unique, final_windows_match_silver]
