"""Which bronze row of each event silver/events inserts, decided from narrow columns.

First delivery wins: among the valid bronze rows of one event id, the one with the lowest
``(bronze_version, topic, partition, offset)``, and none when silver already holds the id. Only
the event ids that occur more than once in the increment, or that silver holds, need a decision,
and it needs only the id and the delivery position. So the driver reads those columns of the
increment's bronze files, and the event ids of the silver files of the same event-time spans,
with Arrow, and Spark applies the decisions as one broadcast join. The wide rows then cross one
shuffle only, the one that groups them into files; ranking them in Spark took a second shuffle
of every row and a sort by event id.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived import increments
from eos_assets.lib.errors import EosError

FIRST_DELIVERY = ("bronze_version", "topic", "partition", "offset")
_KEEP = tuple(f"_keep_{c}" for c in FIRST_DELIVERY)
_LISTED = "_listed"
# One row per event id that needs a decision: the delivery kept, or nulls to keep none.
DECISIONS = pa.schema(
    [
        ("event_id", pa.string()),
        *zip(_KEEP, (pa.int64(), pa.string(), pa.int32(), pa.int64()), strict=True),
        (_LISTED, pa.bool_()),
    ]
)
# Decision lists up to this many rows go to every task whole (tens of MB at most).
BROADCAST_MAX_ROWS = 1_000_000
_READ = ["event_id", "event_time", "error", "topic", "partition", "offset"]


@dataclass(frozen=True)
class Batch:
    """The valid bronze rows of one increment, as far as deciding first deliveries goes.

    Attributes:
        rows: event id, event time and delivery position of every valid record.
        ids: their distinct event ids.
        repeated: the event ids found on more than one valid record.
        span_starts: the distinct starts (microseconds) of the event-time spans they fall in,
            sorted.
    """

    rows: pa.Table
    ids: pa.Array
    repeated: pa.Array
    span_starts: list[int]

    @property
    def spans(self) -> list[datetime]:
        """``span_starts`` as UTC datetimes."""
        return [datetime.fromtimestamp(s / 1e6, UTC) for s in self.span_starts]


def read_batch(files: Sequence[increments.AddedFile], span_us: int) -> Batch:
    """The valid rows of the increment's bronze ``files`` (each with the version that added
    it as ``bronze_version``), their distinct and repeated ids, and their spans of ``span_us``."""
    pieces = []
    for f in files:
        fs, path = pafs.FileSystem.from_uri(delta_io.as_uri(f.uri))
        piece = pq.read_table(path, filesystem=fs, columns=_READ, read_dictionary=["topic"])
        piece = piece.filter(pc.is_null(piece.column("error"))).drop_columns(["error"])
        version = pa.array([f.version] * piece.num_rows, pa.int64())
        pieces.append(piece.append_column("bronze_version", version))
    if not pieces:
        empty = pa.array([], pa.string())
        return Batch(pa.table({}), empty, empty, [])
    rows = pa.concat_tables(pieces, promote_options="permissive")
    # As Spark computes a file's span: the floor of a double division.
    micros = pc.cast(pc.cast(rows.column("event_time"), pa.int64()), pa.float64())
    size = float(span_us)
    starts = pc.unique(pc.multiply(pc.floor(pc.divide(micros, size)), size))
    span_starts = sorted(int(s) for s in starts.to_pylist() if s is not None)
    counts = pc.value_counts(rows.column("event_id"))
    ids, times = counts.field("values"), counts.field("counts")
    return Batch(rows, ids, ids.filter(pc.greater(times, 1)), span_starts)


def decide(batch: Batch, existing_uris: Sequence[str]) -> pa.Table:
    """The ``DECISIONS`` of a batch: for each repeated event id its first delivery, and for
    each event id silver already holds (in the files ``existing_uris``) none.

    Raises:
        EosError: two valid bronze rows hold one event at one delivery position (bronze broke
            exactly-once: which one came first cannot be told).
    """
    held = _held(existing_uris, batch.ids)
    kept = DECISIONS.empty_table().drop_columns([_LISTED])
    if len(batch.repeated):
        rows = batch.rows
        dup = rows.filter(pc.is_in(rows.column("event_id"), value_set=batch.repeated))
        dup = dup.select(["event_id", *FIRST_DELIVERY]).rename_columns(kept.schema.names)
        dup = dup.cast(kept.schema).sort_by([(c, "ascending") for c in kept.schema.names])
        _refuse_repeated_position(dup)
        kept = dup.filter(_run_starts(dup.column("event_id")))
        if len(held):
            kept = kept.filter(pc.invert(pc.is_in(kept.column("event_id"), value_set=held)))
    dropped = pa.table(
        {"event_id": held, **{k: pa.nulls(len(held), kept.schema.field(k).type) for k in _KEEP}}
    )
    decided = pa.concat_tables([kept, dropped.cast(kept.schema)])
    return decided.append_column(_LISTED, pa.array([True] * decided.num_rows, pa.bool_()))


def first_deliveries(spark: SparkSession, valid: DataFrame, decided: pa.Table) -> DataFrame:
    """The rows of ``valid`` (valid bronze rows with ``bronze_version``) that silver inserts:
    every row whose event id needs no decision, and the delivery kept of those that do."""
    if decided.num_rows == 0:
        return valid
    listed = spark.createDataFrame(decided)
    if decided.num_rows <= BROADCAST_MAX_ROWS:
        listed = F.broadcast(listed)  # larger lists (a replayed backlog): Spark plans the join
    keep = F.col(_LISTED).isNull()
    same = [F.col(c) == F.col(k) for c, k in zip(FIRST_DELIVERY, _KEEP, strict=True)]
    keep = keep | (same[0] & same[1] & same[2] & same[3])
    return valid.join(listed, "event_id", "left").where(keep).drop(*_KEEP, _LISTED)


def _array(column: pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)


def _run_starts(sorted_ids: pa.ChunkedArray) -> pa.Array:
    """True at the first row of each run of equal values of a sorted column."""
    column = _array(sorted_ids)
    if len(column) == 0:
        return pa.array([], pa.bool_())
    differs = pc.not_equal(column.slice(1), column.slice(0, len(column) - 1))
    return pa.concat_arrays([pa.array([True]), differs])


def _refuse_repeated_position(dup: pa.Table) -> None:
    """Raise when two rows of ``dup`` (sorted) hold one event at one delivery position."""
    if dup.num_rows < 2:
        return
    same = pa.array([True] * (dup.num_rows - 1))
    for name in dup.schema.names:
        column = _array(dup.column(name))
        same = pc.and_(same, pc.equal(column.slice(1), column.slice(0, len(column) - 1)))
    hits = pc.indices_nonzero(same)
    if len(hits):
        found = dup.slice(hits[0].as_py(), 1).to_pylist()[0]
        version, topic, partition, offset = (found[k] for k in _KEEP)
        raise EosError(
            f"bronze version {version} holds the record at {topic} partition {partition} "
            f"offset {offset} twice: bronze/raw_events "
            "broke exactly-once; delete it and the derived tables to rebuild from Kafka"
        )


def _held(uris: Sequence[str], ids: pa.Array) -> pa.Array:
    """The ``ids`` (distinct) that the silver files ``uris`` hold."""
    chunks = []
    for uri in uris:
        fs, path = pafs.FileSystem.from_uri(delta_io.as_uri(uri))
        chunks.extend(pq.read_table(path, filesystem=fs, columns=["event_id"])["event_id"].chunks)
    stored = pa.chunked_array(chunks, pa.string()).combine_chunks()
    # One hash set, of the smaller side.
    if len(stored) < len(ids):
        return ids.filter(pc.is_in(ids, value_set=stored))
    return pc.unique(stored.filter(pc.is_in(stored, value_set=ids)))
