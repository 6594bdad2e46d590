"""``silver/events``: one row per ``event_id`` among valid bronze records, insert-if-absent.

The first delivery of an event wins: across bronze versions the earliest ingested
(``bronze_version``), within one the lowest ``(topic, partition, offset)``. Ordering by
``(bronze_version, topic, partition, offset)`` makes the result independent of how many bronze
versions one run consumes. Rows are inserted, never updated; malformed records (``error`` set)
stay in bronze.

**Insert-if-absent without scanning the table.** The table is partitioned by ``event_date``
(UTC date of ``event_time``), and each run writes one file per date and ``FILE_SPAN`` of event
time, so file statistics on ``event_time`` stay tight. The batch's event ids are looked up only
in the files whose partition and ``event_time`` range can hold an event time present in the
batch (``first_deliveries`` decides, on the driver, which delivery of each event to insert).
This rests on one assumption, documented here and checked by the producer's contract: a
duplicate of an event carries the same payload, hence the same ``event_time`` (a producer that
retries at the application level re-sends the same bytes). Work per run therefore grows with the
batch and the event-time spans it touches, not with the table.

Crash points (``faults.crash_point``): ``AFTER_FILES`` (files written, not committed: orphans
no reader sees) and ``AFTER_COMMIT``. Either way a re-run finishes the job exactly once.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from eos_assets.lib import faults
from eos_assets.lib.contract.schema import bronze_schema
from eos_assets.lib.contract.stream_shape import Contract
from eos_assets.lib.delta import delta_io, file_writer, txn_ids
from eos_assets.lib.derived import first_deliveries, incremental, increments
from eos_assets.lib.derived.incremental import Outcome

UPSTREAM = "bronze/raw_events"
APP = txn_ids.FROM_BRONZE
PARTITION_BY = ("event_date",)
FILE_SPAN = timedelta(minutes=15)
_SPAN_MICROS = int(FILE_SPAN.total_seconds() * 1_000_000)

AFTER_FILES = "silver_events_after_files"
AFTER_COMMIT = "silver_events_after_commit"
CRASH_POINTS = (AFTER_FILES, AFTER_COMMIT)

_FROM_BRONZE = ("schema_version", "topic", "partition", "offset", "kafka_timestamp")


def events_schema(contract: Contract) -> pa.Schema:
    """The columns of ``silver/events``: id, time, the payload fields in declared order (typed
    as in bronze), then where the event came from."""
    bronze = bronze_schema(contract)
    names = ("event_id", "event_time", *contract.names, *_FROM_BRONZE)
    return pa.schema(
        [
            *[bronze.field(n) for n in names],
            ("bronze_version", pa.int64()),
            ("event_date", pa.date32()),
        ]
    )


def stored_schema(events: DeltaTable) -> pa.Schema:
    """The columns in the data files of a ``silver/events`` snapshot: its stream's
    ``events_schema`` but the partition column, read from the table itself."""
    return delta_io.data_schema(pa.schema(events.schema().to_arrow()), PARTITION_BY)  # type: ignore[arg-type]


@dataclass
class EventsOutcome(Outcome):
    """What one run of silver/events did, besides what every derived table reports.

    Attributes:
        bronze_rows: the bronze rows of the increment; ``malformed`` of them stayed in bronze.
        duplicates_in_batch: valid rows repeating an event id of the same increment.
        duplicates_existing: first deliveries of the increment whose event id silver held.
        inserted: rows inserted, into ``files_written`` files of the event ``dates`` listed.
        existing_files_read: silver files read for the anti-join, ``existing_rows_read`` rows.
    """

    bronze_rows: int = 0
    malformed: int = 0
    duplicates_in_batch: int = 0
    duplicates_existing: int = 0
    inserted: int = 0
    dates: list[str] = field(default_factory=list)
    existing_files_read: int = 0
    existing_rows_read: int = 0
    files_written: int = 0


def update_events(
    spark: SparkSession,
    contract: Contract,
    bronze_uri: str,
    silver_uri: str,
    storage_options: dict[str, str] | None = None,
) -> EventsOutcome:
    """Insert the first delivery of every new valid bronze event into silver/events.

    Raises:
        EosError: bronze was rewritten or its log is gone, or the commit kept losing races.
    """
    schema = events_schema(contract)
    delta_io.ensure_table(silver_uri, schema, storage_options, partition_by=PARTITION_BY)
    table = incremental.Derived("silver/events", silver_uri, bronze_uri, APP, storage_options)
    return incremental.run(table, EventsOutcome, lambda a, o: _step(spark, contract, a, o))


def _step(
    spark: SparkSession,
    contract: Contract,
    attempt: incremental.Attempt,
    outcome: EventsOutcome,
) -> None:
    schema = events_schema(contract)
    increment = attempt.increment
    # Which delivery of each event to insert is decided from narrow columns read with Arrow on
    # the driver (``first_deliveries``): Spark then runs one query, a broadcast join and the
    # write, whose grouping into files is the only shuffle.
    batch = first_deliveries.read_batch(increment.files, _SPAN_MICROS)
    outcome.bronze_rows = increment.records
    outcome.malformed = increment.records - batch.rows.num_rows
    outcome.duplicates_in_batch = batch.rows.num_rows - len(batch.ids)
    predicate = existing_files_predicate(batch.spans)
    existing_files = delta_io.data_files(attempt.target, predicate) if predicate else []
    outcome.existing_files_read = len(existing_files)
    outcome.existing_rows_read = sum(f.records for f in existing_files)
    decided = first_deliveries.decide(batch, [f.uri for f in existing_files])
    bronze = increments.read_files(
        spark,
        increment.files,
        delta_io.spark_schema(bronze_schema(contract)),
        "bronze_version",
        increments.PLAN_STABLE_VERSION,  # stored as the schema's long by the file writer
    )
    names = [n for n in schema.names if n != "event_date"]
    valid = bronze.where(F.col("error").isNull()).select(*names)
    new = first_deliveries.first_deliveries(spark, valid, decided).withColumn(
        "event_date", F.to_date("event_time")
    )
    outcome.seconds["plan_read"] = time.monotonic() - attempt.started
    began = time.monotonic()
    actions = file_writer.write_files(
        new.withColumn("_span", _span(F.col("event_time"))),
        attempt.table.uri,
        schema,
        partition_by="event_date",
        split_by="_span",
        sort_by="event_time",
        one_task=increment.fits_one_task,
    )
    outcome.files_written = len(actions)
    outcome.inserted = sum(_stat_records(a.stats) for a in actions)
    outcome.duplicates_existing = len(batch.ids) - outcome.inserted
    outcome.dates = sorted({str(a.partition_values["event_date"]) for a in actions})
    outcome.seconds["write"] = time.monotonic() - began
    faults.crash_point(AFTER_FILES)
    metadata = attempt.metadata("silver_events", **{"eos.inserted": outcome.inserted})
    delta_io.commit_files(
        attempt.target,
        actions,
        schema,
        attempt.txns,
        metadata,
        partition_by=PARTITION_BY,
        text_values=True,
    )
    faults.crash_point(AFTER_COMMIT)


def _span(column: Column) -> Column:
    """The start of the ``FILE_SPAN`` holding ``column``, in microseconds since the epoch."""
    return F.floor(F.unix_micros(column) / _SPAN_MICROS) * _SPAN_MICROS


def existing_files_predicate(spans: list[datetime]) -> str | None:
    """A file-pruning predicate for the silver files that may hold events of these spans."""
    return time_ranges_predicate(merge_ranges([(s, s + FILE_SPAN) for s in spans]))


def merge_ranges(ranges: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Sorted half-open ranges with touching or overlapping ones merged."""
    merged: list[tuple[datetime, datetime]] = []
    for low, high in sorted(ranges):
        if merged and merged[-1][1] >= low:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def time_ranges_predicate(ranges: list[tuple[datetime, datetime]]) -> str | None:
    """A file-pruning predicate on silver/events for event times in half-open ``ranges``.

    Each range also names its dates, so that partition pruning applies before statistics.
    """
    clauses = []
    for low, high in ranges:
        low, high = low.astimezone(UTC), high.astimezone(UTC)
        clauses.append(
            f"(event_date IN ({', '.join(_days(low, high))}) AND "
            f"event_time >= '{low.isoformat()}' AND event_time < '{high.isoformat()}')"
        )
    return " OR ".join(clauses) or None


def _days(low: datetime, high: datetime) -> list[str]:
    day, last = low.date(), (high - timedelta(microseconds=1)).date()
    days = []
    while day <= last:
        days.append(f"'{day.isoformat()}'")
        day += timedelta(days=1)
    return days


def _stat_records(stats: str) -> int:
    return int(json.loads(stats)["numRecords"])
