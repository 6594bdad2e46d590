"""Audit ``bronze/raw_events`` against the retained Kafka log, independently of the ingest.

For every partition, re-read the log with ``read_committed`` from its low watermark up to the
table's position and compare, offset by offset, with the rows of bronze: a committed record
with no row is **missing**, a row with no committed record (or a second row for one offset) is
**invented**, a row whose key or value differs from the record is **altered**. Reading from the
low watermark, not from a stored position, is what also catches records an ingest never saw
(a broker bug that hides records from a reader that starts mid-partition, for one).

The read stops at a time budget; what was not read is reported as not audited and the audit is
then *partial*, never a pass. Rows below the low watermark (deleted by retention) cannot be
checked and are counted apart.

Offsets Kafka deleted before the ingest read them can be compared with nothing. Those an ingest
was told to skip (``eos.lost`` in its commit) are reported as acknowledged loss, with how many
offsets; a table position below the low watermark is a loss nobody acknowledged yet, and the
audit fails on it. Offsets a declared start passed over when the table first read a partition
(``eos.skipped``) were never meant to be in bronze: they are not read, counted as skipped, and
a row of bronze among them is invented.
"""

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition

from eos_assets.lib.delta import delta_io
from eos_assets.lib.ingest.commit_log import read_ingest_log
from eos_assets.lib.ingest.reader import reader_config
from eos_assets.lib.kafka.kafka_admin import quiet_logger
from eos_assets.lib.kafka.kafka_offsets import partition_bounds
from eos_assets.lib.kafka.lag import table_positions

SAMPLE = 10

_quiet = quiet_logger(__name__)

Digests = dict[int, int]  # offset -> hash of (key, value)


@dataclass
class PartitionAudit:
    """The audit of one topic-partition over offsets ``[low, audited_to)``."""

    topic: str
    partition: int
    low: int
    position: int | None
    audited_to: int
    kafka_records: int = 0
    bronze_rows: int = 0
    missing: list[int] = field(default_factory=list)
    invented: list[int] = field(default_factory=list)
    altered: list[int] = field(default_factory=list)
    below_low: int = 0
    acknowledged: list[tuple[int, int]] = field(default_factory=list)
    skipped: list[tuple[int, int]] = field(default_factory=list)

    @property
    def unacknowledged(self) -> tuple[int, int] | None:
        """Offsets ``[position, low)`` deleted by Kafka before the ingest read them, if any."""
        if self.position is None or self.position >= self.low:
            return None
        return (self.position, self.low)

    @property
    def lost_offsets(self) -> int:
        """Offsets acknowledged as lost by an ingest (deleted by Kafka before they were read)."""
        return sum(end - start for start, end in self.acknowledged)

    @property
    def skipped_offsets(self) -> int:
        """Offsets before the stream's declared start, skipped when the table first read it."""
        return sum(end - start for start, end in self.skipped)

    @property
    def name(self) -> str:
        """``topic[partition]``."""
        return f"{self.topic}[{self.partition}]"

    @property
    def complete(self) -> bool:
        """True when everything bronze claims to hold (up to its position) was compared."""
        return self.audited_to >= (self.position or self.low)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready summary with the first offenders as offset spans."""
        return {
            "partition": self.name,
            "audited": [self.low, self.audited_to],
            "position": self.position,
            "complete": self.complete,
            "kafka_records": self.kafka_records,
            "bronze_rows": self.bronze_rows,
            "missing": len(self.missing),
            "invented": len(self.invented),
            "altered": len(self.altered),
            "below_low_watermark": self.below_low,
            "acknowledged_lost_offsets": self.lost_offsets,
            "acknowledged_lost": [f"[{s}, {e})" for s, e in self.acknowledged[:SAMPLE]],
            "skipped_offsets": self.skipped_offsets,
            "skipped": [f"[{s}, {e})" for s, e in self.skipped[:SAMPLE]],
            "unacknowledged_lost": _half_open(self.unacknowledged),
            "first_missing": spans(self.missing),
            "first_invented": spans(self.invented),
            "first_altered": spans(self.altered),
        }


@dataclass
class AuditReport:
    """The audit of every partition; ``ok`` only when complete and nothing differs."""

    partitions: list[PartitionAudit]
    seconds: float
    budget_s: float

    def _count(self, attr: str) -> int:
        return sum(len(getattr(p, attr)) for p in self.partitions)

    @property
    def complete(self) -> bool:
        """True when every partition was compared up to the table's position."""
        return all(p.complete for p in self.partitions)

    @property
    def unacknowledged(self) -> int:
        """Offsets deleted by Kafka before the ingest read them, not acknowledged yet."""
        gone = [p.unacknowledged for p in self.partitions]
        return sum(end - start for start, end in filter(None, gone))

    @property
    def lost_offsets(self) -> int:
        """Offsets acknowledged as lost, all partitions."""
        return sum(p.lost_offsets for p in self.partitions)

    @property
    def skipped_offsets(self) -> int:
        """Offsets before the declared start, all partitions."""
        return sum(p.skipped_offsets for p in self.partitions)

    @property
    def discrepancies(self) -> int:
        """Missing, invented and altered records and unacknowledged lost offsets."""
        found = self._count("missing") + self._count("invented") + self._count("altered")
        return found + self.unacknowledged

    @property
    def ok(self) -> bool:
        """True when the audit is complete and found no discrepancy."""
        return self.complete and not self.discrepancies

    def _first(self, attr: str) -> PartitionAudit | None:
        """The first partition whose ``attr`` holds something."""
        return next((p for p in self.partitions if getattr(p, attr)), None)

    def summary(self) -> str:
        """One line: the discrepancies with their first offsets, or how far the audit got."""
        parts = []
        for attr, what in (("missing", "lost"), ("invented", "invented"), ("altered", "altered")):
            if first := self._first(attr):
                offsets = ", ".join(spans(getattr(first, attr))[:3])
                parts.append(
                    f"{self._count(attr)} record(s) {what} in bronze {_first_at(first, offsets)}"
                )
        if gone := self._first("unacknowledged"):
            parts.append(
                f"{self.unacknowledged} offset(s) deleted by Kafka before they were ingested, "
                f"not acknowledged {_first_at(gone, _half_open(gone.unacknowledged))}: the next "
                "ingest stops there until run with accept_data_loss: true"
            )
        unread = [p for p in self.partitions if not p.complete]
        if unread:
            parts.append(
                f"audit partial: {len(unread)} of {len(self.partitions)} partitions not read to "
                f"the end within the {self.budget_s:.0f}s budget (EOS_AUDIT_BUDGET_S), first "
                f"{unread[0].name} up to offset {unread[0].audited_to} of {unread[0].position}"
            )
        notes = []
        if acked := self._first("acknowledged"):
            notes.append(
                f"{self.lost_offsets} offset(s) Kafka deleted before they were ingested were "
                f"acknowledged as lost {_first_at(acked, _half_open(acked.acknowledged[0]))}"
            )
        if skipped := self._first("skipped"):
            notes.append(
                f"{self.skipped_offsets} offset(s) before the stream's declared start were "
                f"skipped {_first_at(skipped, _half_open(skipped.skipped[0]))}"
            )
        note = "; ".join(notes)
        if parts:
            return "; ".join([*parts, note] if note else parts)
        records = sum(p.kafka_records for p in self.partitions)
        matched = (
            f"bronze matches the retained Kafka log: {records} committed records in "
            f"{len(self.partitions)} partitions, none lost, invented or altered"
        )
        return f"{matched}; {note}" if note else matched

    def metadata(self) -> dict[str, object]:
        """Totals and the per-partition results."""
        return {
            "complete": self.complete,
            "missing": self._count("missing"),
            "invented": self._count("invented"),
            "altered": self._count("altered"),
            "acknowledged_lost_offsets": self.lost_offsets,
            "unacknowledged_lost_offsets": self.unacknowledged,
            "skipped_offsets": self.skipped_offsets,
            "kafka_records": sum(p.kafka_records for p in self.partitions),
            "bronze_rows": sum(p.bronze_rows for p in self.partitions),
            "seconds": round(self.seconds, 3),
            "budget_s": self.budget_s,
            "partitions": [p.as_dict() for p in self.partitions],
        }


