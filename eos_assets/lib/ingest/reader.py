"""Read one offset range inside a Spark task and write it as one Parquet file of the table.

Runs on executors: plain Python, picklable inputs and outputs, no Spark or Dagster objects.
Nothing here commits; the driver commits every file of a run in one Delta transaction, so a
task that fails or is killed leaves at most an orphan file that no reader ever sees.
"""

import bisect
import contextlib
import gc
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from eos_assets.lib import store_errors
from eos_assets.lib.contract.schema import to_bronze_table
from eos_assets.lib.contract.stream_shape import BOOLEAN, STRING, Contract
from eos_assets.lib.delta.delta_stats import file_stats
from eos_assets.lib.errors import BrokerError, DataLossError
from eos_assets.lib.faults import MID_READ, crash_point
from eos_assets.lib.ingest.ranges import OffsetRange
from eos_assets.lib.kafka.kafka_admin import not_authorized
from eos_assets.lib.kafka.kafka_offsets import leader_of
from eos_assets.lib.kafka.retry import RETRY_ENV, retry_seconds, transient
from eos_assets.lib.schema_registry import SchemaBook

# What every range reader needs; librdkafka's own fetch limits (fetch.max.bytes,
# queued.max.messages.kbytes) bound what one fetch and its prefetch queue hold.
_READER_DEFAULTS = {
    "group.id": "eos-assets-reader",
    "enable.auto.commit": "false",
    "enable.partition.eof": "true",
    "isolation.level": "read_committed",
    "auto.offset.reset": "error",
}
# How long one consume call waits for its batch to fill. librdkafka's consume returns when the
# batch is full or this time is up, so a range's last batch (never full) costs this wait, and so
# does every moment the prefetch queue runs short. 0.1 s made a 1,500-record range take 0.115 s
# (0.02 s at 0.01) and 300,000 records in six ranges 2.1 s (1.55 s at 0.01), one broker here.
CONSUME_WAIT_S = 0.01
# Bronze files: dictionary pages only for the columns with few distinct values, and Parquet
# statistics only where a reader can prune with them. Dictionary attempts on ids and raw
# values, and min/max of long strings, cost about a fifth of the write and bought nothing.
_DICTIONARY = ["topic", "partition", "schema_version", "error"]
_STATISTICS = ["topic", "partition", "offset", "kafka_timestamp", "event_time", *_DICTIONARY[2:]]
# A free string payload field (no declared values) gets a dictionary when its first rows hold
# few distinct values (a country, a status), not when they look like ids.
_SAMPLE_ROWS, _FEW_DISTINCT = 1024, 64


@dataclass(frozen=True)
class WrittenFile:
    """One Parquet file written for one range, ready to be added to the table."""

    range: OffsetRange
    path: str
    size: int
    stats: str
    records: int
    malformed: int
    first_offset: int | None
    last_offset: int | None
    read_seconds: float

    def to_json(self) -> str:
        """One line of JSON, how a Spark task hands the file back to the driver."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "WrittenFile":
        """The file ``to_json`` described."""
        fields: dict[str, Any] = json.loads(text)
        return cls(**{**fields, "range": OffsetRange(**fields["range"])})


def reader_config(client_config: Mapping[str, str]) -> dict[str, str]:
    """Consumer properties for range readers: the user's client config plus what EOS needs."""
    return {**client_config, **_READER_DEFAULTS}


