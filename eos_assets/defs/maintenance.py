"""Maintenance of every Delta table: compact small files, vacuum orphans, checkpoint (the op of
``jobs.maintenance_job``, scheduled daily in ``schedules.py``)."""

import dagster as dg
from pydantic import Field

from eos_assets.defs.bronze import RAW_EVENTS
from eos_assets.defs.gold import (
    KPI_DAILY,
    KPI_DAILY_CUSTOMERS,
    KPI_WINDOW,
    LATE_EVENTS,
    WINDOW_AGGREGATES,
)
from eos_assets.defs.silver import EVENTS, ORDER_STATE
from eos_assets.lib import delta_io, maintenance
from eos_assets.resources.lake import LakeResource

# silver/events finds duplicates by each file's event-time range: keep those ranges narrow.
Z_ORDER = {EVENTS: ("event_time",)}
TABLES = (
    RAW_EVENTS,
    EVENTS,
    ORDER_STATE,
    WINDOW_AGGREGATES,
    LATE_EVENTS,
    KPI_WINDOW,
    KPI_DAILY,
    KPI_DAILY_CUSTOMERS,
)


class MaintenanceConfig(dg.Config):
    """Run configuration of the maintenance job."""

    orphan_hours: int = Field(
        default=maintenance.DEFAULT_RETENTION_HOURS,
        description="Unreferenced files older than this are deleted (never below 1 h).",
    )


@dg.op(tags={"kind": "delta"})
def maintain_tables(
    context: dg.OpExecutionContext, config: MaintenanceConfig, lake: LakeResource
) -> dg.Output[None]:
    """Compact, vacuum orphaned files and checkpoint each existing table of the lake."""
    report = {}
    for key in TABLES:
        uri = lake.table_uri(*key.path)
        if not delta_io.exists(uri, lake.storage_options):
            continue
        done = maintenance.maintain(
            uri, Z_ORDER.get(key, ()), config.orphan_hours, lake.storage_options
        )
        report[key.to_user_string()] = {
            "files_before": done.files_before,
            "files_after": done.files_after,
            "orphans_removed": done.orphans_removed,
            "checkpoint_version": done.checkpoint_version,
        }
        context.log.info(f"{key.to_user_string()}: {report[key.to_user_string()]}")
    return dg.Output(None, metadata={"tables": dg.MetadataValue.json(report)})
