"""Checks of the derived tables with DuckDB: unique event ids, windows and KPIs reconciled.

- ``silver/events`` holds each ``event_id`` once (and never a null one).
- The final windows of ``gold/window_aggregates`` (end at or before the table's watermark)
  have exactly the totals that the silver rows of the same window give, silver read at the
  version the windows consumed (its ``txn`` record), so an unconsumed silver change is no
  false alarm.
- Every KPI table served from DuckDB equals, key by key, its Delta table at the version DuckDB
  says it mirrored.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from eos_assets.lib.contract.stream_shape import COUNT, COUNT_DISTINCT, SUM, Measure, WindowShape
from eos_assets.lib.delta import delta_io
from eos_assets.lib.serving.serving import quoted

SAMPLE = 10
TOLERANCE = 1e-6  # relative, for float sums computed in another order


@dataclass
class Report:
    """A check outcome: ``problems`` (first ones) and ``counts`` for metadata."""

    ok_text: str = ""
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    counts: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing differs."""
        return self.problem_count == 0

    def summary(self) -> str:
        """One line: the first problems, or what was proven."""
        if self.ok:
            return self.ok_text
        return f"{self.problem_count} problem(s): " + "; ".join(self.problems[:3])

    def metadata(self) -> dict[str, object]:
        """Counts and the first problems."""
        return {**self.counts, "problems": self.problem_count, "first_problems": self.problems}


