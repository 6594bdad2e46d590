"""Maintenance of every Delta table: compact small files, vacuum orphans, checkpoint (the op of
``jobs.py``'s ``maintain_delta_tables``, scheduled daily in ``schedules.py``)."""

from collections.abc import Mapping, Sequence

import dagster as dg
from pydantic import Field

from eos_assets.defs.stream import SILVER
from eos_assets.lib.delta import delta_io, maintenance
from eos_assets.resources.lake import LakeResource


def z_order(key: dg.AssetKey) -> tuple[str, ...]:
    """The columns a table's files are clustered by when compacted.

    A stream's silver/events finds duplicates by each file's event-time range: keep those
    ranges narrow.
    """
    return ("event_time",) if key.path[-2:] == [SILVER, "events"] else ()


class MaintenanceConfig(dg.Config):
    """Run configuration of the maintenance job."""

    orphan_hours: int = Field(
        default=maintenance.DEFAULT_RETENTION_HOURS,
        description="Unreferenced files older than this are deleted (never below 1 h).",
    )


def maintain_tables(
    tables: Sequence[dg.AssetKey], lakes: Mapping[str, str] | None = None
) -> dg.OpDefinition:
    """The op that maintains ``tables``, each in the lake of its stream: ``lakes`` gives the
    lake's resource key by stream name (``lake`` for a stream not named)."""
    lakes = lakes or {}

    def lake_key(key: dg.AssetKey) -> str:
        return lakes.get(key.path[0], "lake")

    # Named by key: the tables of streams with a lake of their own span several resources.
    @dg.op(tags={"kind": "delta"}, required_resource_keys={lake_key(key) for key in tables})
    def maintain_tables(
        context: dg.OpExecutionContext, config: MaintenanceConfig
    ) -> dg.Output[None]:
        """Compact, vacuum orphaned files and checkpoint each existing table of the lake."""
        report = {}
        for key in tables:
            lake: LakeResource = getattr(context.resources, lake_key(key))
            uri = lake.table_uri(*key.path)
            if not delta_io.exists(uri, lake.storage_options):
                continue
            done = maintenance.maintain(
                uri, z_order(key), config.orphan_hours, lake.storage_options
            )
            report[key.to_user_string()] = {
                "files_before": done.files_before,
                "files_after": done.files_after,
                "orphans_removed": done.orphans_removed,
                "checkpoint_version": done.checkpoint_version,
            }
            context.log.info(f"{key.to_user_string()}: {report[key.to_user_string()]}")
        return dg.Output(None, metadata={"tables": dg.MetadataValue.json(report)})

    return maintain_tables
