"""Exactly-once ingest of Kafka ranges into the bronze Delta table.

The protocol is described in DESIGN.md, "Positions live with the data".

Plan from the table's ``txn`` record, read the ranges in Spark tasks that each write one
Parquet file, then commit every file plus one ``txn`` action per partition in one Delta commit
from the snapshot the plan read. A conflicting commit makes this run re-plan; a range another
run already committed is never committed again.
"""

import functools
import logging
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from eos_assets.lib import faults
from eos_assets.lib.contract.schema import SCHEMA_ID, bronze_schema
from eos_assets.lib.contract.stream_shape import Contract
from eos_assets.lib.delta import delta_io, txn_ids
from eos_assets.lib.delta.txn_ids import partition_app
from eos_assets.lib.errors import ConfigError, DataLossError, EosError, raised_in
from eos_assets.lib.ingest.ranges import (
    OffsetRange,
    PartitionPlan,
    RangeDict,
    accept_loss,
    loss_summary,
    lost_ranges,
    merged_ends,
    offsets_in,
    plan_ranges,
    skipped_ranges,
    split_for_slots,
    start_offsets,
)
from eos_assets.lib.ingest.reader import WrittenFile, read_range_to_file, reader_config
from eos_assets.lib.kafka.kafka_offsets import commit_advisory, partition_bounds
from eos_assets.lib.kafka.retry import retry_seconds
from eos_assets.lib.kafka.starts import EARLIEST, SKIP_REASON, never_read_starts
from eos_assets.lib.schema_registry import RegistryConfig, SchemaBook, prefetch
from eos_assets.lib.spark import spark_modes

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
# What a read task returns per piece: its WrittenFile as one line of JSON.
_WRITTEN = "file string"
# Below this many offsets in all, a read runs in no more tasks than there are slots. On a warm
# local[2] server, six ranges of 1,500 records read in 0.26-0.41 s in two tasks, 0.38-0.76 s in
# six (8 rounds each, quiet).
SMALL_READ = 60_000
_READ_THREADS = 8  # the most ranges a read in the run's process reads at once


@dataclass(frozen=True)
class IngestOptions:
    """How one ingest run behaves.

    Attributes:
        max_records: cap on offsets read per run, shared across partitions (None: no cap).
        read_timeout_s: a range not read completely within this time fails the run.
        group_id: consumer group that receives the advisory offset commit.
        min_split: ranges are split for idle task slots only down to this many offsets.
        accept_data_loss: go past offsets Kafka deleted before they were read (retention,
            delete-records) and record them as acknowledged loss; by default such a loss stops
            the run before anything is committed.
        start: where a partition the table has never read starts: ``earliest`` (the low
            watermark), ``latest`` (the last stable offset) or an ISO-8601 time with a zone
            (``lib.starts``). The first commit of such a partition records the offsets passed
            over (``eos.skipped``) and pins its position; a partition read before continues
            from its position whatever this says.
        asset: the bronze asset as the user knows it (its key), for the one-line errors.
        read_here_below: a read of fewer offsets than this (its ranges together) runs in this
            process, a thread per range, instead of in Spark tasks: the same reader writes the
            same files. A continuous stream's small batches read so; a Spark job's round trips
            cost them more than the read (0: always in Spark tasks).
    """

    max_records: int | None = None
    read_timeout_s: float = 300.0
    group_id: str = "eos-assets"
    min_split: int = 50_000
    accept_data_loss: bool = False
    start: str = EARLIEST
    asset: str = "the bronze asset"
    read_here_below: int = 0


