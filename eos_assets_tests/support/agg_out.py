"""What the outbound publisher wrote to Kafka, read back and scored in the tests."""

import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

# What identifies one revision of one window of the orders stream.
STATE = ("window_start", "event_type", "currency", "revision", "is_final")


def state(record: dict[str, Any]) -> tuple:
    """The (window, revision, is_final) a record carries, comparable with ``history``."""
    values = {k: record[k] for k in STATE}
    values["window_start"] = datetime.fromisoformat(values["window_start"])
    return tuple(values[k] for k in STATE)


def published(read_committed: Callable, topic: str) -> list[dict[str, Any]]:
    """Every record of ``topic`` a read_committed consumer sees, value parsed, with offsets."""
    return [
        {**json.loads(v), "_partition": p, "_offset": o} for p, o, _, v in read_committed(topic)
    ]


def score(records: list[dict[str, Any]], want: dict[tuple, int]) -> tuple[int, int, int]:
    """(published twice, skipped, invented) against the table's history."""
    counts = Counter(state(r) for r in records)
    doubled = sum(n - 1 for n in counts.values() if n > 1)
    skipped = len(want.keys() - counts.keys())
    invented = len(counts.keys() - want.keys())
    return doubled, skipped, invented


def publish_args(table: str, bootstrap: str, topic: str, max_records: int = 5) -> list[str]:
    args = ["publish", "--table", table, "--bootstrap", bootstrap, "--topic", topic]
    return [*args, "--max-records", str(max_records)]
