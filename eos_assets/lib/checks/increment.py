"""What changed in a Delta table since the snapshot a check last proved clean.

Data files never change once written and deletion vectors are off, so a snapshot's rows are
those of its files: the latest rows are the checked ones, minus those of the files removed
since, plus those of the files added since. A check that keeps the version it proved and a
digest of that snapshot's file list (``Checked``) can look at the difference alone; the digest
tells a table recreated or rewritten under the same version number from the one checked.
"""

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

# Metadata keys of a passing evaluation that an incremental check starts from.
CHECKED_VERSION = "checked_version"
CHECKED_FILES = "checked_files_sha256"


@dataclass(frozen=True)
class Checked:
    """A snapshot a check proved clean: its version and the digest of its file list."""

    version: int
    files_sha256: str

    def metadata(self, prefix: str = "") -> dict[str, object]:
        """The keys a passing evaluation records, for the next check to start from
        (``prefix`` names another table than the checked one)."""
        return {prefix + CHECKED_VERSION: self.version, prefix + CHECKED_FILES: self.files_sha256}

    @staticmethod
    def of(dt: DeltaTable) -> "Checked":
        """The snapshot ``dt``."""
        return Checked(dt.version(), files_digest(dt.file_uris()))

    @staticmethod
    def from_metadata(metadata: Mapping[str, object] | None, prefix: str = "") -> "Checked | None":
        """The snapshot a passing evaluation recorded, None if it recorded none."""
        if not metadata:
            return None
        version = metadata.get(prefix + CHECKED_VERSION)
        digest = metadata.get(prefix + CHECKED_FILES)
        if not isinstance(version, int) or not isinstance(digest, str):
            return None
        return Checked(version, digest)


@dataclass(frozen=True)
class Since:
    """The files of the latest snapshot that the checked one lacked, and the reverse."""

    base: int
    added: list[str]
    removed: list[str]


def files_digest(uris: Sequence[str]) -> str:
    """SHA-256 of a snapshot's sorted file list."""
    return hashlib.sha256("\n".join(sorted(uris)).encode()).hexdigest()


def since(
    uri: str,
    latest: DeltaTable,
    checked: Checked | None,
    storage_options: Mapping[str, str] | None = None,
) -> Since | None:
    """The files added and removed between ``checked`` and ``latest``.

    None (check everything) when there is no checked snapshot, when it is newer than
    ``latest``, when its version can no longer be loaded (log cleaned up), or when the snapshot
    under its version is not the one checked.
    """
    if checked is None or checked.version > latest.version():
        return None
    try:
        base = DeltaTable(uri, version=checked.version, storage_options=dict(storage_options or {}))
    except (DeltaError, OSError, ValueError):
        return None
    before = base.file_uris()
    if files_digest(before) != checked.files_sha256:
        return None
    now = latest.file_uris()
    old, new = set(before), set(now)
    return Since(checked.version, [u for u in now if u not in old], sorted(old - new))


def read_files(
    uris: Sequence[str],
    schema: pa.Schema,
    columns: Sequence[str],
    filter: pc.Expression | None = None,
) -> pa.Table:
    """``columns`` of the rows of the data files ``uris`` (``filter`` also skips row groups by
    their statistics)."""
    if not uris:
        return pa.schema([schema.field(c) for c in columns]).empty_table()
    fs, _ = pafs.FileSystem.from_uri(uris[0])
    paths = [pafs.FileSystem.from_uri(u)[1] for u in uris]
    return pq.read_table(paths, filesystem=fs, columns=list(columns), schema=schema, filters=filter)


def table_schema(dt: DeltaTable) -> pa.Schema:
    """The Arrow schema of snapshot ``dt``."""
    return pa.schema(dt.schema().to_arrow())  # type: ignore[arg-type]


def rows_changed(added: pa.Table, removed: pa.Table) -> pa.Table:
    """The rows in one of ``added`` and ``removed`` and not in the other, counting repeats.

    A merge rewrites whole files: most rows of a removed file come back unchanged in an added
    one, and only the others changed the table.
    """
    con = duckdb.connect()
    try:
        con.register("a", added)
        con.register("r", removed.select(added.column_names))
        return con.sql(
            "(SELECT * FROM a EXCEPT ALL SELECT * FROM r) "
            "UNION ALL (SELECT * FROM r EXCEPT ALL SELECT * FROM a)"
        ).to_arrow_table()
    finally:
        con.close()