def spans(offsets: Iterable[int], limit: int = SAMPLE) -> list[str]:
    """Sorted offsets as at most ``limit`` spans: ``[3, 4, 5, 9]`` -> ``["3-5", "9"]``."""
    out: list[str] = []
    run: list[int] = []
    for o in sorted(offsets):
        if run and o == run[-1] + 1:
            run.append(o)
            continue
        if run:
            out.append(_span(run))
            if len(out) == limit:
                return out
        run = [o]
    if run and len(out) < limit:
        out.append(_span(run))
    return out


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def _half_open(span: tuple[int, int] | None) -> str | None:
    return None if span is None else f"[{span[0]}, {span[1]})"


def _first_at(partition: PartitionAudit, offsets: str | None) -> str:
    """``(first: orders[0] offsets [3, 5))``: where a finding first shows."""
    return f"(first: {partition.name} offsets {offsets})"


Spans = dict[tuple[str, int], list[tuple[int, int]]]


def _logged_skips(table_uri: str, storage_options: Mapping[str, str] | None) -> tuple[Spans, Spans]:
    """Per partition, the ranges its ingests acknowledged as lost (``eos.lost``) and those a
    declared start passed over (``eos.skipped``), lowest first."""
    if not delta_io.exists(table_uri, storage_options):
        return {}, {}
    log = read_ingest_log(delta_io.load(table_uri, storage_options))
    return _spans(log.lost), _spans(log.skipped)


def _spans(table: pa.Table) -> Spans:
    out: Spans = {}
    for row in table.sort_by([("start", "ascending")]).to_pylist():
        out.setdefault((row["topic"], row["partition"]), []).append((row["start"], row["end"]))
    return out


def _read_from(low: int, skipped: Sequence[tuple[int, int]]) -> int:
    """Where reading a partition starts: its low watermark, or past a skip that covers it."""
    for start, end in skipped:
        if start <= low < end:
            low = end
    return low


