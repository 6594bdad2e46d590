"""The producer's manifest: one JSON line per record sent, plus a summary of the run.

Tests and audits compute the truth from it (what was committed where, which event ids,
which defects) independently of the pipeline that reads the topic.
"""

import base64
import json
from dataclasses import asdict, dataclass, field
from json.encoder import encode_basestring_ascii
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from eos_assets.devkit.events import TransactionPlan


@dataclass
class ProduceSummary:
    """Outcome of one producer run.

    Attributes:
        records: records sent, aborted ones included (``committed + aborted``).
        counts: status ("committed" | "aborted") -> kind -> records.
        committed_malformed: malformed code -> committed records.
        committed_by_partition: partition -> committed records.
        transactional_id: the producer's ``transactional.id``.
    """

    topic: str
    partitions: int
    seed: int
    start_time: str
    manifest: str
    records: int = 0
    committed: int = 0
    aborted: int = 0
    transactions_committed: int = 0
    transactions_aborted: int = 0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    committed_malformed: dict[str, int] = field(default_factory=dict)
    committed_by_partition: dict[int, int] = field(default_factory=dict)
    transactional_id: str = ""
    seconds: float = 0.0
    events_per_second: float = 0.0


class ManifestWriter:
    """Writes each finished transaction's lines and tallies them into a ``ProduceSummary``."""

    def __init__(self, path: Path, summary: ProduceSummary) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.summary = summary
        self._out = path.open("w")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._out.close()

    def add(
        self, plan: TransactionPlan, transactional_id: str, offsets: list[tuple[int, int]]
    ) -> None:
        """Record a transaction whose outcome (``plan.abort``) is final."""
        summary = self.summary
        status = "aborted" if plan.abort else "committed"
        by_kind = summary.counts.setdefault(status, {})
        # Each line is the text json.dumps writes for a dict of these fields in this order,
        # formatted directly: no dict and no encoder pass per record.
        head = f'{{"status": "{status}", "topic": {_text(summary.topic)}, "partition": '
        txn = f', "transactional_id": {_text(transactional_id)}, "txn": {plan.index}, "key": '
        lines = []
        for record, (partition, offset) in zip(plan.records, offsets, strict=True):
            value = record.value
            malformed = None if record.malformed is None else str(record.malformed)
            lines.append(
                f'{head}{partition}, "offset": {offset}{txn}{_text(record.key)}, '
                f'"value_b64": {"null" if value is None else _quoted_b64(value)}, '
                f'"event_id": {_text(record.event_id)}, '
                f'"event_type": {_text(record.event_type)}, "kind": {_text(record.kind)}, '
                f'"malformed": {_text(malformed)}}}\n'
            )
            by_kind[record.kind] = by_kind.get(record.kind, 0) + 1
            if not plan.abort:
                parts = summary.committed_by_partition
                parts[partition] = parts.get(partition, 0) + 1
                if malformed is not None:
                    codes = summary.committed_malformed
                    codes[malformed] = codes.get(malformed, 0) + 1
        self._out.write("".join(lines))
        if plan.abort:
            summary.aborted += len(plan.records)
            summary.transactions_aborted += 1
        else:
            summary.committed += len(plan.records)
            summary.transactions_committed += 1
        summary.records = summary.committed + summary.aborted
        # On disk before the next transaction begins: a producer killed later keeps its record.
        self._out.flush()

    def finish(self, seconds: float) -> ProduceSummary:
        """Close the manifest and write the summary next to it; return the summary."""
        self._out.close()
        self.summary.seconds = seconds
        self.summary.events_per_second = self.summary.records / seconds if seconds > 0 else 0.0
        summary_path(self.path).write_text(json.dumps(asdict(self.summary), indent=2) + "\n")
        return self.summary


def _text(value: str | None) -> str:
    """``value`` as JSON (``json.dumps`` of a str or None)."""
    return "null" if value is None else encode_basestring_ascii(value)


def _quoted_b64(value: bytes) -> str:
    return f'"{base64.b64encode(value).decode()}"'


def summary_path(manifest_path: Path) -> Path:
    """Return where the summary of manifest ``x.jsonl`` lives: ``x.summary.json``."""
    return Path(manifest_path).with_suffix(".summary.json")


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """Read a manifest: one dict per record sent, in the order sent."""
    with Path(path).open() as lines:
        return [json.loads(line) for line in lines if line.strip()]