@dataclass
class IngestOutcome:
    """What one ingest run did; ``version`` is None when nothing was committed."""

    run_id: str
    version: int | None = None
    plans: list[PartitionPlan] = field(default_factory=list)
    files: list[WrittenFile] = field(default_factory=list)
    lost: list[OffsetRange] = field(default_factory=list)
    skipped: list[OffsetRange] = field(default_factory=list)
    attempts: int = 0
    advisory_committed: bool = False
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def records(self) -> int:
        """Records committed by this run."""
        return sum(f.records for f in self.files)

    @property
    def lost_offsets(self) -> int:
        """Offsets Kafka had deleted that this run acknowledged as lost and moved past."""
        return offsets_in(self.lost)

    @property
    def skipped_offsets(self) -> int:
        """Offsets before the declared start of partitions this run read first."""
        return offsets_in(self.skipped)

    @property
    def malformed(self) -> int:
        """Malformed records committed by this run (kept in bronze with ``error`` set)."""
        return sum(f.malformed for f in self.files)

    def ranges(self) -> list["CommittedRange"]:
        """Committed ranges per partition with record and gap counts (markers, aborted)."""
        merged: dict[tuple[str, int], CommittedRange] = {}
        for f in sorted(
            self.files, key=lambda f: (f.range.topic, f.range.partition, f.range.start)
        ):
            r = f.range
            row = merged.setdefault(
                (r.topic, r.partition),
                CommittedRange(**r.as_dict(), records=0, malformed=0, gaps=0),
            )
            row["end"] = r.end
            row["records"] += f.records
            row["malformed"] += f.malformed
        for row in merged.values():
            row["gaps"] = row["end"] - row["start"] - row["records"]
        return list(merged.values())


class CommittedRange(RangeDict):
    """One partition's range as written into the commit metadata (``eos.ranges``)."""

    records: int
    malformed: int
    gaps: int


def ingest_bronze(
    spark: SparkSession,
    table_uri: str,
    topics: Sequence[str],
    client_config: Mapping[str, str],
    options: IngestOptions | None = None,
    storage_options: Mapping[str, str] | None = None,
    *,
    contract: Contract,
    registry: RegistryConfig | None = None,
) -> IngestOutcome:
    """Ingest every committed record of ``topics`` not yet in the table, exactly once.

    A stream whose values a schema registry frames (``contract.registry``) needs ``registry``:
    each run fetches its topics' writer schemas from it before reading (``schema_registry``).

    Each record becomes a bronze row of ``contract`` (``lib.schema``): its declared fields
    parsed, or the reason it is malformed.

    Offsets Kafka deleted before they were read stop the run (``DataLossError``) unless
    ``options.accept_data_loss``: then the commit moves each such partition's position past
    them, even with no record after them, and lists them under ``eos.lost``.

    A partition the table has never read starts where ``options.start`` says; unless that is
    earliest, the commit lists the offsets before it under ``eos.skipped`` and pins the
    position of every such partition, even with nothing to read, so no later run re-decides it.

    Raises:
        DataLossError: Kafka deleted offsets the table had not read yet, found at plan time
            (not accepted) or while reading (always); nothing was committed.
        EosError: the broker, a topic or the lake root is unusable, or the ranges could not be
            committed after repeated conflicts with concurrent writers.
        RegistryError: the schema registry did not answer; nothing was committed.
        ConfigError: a registry stream without ``registry``, or a table written for values of
            the other format.
    """
    if contract.registry and registry is None:
        raise ConfigError(
            f"the stream's values are {contract.format} framed by a schema registry and no "
            "registry is set: set EOS_SCHEMA_REGISTRY_URL, or start the local one with "
            "eos-assets registry up"
        )
    options = options or IngestOptions()
    outcome = IngestOutcome(run_id=uuid.uuid4().hex)
    clock = time.monotonic()
    read_config = reader_config(client_config)
    schema = bronze_schema(contract)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        outcome.attempts = attempt
        began = time.monotonic()
        bounds = partition_bounds(client_config, topics)
        # Kafka first: a wrong broker or topic fails the run before the lake is touched.
        dt = delta_io.ensure_table(table_uri, schema, storage_options)
        if attempt == 1:
            _check_format(dt, contract, table_uri)
        apps = {tp: partition_app(*tp) for tp in bounds}
        seen = delta_io.positions(dt, apps.values())
        positions = {tp: seen[a] for tp, a in apps.items()}
        firsts = never_read_starts(client_config, options.start, bounds, positions)
        plans = start_offsets(positions, bounds, firsts)
        ranges = plan_ranges(plans, options.max_records)
        lost = lost_ranges(plans)
        if lost and not options.accept_data_loss:
            raise DataLossError(_loss_message(lost, options.asset))
        skipped = skipped_ranges(plans)
        # A declared start is decided once: its first commit pins where it stands.
        pins = [r for p in plans if (r := p.first_read)] if options.start != EARLIEST else []
        outcome.plans = plans
        outcome.seconds["plan"] = time.monotonic() - began
        if not ranges and not lost and not pins:
            outcome.seconds["total"] = time.monotonic() - clock
            return outcome

        schemas = prefetch(registry, topics) if registry and contract.registry and ranges else None
        faults.crash_point(faults.AFTER_PLAN)
        began = time.monotonic()
        files = (
            _read(spark, ranges, contract, read_config, table_uri, options, schemas)
            if ranges
            else []
        )
        outcome.seconds["read"] = time.monotonic() - began
        faults.crash_point(faults.AFTER_FILES)

        began = time.monotonic()
        # An acknowledged loss moves the position past it even when no record follows it.
        ends = merged_ends([*lost, *pins, *ranges])
        txns = {apps[tp]: end for tp, end in ends.items()}
        # Skip replays: a range committed meanwhile by another run is never committed again.
        latest = delta_io.positions(delta_io.load(table_uri, storage_options), txns)
        if any(latest[a] != seen[a] for a in txns):
            log.warning("positions moved during run %s; re-planning", outcome.run_id)
            continue
        outcome.files = files
        outcome.lost = lost
        outcome.skipped = skipped
        declared = {"reason": SKIP_REASON, "declared": options.start}
        metadata = {
            txn_ids.OPERATION: txn_ids.INGEST,
            txn_ids.RUN_ID: outcome.run_id,
            txn_ids.RANGES: outcome.ranges(),
            txn_ids.LOST: [r.as_dict() for r in lost],
            txn_ids.SKIPPED: [{**r.as_dict(), **declared} for r in skipped],
        }
        actions = [delta_io.add_action(f.path, f.size, f.stats) for f in files]
        faults.crash_point(faults.BEFORE_COMMIT)
        try:
            delta_io.commit_files(dt, actions, schema, txns, metadata)
        except delta_io.CommitFailedError:
            log.warning("concurrent commit on the same partitions; run %s re-plans", outcome.run_id)
            outcome.files = []
            outcome.lost = []
            outcome.skipped = []
            continue
        outcome.seconds["commit"] = time.monotonic() - began
        faults.crash_point(faults.AFTER_COMMIT)
        outcome.version = delta_io.find_commit(
            table_uri, txn_ids.RUN_ID, outcome.run_id, storage_options
        )

        began = time.monotonic()
        final = [OffsetRange(tp[0], tp[1], 0, end) for tp, end in ends.items()]
        outcome.advisory_committed = commit_advisory(client_config, options.group_id, final)
        outcome.seconds["advise"] = time.monotonic() - began
        outcome.seconds["total"] = time.monotonic() - clock
        return outcome
    raise EosError(
        f"ingest into {table_uri} lost {MAX_ATTEMPTS} commit races with concurrent writers: "
        "let only one ingest run at a time (the eos_ingest pool) and retry"
    )


