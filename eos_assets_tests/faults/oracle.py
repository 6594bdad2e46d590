"""The truth a fault test compares bronze with, computed from the producers' manifests only.

Bronze is read straight from the Delta log with deltalake and pyarrow, not through the
pipeline's helpers: the judge must not share code with the accused.
"""

import base64
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable

# (topic, partition, offset, value) of one record.
Key = tuple[str, int, int, bytes | None]


@dataclass(frozen=True)
class Verdict:
    """Bronze against the manifests: every count but ``expected`` and ``found`` must be 0."""

    expected: int
    found: int
    lost: int
    doubled: int
    aborted: int
    foreign: int

    @property
    def exact(self) -> bool:
        """Every committed record exactly once, no aborted record, nothing else."""
        return self.found == self.expected and not (
            self.lost or self.doubled or self.aborted or self.foreign
        )

    def __str__(self) -> str:
        return (
            f"lost={self.lost} doubled={self.doubled} aborted_in_bronze={self.aborted} "
            f"foreign={self.foreign} (committed {self.expected}, bronze rows {self.found})"
        )


def manifest_keys(lines: Iterable[Mapping[str, Any]]) -> tuple[Counter[Key], set[Key]]:
    """Committed records (a multiset) and aborted records of manifest lines."""
    committed: Counter[Key] = Counter()
    aborted: set[Key] = set()
    for line in lines:
        raw = line["value_b64"]
        key = (
            line["topic"],
            line["partition"],
            line["offset"],
            None if raw is None else base64.b64decode(raw),
        )
        if line["status"] == "committed":
            committed[key] += 1
        else:
            aborted.add(key)
    return committed, aborted


def bronze_keys(uri: str) -> Counter[Key]:
    """Every row of the table's latest snapshot as (topic, partition, offset, value)."""
    files = DeltaTable(uri).file_uris()
    if not files:
        return Counter()
    fs = pafs.FileSystem.from_uri(files[0])[0]  # local, or the lake's object store
    paths = [pafs.FileSystem.from_uri(f)[1] for f in files]
    t = pq.read_table(paths, filesystem=fs, columns=["topic", "partition", "offset", "value"])
    return Counter(
        zip(
            t["topic"].to_pylist(),
            t["partition"].to_pylist(),
            t["offset"].to_pylist(),
            t["value"].to_pylist(),
            strict=True,
        )
    )


def judge(uri: str, lines: Iterable[Mapping[str, Any]]) -> Verdict:
    """Compare the table at ``uri`` with the records the manifest ``lines`` say were sent."""
    committed, aborted = manifest_keys(lines)
    rows = bronze_keys(uri)
    return Verdict(
        expected=sum(committed.values()),
        found=sum(rows.values()),
        lost=sum(max(0, n - rows[k]) for k, n in committed.items()),
        doubled=sum(max(0, rows[k] - n) for k, n in committed.items()),
        aborted=sum(rows[k] for k in aborted),
        foreign=sum(n for k, n in rows.items() if k not in committed and k not in aborted),
    )


def ingest_ranges(uri: str) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The ranges of every ingest commit (``eos.ranges``), per partition, in commit order."""
    history = sorted(DeltaTable(uri).history(), key=lambda h: h["version"])
    ranges: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for entry in history:
        if entry.get("eos.operation") == "ingest":
            for r in entry["eos.ranges"]:
                ranges.setdefault((r["topic"], r["partition"]), []).append(r)
    return ranges


def overlaps(uri: str) -> list[str]:
    """Why the committed ranges do not tile each partition; empty when they do.

    Per partition, each commit's range must start where the previous one ended (no offset
    committed twice, none skipped), and the last end must be the partition's ``txn`` version.
    """
    dt = DeltaTable(uri)
    problems = []
    for (topic, partition), ranges in sorted(ingest_ranges(uri).items()):
        for a, b in itertools.pairwise(ranges):
            if b["start"] != a["end"]:
                problems.append(
                    f"{topic}[{partition}]: [{a['start']}, {a['end']}) then "
                    f"[{b['start']}, {b['end']})"
                )
        position = dt.transaction_version(f"eos:{topic}:{partition}")
        if position != ranges[-1]["end"]:
            problems.append(f"{topic}[{partition}]: txn {position} != last end {ranges[-1]['end']}")
    return problems
