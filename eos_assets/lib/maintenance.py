"""Table maintenance: remove the files that crashed or losing writers left behind.

An ingest writes its Parquet files into the table folder before its one Delta commit; a run
killed before the commit, or one that lost a commit race, leaves files that no commit
references. Readers never see them (they read the files of the log), but they take space
until a full vacuum deletes them.

A file of an ingest still in flight is unreferenced too, until its commit. Only files older
than ``older_than_hours`` are deleted, so the retention must stay above the longest ingest
(its read timeout plus the commit): 24 hours by default, never less than 1 hour unless forced.
"""

from collections.abc import Mapping

from eos_assets.lib import delta_io
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
