"""Offset contiguity of ``bronze/raw_events``, proven with DuckDB from the table and its log.

Per topic-partition, the ranges of the ingest commits must tile ``[first start, last end)``
with no hole and no overlap, the last end must be the partition's ``txn`` position, every row's
offset must lie inside a committed range, ``(topic, partition, offset)`` must be unique, and
each range must hold exactly the number of rows its commit recorded. Offsets of a range that
hold no row (transaction markers, aborted records) are normal: they are counted as ``gaps``.

Offsets Kafka deleted before they were read, and that an ingest was told to skip, are recorded
in its commit (``eos.lost``): they tile like a range with no row, and are reported as
acknowledged loss, never as a hole. Offsets a declared start (``latest`` or a time) passed over
when the table first read a partition are recorded the same way (``eos.skipped``): they tile
like a range with no row and are listed as declared skips; a row inside one is outside every
range.

Incrementally (``after``): the rows of a snapshot already proven are not read again. The
ranges still tile as a whole (they come from the log alone), the rows of the files added since
must each lie in a range committed after that snapshot, exactly as many as each such range
recorded, and none may repeat. A range committed before holds exactly its recorded rows (it was
proven), so a new row inside one, or below the first range the log still holds, is reported.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
from deltalake import DeltaTable

from eos_assets.lib.checks.increment import Checked, read_files, since, table_schema
from eos_assets.lib.ingest.commit_log import IngestLog, read_ingest_log

OFFSETS = ["topic", "partition", "offset"]

SAMPLE = 10  # offenders listed by name in a report; counts are always complete


@dataclass
class ContiguityReport:
    """What the contiguity check found; ``ok`` when nothing is wrong."""

    partitions: int = 0
    ranges: int = 0
    rows: int = 0
    gaps: int = 0
    lost_offsets: int = 0
    acknowledged: list[str] = field(default_factory=list)
    skipped_offsets: int = 0
    declared_skips: list[str] = field(default_factory=list)
    rows_before_log: int = 0
    log_complete: bool = True
    holes: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    position_mismatches: list[str] = field(default_factory=list)
    count_mismatches: list[str] = field(default_factory=list)
    outside_count: int = 0
    outside: list[str] = field(default_factory=list)
    duplicate_count: int = 0
    duplicates: list[str] = field(default_factory=list)
    since_version: int | None = None
    checked: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the ranges tile, every row is in one, and no offset is repeated."""
        return not (
            self.holes
            or self.overlaps
            or self.position_mismatches
            or self.count_mismatches
            or self.outside_count
            or self.duplicate_count
        )

    def summary(self) -> str:
        """One line: what is wrong first, or what was proven."""
        if self.ok:
            rows = f"{self.rows} rows"
            if self.since_version is not None:
                rows += f" added since version {self.since_version}, each"
            proven = (
                f"{rows} in {self.ranges} committed ranges over {self.partitions} "
                f"partitions tile without hole or overlap; {self.gaps} offsets are gaps "
                "(transaction markers or aborted records)"
            )
            if self.declared_skips:
                proven += (
                    f"; {self.skipped_offsets} offsets in {len(self.declared_skips)} range(s) "
                    "come before the stream's declared start and were skipped "
                    f"(first: {self.declared_skips[0]})"
                )
            if not self.acknowledged:
                return proven
            return (
                f"{proven}; {self.lost_offsets} offsets in {len(self.acknowledged)} range(s) "
                "were deleted by Kafka before they were ingested and acknowledged as lost "
                f"(first: {self.acknowledged[0]})"
            )
        problems = [
            (None, "hole(s) between committed ranges", self.holes),
            (None, "overlapping range(s)", self.overlaps),
            (None, "position(s) off the last end", self.position_mismatches),
            (None, "range(s) whose row count differs", self.count_mismatches),
            (self.outside_count, "row(s) outside every committed range", self.outside),
            (self.duplicate_count, "duplicated (topic, partition, offset)", self.duplicates),
        ]
        parts = [
            f"{len(items) if n is None else n} {what} (first: {items[0]})"
            for n, what, items in problems
            if items
        ]
        return "; ".join(parts)

    def metadata(self) -> dict[str, object]:
        """Counts and the first offenders, ready for Dagster metadata."""
        return {
            "partitions": self.partitions,
            "ranges": self.ranges,
            "rows": self.rows,
            "gaps": self.gaps,
            "acknowledged_lost_offsets": self.lost_offsets,
            "acknowledged_losses": self.acknowledged,
            "declared_skipped_offsets": self.skipped_offsets,
            "declared_skips": self.declared_skips,
            "log_complete": self.log_complete,
            "rows_before_log": self.rows_before_log,
            "holes": self.holes,
            "overlaps": self.overlaps,
            "position_mismatches": self.position_mismatches,
            "count_mismatches": self.count_mismatches,
            "rows_outside_ranges": self.outside_count,
            "first_rows_outside": self.outside,
            "duplicate_offsets": self.duplicate_count,
            "first_duplicates": self.duplicates,
            "rows_checked_since_version": self.since_version,
            **self.checked,
        }