def _loss_message(lost: Sequence[OffsetRange], asset: str) -> str:
    return (
        f"{loss_summary(lost)}; nothing was committed: to skip them for good and go on, "
        f"{accept_loss(asset)}"
    )


def _check_format(dt: DeltaTable, contract: Contract, table_uri: str) -> None:
    """Refuse a bronze table written for values of the other format: its ``schema_id`` column
    says which (delta-rs would take the other schema's files without a word).

    Raises:
        ConfigError: the table and the declaration disagree.
    """
    has_ids = SCHEMA_ID in {f.name for f in dt.schema().fields}
    if has_ids == contract.registry:
        return
    written = "a registry-framed" if has_ids else "a json"
    raise ConfigError(
        f"{table_uri} was written for {written} stream and the declaration says format "
        f"{contract.format}: ingest into a new lake root or under another stream name, or "
        "declare the format it was written with"
    )


def _read(
    spark: SparkSession,
    ranges: Sequence[OffsetRange],
    contract: Contract,
    config: Mapping[str, str],
    table_uri: str,
    options: IngestOptions,
    schemas: SchemaBook | None = None,
) -> list[WrittenFile]:
    """Read every range in Spark tasks, one piece per task (or here, below
    ``options.read_here_below`` offsets); return the files they wrote."""
    read: dict[str, Any] = {
        "contract": contract,  # a frozen dataclass: it pickles into the tasks as it is
        "schemas": schemas,  # the writer schemas of a registry stream, fetched once a run
        "config": dict(config),
        "table_uri": table_uri,
        "timeout_s": options.read_timeout_s,
        # Read here: a Spark Connect server's workers do not have the run's environment.
        "retry_s": retry_seconds(),
        "driver_pid": os.getpid() if faults.armed(faults.MID_READ) else None,
    }
    if sum(r.size for r in ranges) < options.read_here_below:
        return _read_here(ranges, read)
    try:
        slots = spark_modes.task_slots(spark)
        pieces = split_for_slots(ranges, slots, options.min_split)
        tasks = task_count(pieces, slots)
        with spark_modes.job_description(spark, f"eos ingest: {len(pieces)} ranges"):
            if spark_modes.is_connect(spark):
                return _read_over_connect(spark, pieces, tasks, read)
            # In-process, the RDD of pieces stays: in a new process (every run of the classic
            # mode) its first ingest of 200k records read in 6.7-9.0 s against 14.2-18.2 s with
            # mapInArrow (3 runs each, loaded 2-core machine); warm, both took 1.3-2.1 s.
            task = functools.partial(read_range_to_file, **read)
            return spark.sparkContext.parallelize(pieces, tasks).map(task).collect()
    except (PySparkException, Py4JJavaError) as exc:
        lost = spark_modes.server_lost(spark, exc)
        if lost is not None:
            raise lost from None
        # A task's BrokerError reaches the driver wrapped in pages of Python and Java stack.
        text = str(exc)
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        raise raised_in(text) or EosError(
            f"a Spark task of the ingest failed ({first[:200]}): see the Spark log"
        ) from None


