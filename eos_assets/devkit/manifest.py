"""The producer's manifest: one JSON line per record sent, plus a summary of the run.

Tests and audits compute the truth from it (what was committed where, which event ids,
which defects) independently of the pipeline that reads the topic.
"""

import base64
import json
from dataclasses import asdict, dataclass, field
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
        for record, (partition, offset) in zip(plan.records, offsets, strict=True):
            line = {
                "status": status,
                "topic": summary.topic,
                "partition": partition,
                "offset": offset,
                "transactional_id": transactional_id,
                "txn": plan.index,
                "key": record.key,
                "value_b64": None
                if record.value is None
                else base64.b64encode(record.value).decode(),
                "event_id": record.event_id,
                "event_type": record.event_type,
                "kind": record.kind,
                "malformed": None if record.malformed is None else str(record.malformed),
            }
            self._out.write(json.dumps(line) + "\n")
            by_kind[record.kind] = by_kind.get(record.kind, 0) + 1
            if not plan.abort:
                parts = summary.committed_by_partition
                parts[partition] = parts.get(partition, 0) + 1
                if line["malformed"] is not None:
                    codes = summary.committed_malformed
                    codes[line["malformed"]] = codes.get(line["malformed"], 0) + 1
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


def summary_path(manifest_path: Path) -> Path:
    """Return where the summary of manifest ``x.jsonl`` lives: ``x.summary.json``."""
    return Path(manifest_path).with_suffix(".summary.json")


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """Read a manifest: one dict per record sent, in the order sent."""
    with Path(path).open() as lines:
        return [json.loads(line) for line in lines if line.strip()]