def read_version(
    uri: str,
    version: int | None = None,
    columns: Sequence[str] | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> pa.Table:
    """The table at ``version`` (latest when None) as Arrow (``delta_io.read_arrow``)."""
    return delta_io.read_arrow(uri, storage_options, columns, version)


def unique_event_ids(silver: pa.Table) -> Report:
    """``event_id`` is never null and appears once in ``silver``.

    ``silver`` needs the ``event_id`` column; with ``topic``, ``partition`` and ``offset``
    too, each duplicated id in the sample also names where its copies came from. The ids'
    64-bit hashes are counted first: equal ids hash alike, so as many distinct hashes as ids
    proves them distinct. Only otherwise are the ids themselves aggregated, and only the
    duplicated ones kept and looked at again.
    """
    con = duckdb.connect()
    try:
        con.register("silver", silver)
        rows, nulls, hashes = con.execute(
            "SELECT count(*), count(*) - count(event_id), "
            "count(DISTINCT hash(event_id)) FILTER (WHERE event_id IS NOT NULL) FROM silver"
        ).fetchone() or (0, 0, 0)
        unique = "WHERE false" if hashes == rows - nulls else "WHERE event_id IS NOT NULL"
        con.execute(
            "CREATE TEMP TABLE dup AS SELECT event_id, count(*) AS n FROM silver "
            f"{unique} GROUP BY event_id HAVING count(*) > 1"
        )
        duplicated, extra = con.execute(
            "SELECT count(*), coalesce(sum(n - 1), 0) FROM dup"
        ).fetchone() or (0, 0)
        places = 'list(topic || \'[\' || "partition" || \']@\' || "offset" ORDER BY "offset")[1:3]'
        located = {"topic", "partition", "offset"} <= set(silver.column_names)
        dupes = (
            con.execute(
                f"SELECT event_id, any_value(d.n), {places if located else '[]'} FROM silver "
                f"JOIN (SELECT * FROM dup ORDER BY event_id LIMIT {SAMPLE}) d USING (event_id) "
                "GROUP BY event_id ORDER BY event_id"
            ).fetchall()
            if duplicated
            else []
        )
    finally:
        con.close()
    distinct = int(rows) - int(nulls) - int(extra)
    report = Report(ok_text=f"{rows} rows, {distinct} distinct event_ids: each exactly once")
    report.problems = [
        f"event_id {e} x{n}" + (f" ({', '.join(at)})" if at else "") for e, n, at in dupes
    ]
    if nulls:
        report.problems.insert(0, f"{nulls} row(s) without event_id")
    report.problem_count = int(duplicated) + (1 if nulls else 0)
    report.counts = {
        "rows": int(rows),
        "distinct_event_ids": distinct,
        "null_event_ids": int(nulls),
        "duplicated_event_ids": int(duplicated),
    }
    return report


def new_event_ids_unique(added: pa.Table, proven: pa.Table, since_version: int) -> Report:
    """The ``event_id`` of the rows ``added`` since a snapshot proven unique (``proven``, its
    ids) are never null, appear once among themselves and never among the proven ones.

    A problem is only counted here; ``unique_event_ids`` over the whole table names it.
    """
    con = duckdb.connect()
    try:
        con.register("added", added.select(["event_id"]))
        con.register("proven", proven.select(["event_id"]))
        # The proven ids are only probed against the added ones: no hash table of them all.
        rows, nulls, repeated = con.execute(
            "SELECT count(*), count(*) - count(event_id), count(event_id) - count(DISTINCT "
            "event_id) FROM added"
        ).fetchone() or (0, 0, 0)
        taken = con.execute(
            "SELECT count(*) FROM proven WHERE event_id IN "
            "(SELECT event_id FROM added WHERE event_id IS NOT NULL)"
        ).fetchone() or (0,)
    finally:
        con.close()
    report = Report(
        ok_text=(
            f"{rows} rows added since version {since_version}: each event_id once, and none "
            f"among the {proven.num_rows} rows proven then"
        )
    )
    report.problem_count = int(bool(nulls)) + int(repeated) + int(taken[0])
    report.counts = {
        "rows": int(rows) + proven.num_rows,
        "rows_checked_since_version": since_version,
        "rows_added": int(rows),
        "null_event_ids": int(nulls),
        "duplicated_event_ids": int(repeated) + int(taken[0]),
    }
    return report


def silver_columns(shape: WindowShape) -> list[str]:
    """The silver/events columns ``reconcile_windows`` reads for windows of ``shape``."""
    fields = [*shape.dimensions, *(m.of for m in shape.measures if m.of is not None)]
    return ["event_time", *dict.fromkeys(fields)]


def reconcile_windows(
    shape: WindowShape,
    windows: pa.Table,
    silver: pa.Table,
    size_s: int,
    watermark_us: int | None,
    only: Sequence[int] | None = None,
) -> Report:
    """Compare the final windows with the silver totals of the same windows.

    Args:
        shape: the windows' dimensions and measures.
        windows: ``gold/window_aggregates`` rows.
        silver: ``silver/events`` at the version the windows consumed (at least the columns
            ``silver_columns(shape)``).
        size_s: the window size (the table's ``eos:config:window_size_s`` record).
        watermark_us: the table's watermark; windows ending at or before it are final.
        only: compare only the windows of these numbers (start = number x size), every final
            window when None; ``windows`` and ``silver`` must then hold at least all the rows
            of these windows.
    """
    report = Report()
    if watermark_us is None:
        report.ok_text = "no final window yet (no watermark)"
        return report
    key = [_quote("window_start"), *[_quote(d) for d in shape.dimensions]]
    measures = [_quote(m.name) for m in shape.measures]
    differs = [
        _differs(_is_float_sum(m, windows.schema), f"g.{q}", f"e.{q}")
        for m, q in zip(shape.measures, measures, strict=True)
    ]
    con = duckdb.connect()
    try:
        size_us = size_s * 1_000_000
        picked = "true"
        if only is not None:
            con.register("picked", pa.table({"w": pa.array(sorted(set(only)), pa.int64())}))
            picked = "_eos_w IN (SELECT w FROM picked)"
        con.register("gold_all", windows)
        con.execute(
            "CREATE VIEW gold_rows AS SELECT * FROM (SELECT *, "
            f"floor(epoch_us(window_start) / {size_us})::BIGINT AS _eos_w FROM gold_all) "
            f"WHERE {picked}"
        )
        con.register("silver", silver)
        dimensions = "".join(f", coalesce({d}, '') AS {d}" for d in key[1:])
        aggregates = ", ".join(
            f"{_aggregate(m)} AS {q}" for m, q in zip(shape.measures, measures, strict=True)
        )
        con.execute(
            f"""
            CREATE TEMP TABLE expected AS
            SELECT make_timestamptz(_eos_w * {size_us}) AS window_start{dimensions},
                   count(*) AS _eos_events, {aggregates}
            FROM (SELECT *, floor(epoch_us(event_time) / {size_us})::BIGINT AS _eos_w FROM silver)
            WHERE (_eos_w + 1) * {size_us} <= {watermark_us} AND {picked}
            GROUP BY ALL
            """
        )
        final = f"epoch_us(window_end) <= {watermark_us}"
        diffs = con.execute(
            f"""
            SELECT {", ".join(f"coalesce(g.{k}, e.{k})" for k in key)},
                   {", ".join(f"g.{m}, e.{m}" for m in measures)}
            FROM (SELECT * FROM gold_rows WHERE {final}) g
            FULL OUTER JOIN expected e USING ({", ".join(key)})
            WHERE g.window_start IS NULL OR e.window_start IS NULL OR {" OR ".join(differs)}
            ORDER BY ALL
            """
        ).fetchall()
        finals = con.execute(f"SELECT count(*) FROM gold_rows WHERE {final}").fetchone() or (0,)
        totals = con.execute(
            "SELECT count(*), coalesce(sum(_eos_events), 0) FROM expected"
        ).fetchone() or (0, 0)
    finally:
        con.close()
    report.ok_text = f"{finals[0]} final windows match silver: {totals[1]} events"
    for row in diffs[:SAMPLE]:
        ws, values = row[0], row[len(key) :]
        where = "/".join(str(v or "-") for v in row[1 : len(key)])
        pairs = [
            f"{m.name} {values[2 * i]} vs silver {values[2 * i + 1]}"
            for i, m in enumerate(shape.measures)
            if values[2 * i] != values[2 * i + 1]
        ]
        report.problems.append(f"window {ws} {where}: {', '.join(pairs)}")
    report.problem_count = len(diffs)
    report.counts = {
        "final_windows": int(finals[0]),
        "silver_final_windows": int(totals[0]),
        "silver_events_in_final_windows": int(totals[1]),
        "watermark_us": watermark_us,
        "window_size_s": size_s,
    }
    return report


def _is_float_sum(measure: Measure, schema: pa.Schema) -> bool:
    return measure.agg == SUM and pa.types.is_floating(schema.field(measure.name).type)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _aggregate(measure: Measure) -> str:
    """The DuckDB aggregate of ``measure`` over silver rows, as the window table holds it."""
    if measure.agg == COUNT:
        return "count(*)"
    of = _quote(measure.of or "")
    if measure.agg == COUNT_DISTINCT:
        return f"count(DISTINCT {of})"
    if measure.agg == SUM:
        return f"coalesce(sum({of}), 0)"
    return f"{measure.agg}({of})"


def _differs(approximate: bool, a: str, b: str) -> str:
    """SQL true when ``a`` and ``b`` differ; ``approximate`` ones (float sums computed in
    another order) within ``TOLERANCE``."""
    if not approximate:
        return f"{a} IS DISTINCT FROM {b}"
    return (
        f"({a} IS NULL) <> ({b} IS NULL) OR "
        f"abs({a} - {b}) > {TOLERANCE} * greatest(1, abs({a}), abs({b}))"
    )


@dataclass(frozen=True)
class Served:
    """One KPI table: its DuckDB name, primary key and Delta location."""

    name: str
    key: Sequence[str]
    uri: str


def reconcile_serving(
    con: duckdb.DuckDBPyConnection,
    served: Sequence[Served],
    versions_table: str,
    storage_options: Mapping[str, str] | None = None,
) -> Report:
    """Compare each DuckDB KPI table with its Delta table at the mirrored version, key by key."""
    report = Report()
    mirrored = dict(
        con.execute(f"SELECT table_name, delta_version FROM {versions_table}").fetchall()
    )
    checked = []
    for table in served:
        version = mirrored.get(table.name)
        if version is None:
            report.problems.append(f"{table.name}: never mirrored into DuckDB")
            report.problem_count += 1
            continue
        delta = delta_io.read_arrow(table.uri, storage_options, version=int(version))
        con.register("delta_rows", delta)
        bad = _differing(con, table, [f.name for f in delta.schema])
        con.unregister("delta_rows")
        checked.append(f"{table.name}@v{version} ({delta.num_rows} rows)")
        report.problems += [
            f"{table.name} {'key' if table.key else 'row'} {tuple(row)} differs from Delta "
            f"v{version}"
            for row in bad[:SAMPLE]
        ]
        report.problem_count += len(bad)
        report.counts[f"{table.name}_rows"] = delta.num_rows
        report.counts[f"{table.name}_delta_version"] = int(version)
    report.ok_text = "DuckDB equals Delta, row by row: " + ", ".join(checked)
    return report


def _differing(con: duckdb.DuckDBPyConnection, table: Served, columns: list[str]) -> list[tuple]:
    """The keys whose rows differ between ``delta_rows`` and the DuckDB copy; for a table
    without a key, the rows either side has that the other has not (as often)."""
    if not table.key:
        names = ", ".join(f'"{c}"' for c in columns)
        rows = f"SELECT {names}"
        return con.execute(
            f"({rows} FROM delta_rows EXCEPT ALL {rows} FROM {quoted(table.name)}) UNION ALL "
            f"({rows} FROM {quoted(table.name)} EXCEPT ALL {rows} FROM delta_rows)"
        ).fetchall()
    measures = [c for c in columns if c not in table.key]
    keys = [f'"{k}"' for k in table.key]
    differs = " OR ".join(f'd."{m}" IS DISTINCT FROM s."{m}"' for m in measures) or "false"
    return con.execute(
        f"SELECT {', '.join(f'coalesce(d.{k}, s.{k})' for k in keys)} "
        f"FROM delta_rows d FULL OUTER JOIN {quoted(table.name)} s USING ({', '.join(keys)}) "
        f"WHERE d.{keys[0]} IS NULL OR s.{keys[0]} IS NULL OR {differs} ORDER BY ALL"
    ).fetchall()


def changed_windows(
    size_s: int,
    watermark_before: int,
    watermark_after: int,
    *touched: pa.Array | pa.ChunkedArray,
) -> list[int]:
    """The numbers of the windows final at ``watermark_after`` that a reconciliation proven at
    ``watermark_before`` has not covered as they are now.

    Those are the windows that became final since, and the windows of the times ``touched``:
    the ``window_start`` of the gold rows changed since and of the gold rows whose
    ``window_end`` passed a watermark since, and the ``event_time`` of the silver rows added
    since. Every other final window has the same gold rows and the same silver rows as when it
    was proven.
    """
    size_us = size_s * 1_000_000
    last_final = watermark_after // size_us - 1
    numbers = set(range(watermark_before // size_us, last_final + 1))
    for times in touched:
        micros = pc.cast(pc.cast(times, pa.timestamp("us", tz="UTC")), pa.int64()).drop_null()
        windows = {t // size_us for t in micros.to_pylist()}
        numbers.update(w for w in windows if w <= last_final)
    return sorted(numbers)