def contiguity_of(
    dt: DeltaTable, checked: Checked | None, storage_options: Mapping[str, str] | None = None
) -> ContiguityReport:
    """Check snapshot ``dt`` of a bronze table, and record it as proven in the report.

    Only the rows of the files added since ``checked`` are read when no file was removed since
    and the log holds every later commit; otherwise every row.
    """
    log = read_ingest_log(dt)
    schema = table_schema(dt)
    diff = since(dt.table_uri, dt, checked, storage_options)
    if diff is not None and not diff.removed and log.first_version <= diff.base + 1:
        report = check_contiguity(log, read_files(diff.added, schema, OFFSETS), after=diff.base)
    else:
        report = check_contiguity(log, read_files(dt.file_uris(), schema, OFFSETS))
    report.checked = Checked.of(dt).metadata()
    return report


def check_contiguity(
    log: IngestLog, offsets: pa.Table, after: int | None = None
) -> ContiguityReport:
    """Check the committed ranges of ``log`` against the bronze rows ``offsets``.

    Args:
        log: the ingest commits still in the table's log and the ``txn`` positions.
        offsets: the table's ``topic, partition, offset`` columns; with ``after``, those of
            the files added since version ``after`` only.
        after: a version whose snapshot was proven, with no file removed since; the log
            must hold every later commit.
    """
    if after is not None and log.first_version > after + 1:
        raise ValueError(f"the log no longer holds the commits after version {after}")
    con = duckdb.connect()
    try:
        con.register("ranges", log.ranges)
        con.register("lost", log.lost)
        con.register("skipped", log.skipped)
        # What tiles a partition: the ranges read, the ranges acknowledged as lost, and the
        # ranges before a declared start.
        con.execute(
            'CREATE VIEW tiles AS SELECT version, topic, partition, start, "end" FROM ranges '
            'UNION ALL SELECT version, topic, partition, start, "end" FROM lost '
            'UNION ALL SELECT version, topic, partition, start, "end" FROM skipped'
        )
        con.register("bronze_rows", offsets.select(OFFSETS))
        # OFFSET is an SQL keyword: the column is ``off`` in the queries below.
        con.execute(
            'CREATE VIEW bronze AS SELECT topic, partition, "offset" AS off FROM bronze_rows'
        )
        report = ContiguityReport(
            partitions=len(log.partitions()),
            ranges=log.ranges.num_rows,
            rows=offsets.num_rows,
            log_complete=log.complete,
            since_version=after,
        )
        report.gaps = _scalar(con, 'SELECT sum("end" - start - records) FROM ranges')
        report.lost_offsets = _scalar(con, 'SELECT sum("end" - start) FROM lost')
        report.acknowledged = [
            f"{_tp(t, p)} offsets [{s}, {e}) skipped by version {v}"
            for t, p, s, e, v in con.execute(
                'SELECT topic, partition, start, "end", version FROM lost ORDER BY ALL'
            ).fetchall()
        ]
        report.skipped_offsets = _scalar(con, 'SELECT sum("end" - start) FROM skipped')
        report.declared_skips = [
            f"{_tp(t, p)} offsets [{s}, {e}) skipped by version {v} (declared start {d})"
            for t, p, s, e, v, d in con.execute(
                'SELECT topic, partition, start, "end", version, declared FROM skipped ORDER BY ALL'
            ).fetchall()
        ]
        _tiling(con, report)
        _positions(con, log, report)
        _rows(con, log, report, after)
        return report
    finally:
        con.close()


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = con.execute(sql).fetchone()
    return int(row[0] or 0) if row else 0


def _tp(topic: str, partition: int) -> str:
    return f"{topic}[{partition}]"


