"""Freshness of ``bronze/raw_events``: how old is the oldest committed record it still lacks.

Freshness is judged on the data that is late, not on when the table last changed: a quiet
topic leaves bronze fresh however long ago the last ingest ran, and a busy topic whose ingest
stopped makes it stale within ``max_age_s``. The age comes from Kafka (``lib.lag``); the time
of the last ingest commit is reported next to it.
"""

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from deltalake import DeltaTable

from eos_assets.lib.delta import txn_ids
from eos_assets.lib.kafka.lag import PartitionLag, measure_lag
from eos_assets.lib.kafka.starts import EARLIEST


@dataclass
class FreshnessReport:
    """Lag and age of every partition against ``max_age_s``."""

    lags: list[PartitionLag]
    now: float
    max_age_s: float
    last_ingest_ms: int | None

    def ages(self) -> dict[str, float | None]:
        """Age in seconds of each partition's oldest pending record (None: unknown)."""
        return {lg.key: lg.age_s(self.now) for lg in self.lags}

    @property
    def ok(self) -> bool:
        """True when every age is known and at most ``max_age_s``."""
        return all(a is not None and a <= self.max_age_s for a in self.ages().values())

    def summary(self) -> str:
        """One line: the stalest partition against the limit."""
        ages = self.ages()
        unknown = sorted(k for k, a in ages.items() if a is None)
        known = {k: a for k, a in ages.items() if a is not None}
        lag = sum(lg.lag for lg in self.lags)
        if unknown:
            return (
                f"age unknown for {', '.join(unknown[:5])}: Kafka did not answer the age read; "
                f"total lag {lag} offsets"
            )
        if lag == 0:
            return "bronze is caught up: no committed record waits in Kafka"
        key, age = max(known.items(), key=lambda kv: kv[1], default=("-", 0.0))
        verdict = "within" if self.ok else "over"
        return (
            f"oldest record not yet in bronze is {age:.0f}s old ({key}), {verdict} the "
            f"{self.max_age_s:.0f}s limit (EOS_FRESHNESS_MAX_AGE_S); total lag {lag} offsets"
        )

    def metadata(self) -> dict[str, object]:
        """Ages, lags, the limit and the last ingest time."""
        ages = self.ages()
        known = [a for a in ages.values() if a is not None]
        return {
            "max_age_s": round(max(known, default=0.0), 3),
            "limit_s": self.max_age_s,
            "lag_total": sum(lg.lag for lg in self.lags),
            "age_s_by_partition": {k: None if a is None else round(a, 3) for k, a in ages.items()},
            "lag_by_partition": {lg.key: lg.lag for lg in self.lags},
            "seconds_since_last_ingest": None
            if self.last_ingest_ms is None
            else round(self.now - self.last_ingest_ms / 1000, 3),
        }


def last_ingest_ms(dt: DeltaTable, limit: int = 100) -> int | None:
    """Commit time (ms) of the latest ingest commit among the last ``limit`` versions."""
    for entry in dt.history(limit):
        if entry.get(txn_ids.OPERATION) == txn_ids.INGEST:
            return int(entry.get("timestamp") or 0)
    return None


def bronze_freshness(
    client_config: Mapping[str, str],
    topics: Sequence[str],
    table_uri: str,
    dt: DeltaTable,
    max_age_s: float,
    storage_options: Mapping[str, str] | None = None,
    start: str = EARLIEST,
) -> FreshnessReport:
    """Measure the freshness of the bronze table ``dt`` at ``table_uri``.

    ``start`` is the stream's declared start: a partition never read is pending from there.

    Raises:
        BrokerError: the broker does not answer or a topic does not exist.
    """
    lags = measure_lag(
        client_config, topics, table_uri, storage_options, with_age=True, start=start
    )
    return FreshnessReport(lags, time.time(), max_age_s, last_ingest_ms(dt))
