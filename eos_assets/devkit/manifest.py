"""The producer's manifest: one JSON line per record sent, plus a summary of the run.

Tests and audits compute the truth from it (what was committed where, which event ids,
which defects) independently of the pipeline that reads the topic.
"""

import json
from binascii import b2a_base64
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from json.encoder import encode_basestring_ascii
from operator import attrgetter, itemgetter
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
        transactions_sent_again: attempts aborted after a broker failure and sent again
            (not in ``transactions_aborted``, which counts the planned aborts).
        seconds: the whole run, from checking the broker to the summary.
        sending_seconds: from the producer's first transaction to the summary: its connection
            and ``init_transactions`` are not in it, as in kafka-producer-perf-test's rate.
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
    transactions_sent_again: int = 0
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    committed_malformed: dict[str, int] = field(default_factory=dict)
    committed_by_partition: dict[int, int] = field(default_factory=dict)
    transactional_id: str = ""
    seconds: float = 0.0
    sending_seconds: float = 0.0
    events_per_second: float = 0.0


class ManifestWriter:
    """Writes each finished transaction's lines and tallies them into a ``ProduceSummary``."""

    def __init__(self, path: Path, summary: ProduceSummary) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.summary = summary
        self._out = path.open("w")
        self._tails: dict[tuple[str | None, str, str | None], str] = {}

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
        # formatted directly: no dict and no encoder pass per record. The fields after the event
        # id take a few values in a stream: their text is made once per run.
        head = f'{{"status": "{status}", "topic": {_text(summary.topic)}, "partition": '
        txn = f', "transactional_id": {_text(transactional_id)}, "txn": {plan.index}, "key": '
        text, tails, b64, quoted = encode_basestring_ascii, self._tails, b2a_base64, _QUOTED
        records, step = plan.records, _LINES_PER_WRITE
        # Written a part at a time: the text of a whole transaction's lines (11 MB at 20,000
        # records) was allocated, copied and freed again for every transaction.
        for at in range(0, len(records), step):
            part = zip(records[at : at + step], offsets[at : at + step], strict=True)
            lines = [
                f'{head}{partition}, "offset": {offset}{txn}{text(key)}, "value_b64": '
                f"{'null' if value is None else quoted(b64(value, newline=False).decode())}, "
                f'"event_id": {"null" if event_id is None else text(event_id)}, '
                f"{tails.get((event_type, kind, bad)) or self._tail(event_type, kind, bad)}"
                for (key, value, kind, event_id, event_type, bad), (partition, offset) in part
            ]
            self._out.write("".join(lines))
        _tally(by_kind, map(attrgetter("kind"), plan.records))
        if not plan.abort:
            _tally(summary.committed_by_partition, map(itemgetter(0), offsets))
            codes = [str(r.malformed) for r in plan.records if r.malformed is not None]
            _tally(summary.committed_malformed, codes)
        if plan.abort:
            summary.aborted += len(plan.records)
            summary.transactions_aborted += 1
        else:
            summary.committed += len(plan.records)
            summary.transactions_committed += 1
        summary.records = summary.committed + summary.aborted
        # On disk before the next transaction begins: a producer killed later keeps its record.
        self._out.flush()

    def _tail(self, event_type: str | None, kind: str, malformed: str | None) -> str:
        """The end of a line from ``event_type`` on, kept for the next line that has it."""
        tail = (
            f'"event_type": {_text(event_type)}, "kind": {_text(kind)}, '
            f'"malformed": {_text(None if malformed is None else str(malformed))}}}\n'
        )
        self._tails[event_type, kind, malformed] = tail
        return tail

    def finish(self, seconds: float, sending_seconds: float) -> ProduceSummary:
        """Close the manifest and write the summary next to it; return the summary."""
        self._out.close()
        self.summary.seconds = seconds
        self.summary.sending_seconds = sending_seconds
        self.summary.events_per_second = self.summary.records / seconds if seconds > 0 else 0.0
        summary_path(self.path).write_text(json.dumps(asdict(self.summary), indent=2) + "\n")
        return self.summary


def _tally(counts: dict[Any, int], items: Iterable[Any]) -> None:
    """Add one to ``counts[item]`` for each item, new items last in order of appearance."""
    for item, n in Counter(items).items():
        counts[item] = counts.get(item, 0) + n


_LINES_PER_WRITE = 1000  # manifest lines per write
_QUOTED = '"{}"'.format  # a JSON string of text that needs no escapes (base64)


def _text(value: str | None) -> str:
    """``value`` as JSON (``json.dumps`` of a str or None)."""
    return "null" if value is None else encode_basestring_ascii(value)


def summary_path(manifest_path: Path) -> Path:
    """Return where the summary of manifest ``x.jsonl`` lives: ``x.summary.json``."""
    return Path(manifest_path).with_suffix(".summary.json")


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """Read a manifest: one dict per record sent, in the order sent."""
    with Path(path).open() as lines:
        return [json.loads(line) for line in lines if line.strip()]
