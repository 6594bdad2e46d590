"""Bronze-shaped Delta tables whose ingest commits a test writes by hand with delta-rs: the rows,
the ``eos.*`` commit metadata and the ``txn`` positions an ingest would commit, without Kafka or
Spark, so the checks that read them can be given exactly the case under test."""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

ROWS = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("error", pa.string()),
    ]
)


@dataclass(frozen=True)
class Read:
    """What one ingest read of one partition: ``[start, end)``, the rows it wrote (``offsets``,
    those in ``malformed`` with an error) and the record count its commit claims."""

    topic: str
    partition: int
    start: int
    end: int
    offsets: Sequence[int]
    malformed: Sequence[int] = ()
    records: int | None = None

    def span(self) -> dict[str, object]:
        """The ``eos.ranges`` entry of this read."""
        records = len(self.offsets) if self.records is None else self.records
        return {
            "topic": self.topic,
            "partition": self.partition,
            "start": self.start,
            "end": self.end,
            "records": records,
            "malformed": len(self.malformed),
            "gaps": self.end - self.start - records,
        }


def read(
    topic: str,
    partition: int,
    start: int,
    end: int,
    offsets: Iterable[int] | None = None,
    malformed: Iterable[int] = (),
    records: int | None = None,
) -> Read:
    """A read of ``[start, end)`` holding ``offsets`` (default: every offset of it)."""
    held = tuple(range(start, end) if offsets is None else offsets)
    return Read(topic, partition, start, end, held, tuple(malformed), records)


def offsets_span(topic: str, partition: int, start: int, end: int, **extra: str) -> dict:
    """An ``eos.lost`` entry, or with ``declared=...`` an ``eos.skipped`` one."""
    return {"topic": topic, "partition": partition, "start": start, "end": end, **extra}


def rows(topic: str, partition: int, offsets: Iterable[int], error: str | None = None) -> pa.Table:
    """Bronze rows of one partition at ``offsets``."""
    held = list(offsets)
    return pa.table(
        {
            "topic": [topic] * len(held),
            "partition": [partition] * len(held),
            "offset": held,
            "error": [error] * len(held),
        },
        schema=ROWS,
    )


def ingest(
    uri: str,
    *reads: Read,
    lost: Sequence[Mapping] = (),
    skipped: Sequence[Mapping] = (),
    positions: Mapping[tuple[str, int], int] | None = None,
) -> int:
    """Commit ``reads`` as one ingest would (rows, ``eos.*`` metadata, one ``txn`` per
    partition at its furthest end unless ``positions`` says otherwise); return the version."""
    pieces = [
        rows(r.topic, r.partition, [o for o in r.offsets if o not in r.malformed]) for r in reads
    ]
    pieces += [rows(r.topic, r.partition, r.malformed, "invalid_json: broken") for r in reads]
    ends: dict[tuple[str, int], int] = {}
    for item in [*(r.span() for r in reads), *lost, *skipped]:
        tp = (str(item["topic"]), int(item["partition"]))
        ends[tp] = max(ends.get(tp, 0), int(item["end"]))
    ends.update(positions or {})
    metadata: dict = {"eos.operation": "ingest", "eos.ranges": [r.span() for r in reads]}
    if lost:
        metadata["eos.lost"] = list(lost)
    if skipped:
        metadata["eos.skipped"] = list(skipped)
    props = CommitProperties(
        custom_metadata=metadata,
        app_transactions=[Transaction(f"eos:{t}:{p}", end) for (t, p), end in ends.items()],
    )
    table = pa.concat_tables([ROWS.empty_table(), *pieces])
    write_deltalake(uri, table, mode="append", commit_properties=props)
    return DeltaTable(uri).version()


def append(uri: str, table: pa.Table, metadata: Mapping[str, str] | None = None) -> int:
    """Commit ``table`` with no ingest metadata (a writer that is not the ingest)."""
    props = CommitProperties(custom_metadata=dict(metadata or {}))
    write_deltalake(uri, table, mode="append", commit_properties=props)
    return DeltaTable(uri).version()
