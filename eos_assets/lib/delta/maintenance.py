"""Table maintenance: compaction, checkpoints, and removal of files crashed writers left.

An ingest writes its Parquet files into the table folder before its one Delta commit; a run
killed before the commit, or one that lost a commit race, leaves files that no commit
references. Readers never see them (they read the files of the log), but they take space
until a full vacuum deletes them.

A file of an ingest still in flight is unreferenced too, until its commit. Only files older
than ``older_than_hours`` are deleted, so the retention must stay above the longest ingest
(its read timeout plus the commit): 24 hours by default, never less than 1 hour unless forced.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from eos_assets.lib.delta import delta_io
from eos_assets.lib.errors import ConfigError

DEFAULT_RETENTION_HOURS = 24
MIN_RETENTION_HOURS = 1


def remove_orphans(
    uri: str,
    older_than_hours: int = DEFAULT_RETENTION_HOURS,
    storage_options: Mapping[str, str] | None = None,
    force: bool = False,
) -> list[str]:
    """Delete every file of the table folder that no commit references and is old enough.

    Runs delta-rs's full vacuum; files whose names start with ``_`` or ``.`` (the log) are
    never touched. Files removed by earlier commits and older than the retention go too.

    Args:
        uri: the Delta table.
        older_than_hours: only files last modified longer ago than this are deleted.
        storage_options: delta-rs storage options for object stores.
        force: allow a retention below ``MIN_RETENTION_HOURS`` (only when no ingest runs).

    Returns:
        The deleted files, relative to the table folder.

    Raises:
        ConfigError: the retention is below the minimum and ``force`` is not set.
    """
    if older_than_hours < MIN_RETENTION_HOURS and not force:
        raise ConfigError(
            f"a retention of {older_than_hours} h would delete the files of ingests still in "
            f"flight: use at least {MIN_RETENTION_HOURS} h, or force it when no ingest runs"
        )
    return delta_io.load(uri, storage_options).vacuum(
        retention_hours=max(0, older_than_hours),
        dry_run=False,
        enforce_retention_duration=False,
        full=True,
    )


@dataclass(frozen=True)
class TableMaintenance:
    """What one maintenance pass did to one table."""

    uri: str
    files_before: int
    files_after: int
    files_removed_by_compaction: int
    orphans_removed: int
    checkpoint_version: int


def maintain(
    uri: str,
    z_order_by: Sequence[str] = (),
    orphan_hours: int = DEFAULT_RETENTION_HOURS,
    storage_options: Mapping[str, str] | None = None,
) -> TableMaintenance:
    """Compact small files, remove orphaned files and checkpoint the log of one table.

    Compaction commits with ``dataChange=false``, so incremental readers (which take only
    data-changing adds) never see compacted rows twice. ``z_order_by`` keeps files tight on
    those columns (``silver/events`` relies on narrow event-time ranges per file).
    """
    dt = delta_io.load(uri, storage_options)
    before = len(dt.file_uris())
    optimize = dt.optimize
    metrics = optimize.z_order(list(z_order_by)) if z_order_by else optimize.compact()
    orphans = remove_orphans(uri, orphan_hours, storage_options)
    dt = delta_io.load(uri, storage_options)
    dt.create_checkpoint()
    return TableMaintenance(
        uri=uri,
        files_before=before,
        files_after=len(dt.file_uris()),
        files_removed_by_compaction=int(metrics.get("numFilesRemoved", 0)),
        orphans_removed=len(orphans),
        checkpoint_version=dt.version(),
    )