def _tiling(con: duckdb.DuckDBPyConnection, report: ContiguityReport) -> None:
    # Compared with the furthest end so far, not just the previous range's: a range nested
    # inside an earlier one is an overlap, and must not make the next range look like a hole.
    rows = con.execute(
        """
        SELECT topic, partition, prev_end, start, "end", prev_version, version FROM (
            SELECT *, max("end") OVER w AS prev_end, arg_max(version, "end") OVER w AS prev_version
            FROM tiles WINDOW w AS (
                PARTITION BY topic, partition ORDER BY start, version
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING))
        WHERE prev_end IS NOT NULL AND start <> prev_end
        ORDER BY topic, partition, start
        """
    ).fetchall()
    for topic, partition, prev_end, start, end, prev_version, version in rows:
        if start > prev_end:
            report.holes.append(
                f"{_tp(topic, partition)} offsets [{prev_end}, {start}) between the ranges of "
                f"versions {prev_version} and {version}"
            )
        else:
            report.overlaps.append(
                f"{_tp(topic, partition)} offsets [{start}, {min(prev_end, end)}) committed by "
                f"versions {prev_version} and {version}"
            )


def _positions(con: duckdb.DuckDBPyConnection, log: IngestLog, report: ContiguityReport) -> None:
    ends = con.execute(
        'SELECT topic, partition, max("end") FROM tiles GROUP BY ALL ORDER BY ALL'
    ).fetchall()
    for topic, partition, end in ends:
        position = log.positions.get((topic, partition))
        if position != end:
            report.position_mismatches.append(
                f"{_tp(topic, partition)} txn position {position} but the last range ends at {end}"
            )


def _rows(
    con: duckdb.DuckDBPyConnection, log: IngestLog, report: ContiguityReport, after: int | None
) -> None:
    con.execute(
        """
        CREATE TEMP TABLE placed AS
        SELECT b.topic, b.partition, b.off, r.start, r."end", r.version,
               b.off < first.first_start AS before_log
        FROM bronze b
        ASOF LEFT JOIN ranges r
            ON b.topic = r.topic AND b.partition = r.partition AND b.off >= r.start
        LEFT JOIN (SELECT topic, partition, min(start) AS first_start FROM ranges GROUP BY ALL)
            first ON b.topic = first.topic AND b.partition = first.partition
        """
    )
    inside = 'start IS NOT NULL AND off < "end"'
    outside_where = f"NOT ({inside})"
    if not log.complete and after is None:
        # Ranges older than the retained log are unknown: rows below the first known range
        # cannot be placed, and are counted apart rather than called outside. A row added
        # after a proven snapshot can only belong to a later range, which the log holds.
        report.rows_before_log = _scalar(
            con, f"SELECT count(*) FROM placed WHERE {outside_where} AND before_log"
        )
        outside_where += " AND NOT coalesce(before_log, false)"
    report.outside_count = _scalar(con, f"SELECT count(*) FROM placed WHERE {outside_where}")
    report.outside = _offsets(
        con.execute(
            f"SELECT topic, partition, off FROM placed WHERE {outside_where} "
            f"ORDER BY ALL LIMIT {SAMPLE}"
        ).fetchall()
    )
    # One aggregation over every row; only the duplicated offsets are kept and looked at.
    con.execute(
        "CREATE TEMP TABLE duplicated AS SELECT topic, partition, off, count(*) AS n "
        "FROM bronze GROUP BY ALL HAVING count(*) > 1"
    )
    report.duplicate_count = _scalar(con, "SELECT count(*) FROM duplicated")
    report.duplicates = [
        f"{_tp(t, p)} offset {o} x{n}"
        for t, p, o, n in con.execute(
            f"SELECT topic, partition, off, n FROM duplicated ORDER BY ALL LIMIT {SAMPLE}"
        ).fetchall()
    ]
    # A range of a proven snapshot holds its recorded rows already: the rows read (added
    # since) must bring exactly nothing to it.
    proven = "false" if after is None else f"r.version <= {int(after)}"
    mismatched = con.execute(
        f"""
        SELECT r.topic, r.partition, r.start, r."end", r.version, r.records,
               coalesce(c.n, 0) + CASE WHEN {proven} THEN r.records ELSE 0 END AS held
        FROM ranges r LEFT JOIN (
            SELECT topic, partition, start, version, count(*) AS n FROM placed
            WHERE {inside} GROUP BY ALL) c
        USING (topic, partition, start, version)
        WHERE r.records <> held
        ORDER BY r.topic, r.partition, r.start
        """
    ).fetchall()
    report.count_mismatches = [
        f"{_tp(t, p)} range [{s}, {e}) of version {v} committed {rec} records, holds {n} rows"
        for t, p, s, e, v, rec, n in mismatched
    ]


def _offsets(rows: Sequence[tuple[str, int, int]]) -> list[str]:
    return [f"{_tp(t, p)} offset {o}" for t, p, o in rows]
