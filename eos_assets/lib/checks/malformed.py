"""Malformed-record rate of ``bronze/raw_events``: the whole table and the latest ingest.

Malformed records stay in bronze with the reason in ``error`` (``"<code>: <detail>"``); a
rising share of them means a producer broke the event contract, so the rate is watched both
over the whole table (DuckDB over the ``error`` column) and over the latest ingest commit
alone (its ``eos.ranges`` metadata), where a fresh breakage shows before it is diluted.
"""

from dataclasses import dataclass, field

import duckdb
import pyarrow as pa

from eos_assets.lib.ingest.commit_log import IngestLog


@dataclass
class MalformedReport:
    """Malformed counts and rates; a rate is None when there is nothing to divide."""

    rows: int
    malformed: int
    latest_version: int | None
    latest_records: int
    latest_malformed: int
    max_rate: float
    by_code: dict[str, int] = field(default_factory=dict)
    by_partition: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        """Malformed share of the whole table."""
        return self.malformed / self.rows if self.rows else None

    @property
    def latest_rate(self) -> float | None:
        """Malformed share of the latest ingest commit."""
        return self.latest_malformed / self.latest_records if self.latest_records else None

    @property
    def ok(self) -> bool:
        """True when neither rate is above ``max_rate``."""
        return all(r is None or r <= self.max_rate for r in (self.rate, self.latest_rate))

    def summary(self) -> str:
        """One line with both rates against the threshold and the most common reason."""

        def pct(r: float | None) -> str:
            return "n/a" if r is None else f"{r:.2%}"

        top = max(self.by_code.items(), key=lambda kv: kv[1], default=None)
        reason = f"; most common: {top[0]} ({top[1]})" if top else ""
        verdict = "within" if self.ok else "above"
        return (
            f"malformed {pct(self.rate)} of {self.rows} rows, {pct(self.latest_rate)} of the "
            f"latest ingest (version {self.latest_version}): {verdict} the "
            f"{self.max_rate:.2%} threshold (EOS_MALFORMED_MAX_RATE){reason}"
        )

    def metadata(self) -> dict[str, object]:
        """Counts, rates and the breakdowns, ready for Dagster metadata."""
        return {
            "rows": self.rows,
            "malformed": self.malformed,
            "rate": self.rate if self.rate is not None else 0.0,
            "latest_version": self.latest_version,
            "latest_records": self.latest_records,
            "latest_malformed": self.latest_malformed,
            "latest_rate": self.latest_rate if self.latest_rate is not None else 0.0,
            "max_rate": self.max_rate,
            "by_code": self.by_code,
            "rate_by_partition": self.by_partition,
        }


def malformed_rate(log: IngestLog, errors: pa.Table, max_rate: float) -> MalformedReport:
    """Measure the malformed share of bronze.

    Args:
        log: the ingest commits of the table (for the latest ingest's own counts).
        errors: the table's ``topic, partition, error`` columns.
        max_rate: the threshold the report is judged against.
    """
    con = duckdb.connect()
    try:
        con.register("bronze", errors.select(["topic", "partition", "error"]))
        con.register("ranges", log.ranges)
        total = con.execute("SELECT count(*), count(error) FROM bronze").fetchone() or (0, 0)
        latest = con.execute(
            "SELECT max(version), coalesce(sum(records), 0), coalesce(sum(malformed), 0) "
            "FROM ranges WHERE version = (SELECT max(version) FROM ranges)"
        ).fetchone() or (None, 0, 0)
        by_code = con.execute(
            "SELECT split_part(error, ':', 1) AS code, count(*) FROM bronze "
            "WHERE error IS NOT NULL GROUP BY code ORDER BY 2 DESC, 1"
        ).fetchall()
        by_partition = con.execute(
            "SELECT topic || '[' || partition || ']', count(error) / count(*) FROM bronze "
            "GROUP BY topic, partition ORDER BY topic, partition"
        ).fetchall()
    finally:
        con.close()
    return MalformedReport(
        rows=int(total[0]),
        malformed=int(total[1]),
        latest_version=None if latest[0] is None else int(latest[0]),
        latest_records=int(latest[1]),
        latest_malformed=int(latest[2]),
        max_rate=max_rate,
        by_code={str(c): int(n) for c, n in by_code},
        by_partition={str(k): round(float(v), 6) for k, v in by_partition},
    )