def _read_here(ranges: Sequence[OffsetRange], read: dict[str, Any]) -> list[WrittenFile]:
    """Read every range in this process, a thread per range up to ``_READ_THREADS``
    (librdkafka and Parquet's writer work outside the interpreter's lock): a stream of many
    partitions gets no thread and consumer for each at once. A failure raises as it would in
    a task."""
    threads = min(len(ranges), _READ_THREADS)
    with ThreadPoolExecutor(threads, thread_name_prefix="eos-read") as pool:
        return list(pool.map(lambda r: read_range_to_file(r, **read), ranges))


def task_count(pieces: Sequence[OffsetRange], slots: int) -> int:
    """How many Spark tasks read ``pieces``: one per piece, but no more than the task slots
    when the pieces are small together (below ``SMALL_READ`` offsets), as a continuous
    stream's batches are. A task then reads several pieces one after the other: a task costs
    a round of scheduling and a Python worker's turn, while a small piece reads in
    hundredths of a second."""
    if sum(p.size for p in pieces) < SMALL_READ:
        return max(1, min(len(pieces), slots))
    return max(1, len(pieces))


def _read_over_connect(
    spark: SparkSession, pieces: Sequence[OffsetRange], tasks: int, read: dict[str, Any]
) -> list[WrittenFile]:
    """Spark Connect has no RDDs: a DataFrame of piece numbers in ``tasks`` partitions is
    mapped with ``mapInArrow``. The server's Python workers do not have the run's environment,
    so the fault settings travel with the task."""
    task = functools.partial(
        _read_pieces, pieces=list(pieces), fault_settings=faults.settings(), read=read
    )
    numbers = spark.range(0, len(pieces), 1, tasks)
    rows = numbers.mapInArrow(task, _WRITTEN).collect()
    return [WrittenFile.from_json(row["file"]) for row in rows]


def _read_pieces(
    batches: Iterator[pa.RecordBatch],
    pieces: Sequence[OffsetRange],
    fault_settings: dict[str, str],
    read: dict[str, Any],
) -> Iterator[pa.RecordBatch]:
    """Spark task: read the pieces whose numbers arrive in ``batches``, one file each."""
    faults.adopt(fault_settings)
    for batch in batches:
        for number in batch.column("id").to_pylist():
            written = read_range_to_file(pieces[number], **read)
            yield pa.RecordBatch.from_pydict({"file": [written.to_json()]})