def audit_bronze(
    client_config: Mapping[str, str],
    topics: Sequence[str],
    table_uri: str,
    bronze: pa.Table,
    budget_s: float,
    storage_options: Mapping[str, str] | None = None,
) -> AuditReport:
    """Compare bronze with the retained log of every partition of ``topics``.

    Args:
        client_config: librdkafka properties (bootstrap servers, security).
        topics: the topics to audit.
        table_uri: the bronze table (for its ``txn`` positions).
        bronze: the table's ``topic, partition, offset, key, value`` columns.
        budget_s: seconds after which reading stops and the audit is reported partial.
        storage_options: delta-rs storage options.

    Raises:
        BrokerError: the broker does not answer or a topic does not exist.
    """
    began = time.monotonic()
    bounds = partition_bounds(client_config, topics)
    positions = table_positions(table_uri, list(bounds), storage_options)
    acknowledged, skipped = _logged_skips(table_uri, storage_options)
    rows = _bronze_digests(bronze)
    # Offsets before a declared start are not read: nothing of them belongs in bronze.
    targets: dict[tuple[str, int], tuple[int, int]] = {}
    for tp, (low, _) in bounds.items():
        end = max(positions[tp] or low, low)
        targets[tp] = (min(_read_from(low, skipped.get(tp, [])), end), end)
    logged, read_to = _read_log(client_config, targets, began + budget_s)
    audits = []
    for tp in sorted(bounds):
        low = bounds[tp][0]
        first, target = targets[tp]
        done = min(read_to.get(tp, first), target)
        audit = _compare(tp, low, positions[tp], done, logged.get(tp, {}), rows.get(tp))
        audit.acknowledged = acknowledged.get(tp, [])
        audit.skipped = skipped.get(tp, [])
        audits.append(audit)
    return AuditReport(audits, time.monotonic() - began, budget_s)


def _bronze_digests(bronze: pa.Table) -> dict[tuple[str, int], tuple[Digests, list[int]]]:
    """Per partition: offset -> digest, and the offsets seen more than once."""
    out: dict[tuple[str, int], tuple[Digests, list[int]]] = {}
    columns = [bronze[c].to_pylist() for c in ("topic", "partition", "offset", "key", "value")]
    for topic, partition, offset, key, value in zip(*columns, strict=True):
        digests, repeated = out.setdefault((topic, partition), ({}, []))
        if offset in digests:
            repeated.append(offset)
        digests[offset] = hash((key, value))
    return out


def _read_log(
    client_config: Mapping[str, str],
    targets: Mapping[tuple[str, int], tuple[int, int]],
    deadline: float,
) -> tuple[dict[tuple[str, int], Digests], dict[tuple[str, int], int]]:
    """Read ``[low, target)`` of each partition; return the records and how far each got."""
    logged: dict[tuple[str, int], Digests] = {tp: {} for tp in targets}
    read_to = {tp: low for tp, (low, _) in targets.items()}
    pending = {tp for tp, (low, target) in targets.items() if target > low}
    if not pending:
        return logged, read_to
    consumer = Consumer(
        {**reader_config(client_config), "group.id": "eos-assets-audit", "logger": _quiet}
    )
    try:
        consumer.assign([TopicPartition(t, p, targets[(t, p)][0]) for t, p in sorted(pending)])
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.2):
                tp = (msg.topic() or "", msg.partition() or 0)
                if tp not in pending:
                    continue
                target = targets[tp][1]
                err = msg.error()
                offset = msg.offset() or 0
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        continue
                    read_to[tp] = max(read_to[tp], offset)
                elif offset < target:
                    logged[tp][offset] = hash((msg.key(), msg.value()))
                    read_to[tp] = max(read_to[tp], offset + 1)
                else:
                    read_to[tp] = target
                if read_to[tp] >= target:
                    pending.discard(tp)
            for tp in list(pending):
                (position,) = consumer.position([TopicPartition(*tp)])
                if position.offset >= 0:
                    read_to[tp] = max(read_to[tp], position.offset)
                if read_to[tp] >= targets[tp][1]:
                    pending.discard(tp)
    finally:
        consumer.close()
    return logged, read_to


def _compare(
    tp: tuple[str, int],
    low: int,
    position: int | None,
    audited_to: int,
    logged: Digests,
    bronze: tuple[Digests, list[int]] | None,
) -> PartitionAudit:
    digests, repeated = bronze or ({}, [])
    audit = PartitionAudit(tp[0], tp[1], low, position, audited_to)
    end = position if position is not None else low
    in_window = {o: d for o, d in digests.items() if low <= o < audited_to}
    audit.kafka_records = len(logged)
    audit.bronze_rows = len(in_window)
    audit.below_low = sum(1 for o in digests if o < low)
    audit.missing = sorted(o for o in logged if o not in in_window)
    invented = [o for o in in_window if o not in logged]
    invented += [o for o in digests if o >= end]  # rows past the table's own position
    invented += [o for o in repeated if o >= low]
    audit.invented = sorted(invented)
    audit.altered = sorted(o for o, d in in_window.items() if o in logged and logged[o] != d)
    return audit