def fetch_range(
    r: OffsetRange,
    contract: Contract,
    config: Mapping[str, str],
    timeout_s: float,
    driver_pid: int | None = None,
    retry_s: float | None = None,
    schemas: SchemaBook | None = None,
) -> pa.Table:
    """Consume ``[r.start, r.end)`` with read_committed and return it as bronze rows of
    ``contract`` (with ``schemas``, the writer schemas of a registry-framed stream).

    The range is complete when a record at ``end - 1`` arrives, when the consumer's position
    passes ``end`` (it moves past commit and abort markers), or at a partition EOF at or past
    ``end``. Offsets inside the range may be missing (markers, aborted records): that is normal.

    A broker that dies meanwhile costs a wait, not the read: librdkafka fetches from the new
    leader by itself, and its transient errors are skipped for up to ``retry_s`` seconds
    without progress (``EOS_KAFKA_RETRY_SECONDS``).

    Raises:
        BrokerError: the range could not be read completely before ``timeout_s``, a transient
            error lasted ``retry_s`` without progress, or a permanent error (authorization).
        DataLossError: Kafka deleted offsets of the range before they were read (the reader
            never resets to another offset: ``auto.offset.reset=error``).
    """
    offsets: list[int] = []
    stamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    consumer = Consumer(dict(config))
    deadline = time.monotonic() + timeout_s
    patience = retry_seconds() if retry_s is None else retry_s
    progress_at, trouble = time.monotonic(), None
    half = max(1, r.size // 2)
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
        done = r.start >= r.end
        while not done:
            try:
                batch, done, passing = _records(consumer.consume(10_000, CONSUME_WAIT_S), r, config)
            except _OffsetsDeleted as gone:
                raise DataLossError(_deleted_while_reading(consumer, r, gone.offset)) from None
            if batch:
                progress_at, trouble = time.monotonic(), None
            trouble = passing or trouble
            if trouble is not None and time.monotonic() - progress_at > patience:
                raise BrokerError(
                    f"reading {r.topic}[{r.partition}] made no progress for {patience:.0f}s "
                    f"({trouble.str()}; {leader_of(consumer, r.topic, r.partition)}): check the "
                    f"brokers, {RETRY_ENV} sets how long a step retries"
                )
            # The hot path of the ingest: one pass per field over a batch, no per-record branch.
            before = len(offsets)
            offsets += cast("list[int]", [m.offset() for m in batch])  # data records have one
            stamps += [m.timestamp()[1] for m in batch]
            keys += [m.key() for m in batch]
            values += [m.value() for m in batch]
            if before < half <= len(offsets):
                crash_point(MID_READ, driver_pid)
            if not done:
                position = consumer.position([TopicPartition(r.topic, r.partition)])[0].offset
                done = position >= r.end
            if not done and time.monotonic() > deadline:
                raise BrokerError(
                    f"reading {r.topic}[{r.partition}] offsets [{r.start}, {r.end}) did not "
                    f"finish in {timeout_s:.0f}s (got {len(offsets)} records): check the broker "
                    "or raise read_timeout_s"
                )
    finally:
        consumer.close()
    return to_bronze_table(contract, r.topic, r.partition, offsets, stamps, keys, values, schemas)


class _OffsetsDeleted(Exception):
    """The fetch position ``offset`` is below the partition's low watermark now."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


def _deleted_while_reading(consumer: Consumer, r: OffsetRange, offset: int) -> str:
    where = f"{r.topic}[{r.partition}]"
    try:
        low, _ = consumer.get_watermark_offsets(
            TopicPartition(r.topic, r.partition), timeout=5, cached=False
        )
        lost = f"offsets [{offset}, {low})"
    except KafkaException:
        lost = f"offsets from {offset} on"
    return (
        f"Kafka deleted {where} {lost} while this run was reading [{r.start}, {r.end}) "
        "(retention or delete-records); nothing was committed: materialize bronze/raw_events "
        "again to see the whole loss, and accept it with run config accept_data_loss: true"
    )


def _records(
    batch: list[Message], r: OffsetRange, config: Mapping[str, str]
) -> tuple[list[Message], bool, KafkaError | None]:
    """The data records of one consumed batch that fall inside ``r``, whether ``r`` is done,
    and the transient error the batch held, if any.

    A batch holds records of the one assigned partition in offset order, and possibly events
    (partition EOF, errors): an EOF at or past the end completes the range, a transient error
    (a broker gone, a leadership moving: librdkafka recovers by itself) is passed back, any
    other error raises. Records at or past the end are dropped; one at ``end - 1`` completes
    the range.

    Raises:
        BrokerError: the batch holds an error that is neither partition EOF nor transient.
        _OffsetsDeleted: the fetch position is out of range: Kafka deleted it.
    """
    done = False
    passing: KafkaError | None = None
    if any([m.error() is not None for m in batch]):
        for m in batch:
            err = m.error()
            if err is None:
                continue
            if err.code() == KafkaError._AUTO_OFFSET_RESET:
                raise _OffsetsDeleted(m.offset() or 0)
            if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                continue  # the client looks its group up; a reader never commits to it
            if err.code() != KafkaError._PARTITION_EOF and transient(err):
                passing = err
                continue
            if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                raise BrokerError(not_authorized(config, r.topic, "READ"))
            if err.code() != KafkaError._PARTITION_EOF:
                raise BrokerError(f"reading {r.topic}[{r.partition}] failed: {err.str()}")
            done = done or (m.offset() or 0) >= r.end
        batch = [m for m in batch if m.error() is None]
    if batch and (batch[-1].offset() or 0) >= r.end - 1:
        done = True
        if (batch[-1].offset() or 0) >= r.end:
            cut = bisect.bisect_left([m.offset() or 0 for m in batch], r.end)
            batch = batch[:cut]
    return batch, done, passing


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a range is read.

    Every consumed batch allocates thousands of message objects, and each 700 allocations
    start a collection pass over them; none of them is part of a cycle. Pausing it cut the
    consume loop by about a tenth (2.34-2.42 to 2.09-2.19 us per record, one process).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_range_to_file(
    r: OffsetRange,
    contract: Contract,
    config: Mapping[str, str],
    table_uri: str,
    timeout_s: float,
    driver_pid: int | None = None,
    retry_s: float | None = None,
    schemas: SchemaBook | None = None,
) -> WrittenFile:
    """Read one range of a stream of ``contract`` and write it as one Parquet file inside the
    table folder (not committed)."""
    began = time.monotonic()
    with _cyclic_gc_paused():
        table = fetch_range(r, contract, config, timeout_s, driver_pid, retry_s, schemas)
    name = f"part-{r.partition:05d}-{r.start}-{uuid.uuid4().hex}.snappy.parquet"
    dictionary, statistics = parquet_encodings(contract, table)
    with store_errors.task_errors(table_uri):
        fs, root = pafs.FileSystem.from_uri(table_uri)
        target = f"{root.rstrip('/')}/{name}"
        pq.write_table(
            table,
            target,
            filesystem=fs,
            compression="snappy",
            # Both take a list of columns (pyarrow's documentation); its stubs say only bool.
            use_dictionary=dictionary,  # pyright: ignore[reportArgumentType]
            write_statistics=statistics,  # pyright: ignore[reportArgumentType]
        )
        size = fs.get_file_info(target).size or 0
    error = table.column("error")
    offsets = table.column("offset")
    return WrittenFile(
        range=r,
        path=name,
        size=size,
        stats=file_stats(table),
        records=table.num_rows,
        malformed=table.num_rows - error.null_count if table.num_rows else 0,
        first_offset=offsets[0].as_py() if table.num_rows else None,
        last_offset=offsets[-1].as_py() if table.num_rows else None,
        read_seconds=time.monotonic() - began,
    )


def parquet_encodings(contract: Contract, table: pa.Table) -> tuple[list[str], list[str]]:
    """The columns of a bronze file written with dictionary pages, and with statistics.

    Payload fields: a string with declared values or a boolean gets both; a free string both
    when its first rows hold few distinct values; a long, double or timestamp statistics only.
    """
    dictionary, statistics = list(_DICTIONARY), list(_STATISTICS)
    for f in contract.fields:
        few = f.type == BOOLEAN or (f.type == STRING and f.values is not None)
        if f.type == STRING and not few:
            sample = table.column(f.name).slice(0, _SAMPLE_ROWS)
            distinct = pc.count_distinct(sample)  # pyright: ignore[reportAttributeAccessIssue]
            few = distinct.as_py() <= _FEW_DISTINCT
        if few:
            dictionary.append(f.name)
        if few or f.type != STRING:
            statistics.append(f.name)
    return dictionary, statistics
