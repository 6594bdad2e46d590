"""What the ingest wrote into the Delta log: the ranges of each commit and the positions.

Every ingest commit carries ``eos.operation = "ingest"`` and ``eos.ranges`` (one entry per
topic-partition: ``topic, partition, start, end, records, malformed, gaps``) in its commit
metadata, and one ``txn`` action per partition (app id ``eos:<topic>:<partition>``) whose
version is the next offset to read. ``eos.lost`` lists the offsets ``topic, partition, start,
end`` that Kafka had deleted before they were read and that the run was told to skip
(acknowledged loss). ``eos.skipped`` lists the offsets ``topic, partition, start, end,
reason, declared`` that a partition's declared start (``latest`` or a time) passed over when the
table first read it (reason ``declared start``). Other commits (compaction, vacuum) carry no ranges.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa
from deltalake import DeltaTable

from eos_assets.lib.delta import txn_ids
from eos_assets.lib.delta.txn_ids import partition_app

# The columns of offsets ``[start, end)`` of one topic-partition.
_OFFSETS = (
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("start", pa.int64()),
    ("end", pa.int64()),
)
RANGE_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("committed_at_ms", pa.int64()),
        *_OFFSETS,
        ("records", pa.int64()),
        ("malformed", pa.int64()),
    ]
)
LOST_SCHEMA = pa.schema([("version", pa.int64()), *_OFFSETS])
SKIPPED_SCHEMA = pa.schema([*LOST_SCHEMA, ("declared", pa.string())])


@dataclass(frozen=True)
class IngestLog:
    """Every committed range still in the table's log, oldest first.

    Attributes:
        ranges: one row per (commit, partition), ``RANGE_SCHEMA``.
        first_version: the oldest version still in the log; above 0 when old log entries
            were cleaned up after a checkpoint, so ranges before it are unknown.
        positions: the ``txn`` version (next offset to read) of each partition with ranges.
        lost: one row per acknowledged loss, ``LOST_SCHEMA``.
        skipped: one row per range a declared start passed over, ``SKIPPED_SCHEMA``.
    """

    ranges: pa.Table
    first_version: int
    positions: dict[tuple[str, int], int | None]
    lost: pa.Table
    skipped: pa.Table = field(default_factory=SKIPPED_SCHEMA.empty_table)

    @property
    def complete(self) -> bool:
        """True when the log still holds every commit since the table was created."""
        return self.first_version == 0

    def partitions(self) -> list[tuple[str, int]]:
        """Topic-partitions with at least one committed range."""
        return sorted(self.positions)


def read_ingest_log(dt: DeltaTable) -> IngestLog:
    """Collect the ranges of every ingest commit of ``dt`` and the partitions' positions."""
    rows: dict[str, list] = {name: [] for name in RANGE_SCHEMA.names}
    lost: dict[str, list] = {name: [] for name in LOST_SCHEMA.names}
    skipped: dict[str, list] = {name: [] for name in SKIPPED_SCHEMA.names}
    first_version = dt.version()
    for entry in dt.history():
        version = int(entry["version"])
        first_version = min(first_version, version)
        if entry.get(txn_ids.OPERATION) != txn_ids.INGEST:
            continue
        for r in entry.get(txn_ids.RANGES) or []:
            row: Mapping[str, object] = {
                **r,
                "version": version,
                "committed_at_ms": int(entry.get("timestamp") or 0),
            }
            for name in RANGE_SCHEMA.names:
                rows[name].append(row.get(name, 0))
        for r in entry.get(txn_ids.LOST) or []:
            for name in LOST_SCHEMA.names:
                lost[name].append(version if name == "version" else r[name])
        for r in entry.get(txn_ids.SKIPPED) or []:
            for name in SKIPPED_SCHEMA.names:
                skipped[name].append(version if name == "version" else r.get(name))
    ranges = pa.table(rows, schema=RANGE_SCHEMA).sort_by([("version", "ascending")])
    losses = pa.table(lost, schema=LOST_SCHEMA).sort_by([("version", "ascending")])
    skips = pa.table(skipped, schema=SKIPPED_SCHEMA).sort_by([("version", "ascending")])
    tps = {*zip(rows["topic"], rows["partition"], strict=True)}
    for table in (lost, skipped):
        tps |= {*zip(table["topic"], table["partition"], strict=True)}
    positions = {tp: dt.transaction_version(partition_app(*tp)) for tp in sorted(tps)}
    return IngestLog(
        ranges=ranges,
        first_version=first_version,
        positions=positions,
        lost=losses,
        skipped=skips,
    )
