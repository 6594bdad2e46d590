"""A KPI declared as DuckDB SQL, translated once, when the declaration loads, to Spark SQL.

A declaration's SQL KPIs are written for DuckDB (the tables ``window_aggregates`` and
``entity_state``); Spark computes them into Delta tables (``sql_kpi_tables.py``). The SQL is
parsed with sqlglot in DuckDB's dialect and written in Spark's, with three rewrites where the
two engines would give different values on the same rows:

- ``time_bucket(INTERVAL n unit, ts)``: Spark has no such function. A bucket of a fixed length
  (microseconds to weeks) starts where DuckDB's does, on DuckDB's origin (Monday
  2000-01-03 00:00 UTC); months and years (no fixed length), an origin or a width that is not
  a literal are refused with the ``date_trunc`` to write instead.
- ``a / b``: DuckDB divides as doubles and gives ``inf``, ``-inf`` or ``NaN`` for a zero
  divisor; Spark (ANSI) fails. The division becomes a double one with DuckDB's results.
- ``avg(x)``: DuckDB averages as doubles, Spark a DECIMAL (a ``1.0`` literal) to a few
  decimals; the average is of ``x`` as a double.
- output columns keep DuckDB's names (an unnamed ``count(*)`` is ``count_star()`` in both) and
  a DECIMAL (Spark's type for ``1.0`` and its averages) becomes DOUBLE, as in DuckDB.

A function Spark does not have is refused at load, naming it, never in the first run.

A KPI that is one ``SELECT`` over ``window_aggregates`` grouped by a time key of
``window_start`` (``window_start`` itself, ``date_trunc`` or ``time_bucket`` of it) is kept
per touched time bucket (``TimeKey``); any other is recomputed whole.
"""

import hashlib
from dataclasses import dataclass
from functools import cache

import sqlglot
from pyspark.sql import functions as spark_functions
from sqlglot import exp
from sqlglot.errors import SqlglotError

from eos_assets.lib.errors import EosError

WINDOWS = "window_aggregates"
ENTITY = "entity_state"
SOURCES = (WINDOWS, ENTITY)
TIME_COLUMN = "window_start"
# DuckDB's time_bucket origin for buckets shorter than a month: Monday 2000-01-03 00:00 UTC.
DUCKDB_ORIGIN_US = 946_857_600_000_000
_UNIT_US = {
    "MICROSECOND": 1,
    "MILLISECOND": 1_000,
    "SECOND": 1_000_000,
    "MINUTE": 60_000_000,
    "HOUR": 3_600_000_000,
    "DAY": 86_400_000_000,
    "WEEK": 7 * 86_400_000_000,
}
_SPARK_FUNCTIONS = frozenset(name.lower() for name in dir(spark_functions))


class Untranslatable(EosError):
    """A construct of a KPI's SQL has no Spark translation: what it is, and how to write it."""

    def __init__(self, construct: str, fix: str) -> None:
        super().__init__(f"{construct} has no Spark translation: {fix}")
        self.construct, self.fix = construct, fix


@dataclass(frozen=True)
class TimeKey:
    """The output column that keys a KPI by time, and its expression over ``window_start``
    in Spark SQL (the column itself, a ``date_trunc`` or a bucket)."""

    column: str
    spark_expr: str


@dataclass(frozen=True)
class SqlKpi:
    """A declared SQL KPI as Spark computes it.

    Attributes:
        name: the KPI's name (its table is ``<stream>/gold/<name>``).
        sql: the declared DuckDB SQL.
        template: the Spark SQL, each table it reads as ``{window_aggregates}`` or
            ``{entity_state}`` (``str.format`` fills in the views of a run).
        sources: the tables it reads.
        columns: its output columns, named as DuckDB names them.
        key: the output columns it is grouped by (its non-aggregate outputs).
        time: the time key when it is kept per touched bucket; None: recomputed whole.
    """

    name: str
    sql: str
    template: str
    sources: tuple[str, ...]
    columns: tuple[str, ...]
    key: tuple[str, ...]
    time: TimeKey | None

    @property
    def fingerprint(self) -> int:
        """A number that changes when the SQL does (kept with the table: an edit rebuilds it)."""
        return int.from_bytes(hashlib.sha256(self.template.encode()).digest()[:7], "big")

    def spark_sql(self, views: dict[str, str]) -> str:
        """The Spark SQL over the given views, by source name."""
        return self.template.format(**views)


@cache
def translate(name: str, sql: str, columns: tuple[str, ...]) -> SqlKpi:
    """``sql`` (DuckDB) as Spark SQL; ``columns``: its output columns as DuckDB names them.

    Raises:
        Untranslatable: a construct Spark cannot run the way DuckDB does (one line: what, and
            how to write it).
    """
    try:
        tree = sqlglot.parse_one(sql.strip().rstrip(";"), read="duckdb")
    except SqlglotError as exc:
        problem = str(exc).splitlines()[0]
        raise Untranslatable(f"SQL that sqlglot cannot parse ({problem})", "simplify it") from None
    for node in tree.find_all(exp.Anonymous):
        function = str(node.this)
        if function.lower() not in _SPARK_FUNCTIONS:
            raise Untranslatable(
                f"the function {function}", "write it with functions both DuckDB and Spark have"
            )
    key, time = _grouping(tree, columns)
    tree = tree.transform(_rewrite)
    sources = tuple(s for s in SOURCES if any(t.name == s for t in tree.find_all(exp.Table)))
    for table in tree.find_all(exp.Table):
        if table.name in SOURCES and not table.args.get("db"):
            table.set("this", exp.to_identifier(f"eos_source_{table.name}"))
    text = tree.sql(dialect="spark").replace("{", "{{").replace("}", "}}")
    for source in SOURCES:
        text = text.replace(f"eos_source_{source}", "{" + source + "}")
    return SqlKpi(name, sql, text, sources, columns, key, time)


def _rewrite(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.DateBin):
        return _bucket(node)
    if isinstance(node, exp.Div):
        return _division(node)
    if isinstance(node, exp.Avg) and not isinstance(node.this, exp.Cast):
        # DuckDB averages as doubles; Spark keeps a DECIMAL's scale (avg of 1.0 and 0.0: 0.41105)
        node.set("this", exp.cast(node.this, exp.DataType.Type.DOUBLE))
    return node


def _bucket(node: exp.DateBin) -> exp.Expr:
    width = node.this
    shown = node.sql(dialect="duckdb")
    if node.args.get("unit") is not None or node.args.get("origin") is not None:
        raise Untranslatable(
            f"{shown} (an origin or time zone)", "bucket on the default origin, or date_trunc"
        )
    if not isinstance(width, exp.Interval) or not isinstance(width.this, exp.Literal):
        raise Untranslatable(f"{shown} (a width that is not a literal)", "write INTERVAL n unit")
    unit = str(width.args.get("unit") or "").upper().rstrip("S")
    if unit not in _UNIT_US:
        raise Untranslatable(
            f"{shown} ({unit.lower() or 'this unit'} has no fixed length)",
            f"use date_trunc('{unit.lower() or 'month'}', ...)",
        )
    try:
        size_us = int(float(str(width.this.this)) * _UNIT_US[unit])
    except ValueError:
        raise Untranslatable(
            f"{shown} (a width that is not a number)", "write INTERVAL n unit"
        ) from None
    micros = exp.func("unix_micros", node.expression.copy())
    offset = exp.func(
        "pmod",
        exp.Sub(this=micros.copy(), expression=exp.Literal.number(DUCKDB_ORIGIN_US)),
        exp.Literal.number(size_us),
    )
    return exp.func("timestamp_micros", exp.Sub(this=micros, expression=offset))


def _division(node: exp.Div) -> exp.Expr:
    """``a / b`` as DuckDB computes it: a double, and inf, -inf or NaN when ``b`` is zero."""
    dividend = exp.cast(exp.paren(node.this.copy(), copy=False), exp.DataType.Type.DOUBLE)
    divisor = exp.paren(node.expression.copy(), copy=False)
    infinity = exp.cast(exp.Literal.string("Infinity"), exp.DataType.Type.DOUBLE)
    return exp.paren(
        exp.If(
            this=exp.EQ(this=divisor, expression=exp.Literal.number(0)),
            true=exp.Mul(this=dividend, expression=infinity),
            false=exp.Div(this=dividend.copy(), expression=divisor.copy()),
        ),
        copy=False,
    )


def _grouping(tree: exp.Expr, columns: tuple[str, ...]) -> tuple[tuple[str, ...], TimeKey | None]:
    """The output columns a grouped SELECT is keyed by (none unless every group expression is
    an output), and its time key when it is kept per touched bucket: one SELECT of
    ``window_aggregates`` alone, grouped by a time key of ``window_start``, with nothing that
    makes a group's row depend on other groups (HAVING, LIMIT, window functions, joins)."""
    group = tree.args.get("group")
    if not isinstance(tree, exp.Select) or group is None or len(tree.expressions) != len(columns):
        return (), None
    every = bool(group.args.get("all"))
    explicit = [g.sql() for g in group.expressions]
    matched: set[str] = set()
    key: list[str] = []
    time = None
    for number, (column, item) in enumerate(zip(columns, tree.expressions, strict=True), 1):
        body = item.unalias()
        names = {body.sql(), str(number), item.alias_or_name}
        if every and body.find(exp.AggFunc) is None:
            key.append(column)
        elif not every and names & set(explicit):
            matched |= names & set(explicit)
            key.append(column)
        else:
            continue
        if time is None and _is_time_key(body):
            time = TimeKey(column, body.transform(_rewrite).sql(dialect="spark"))
    if not every and matched != set(explicit):
        return (), None
    simple = [t.name for t in tree.find_all(exp.Table)] == [WINDOWS] and not (
        any(tree.args.get(a) for a in ("having", "limit", "distinct", "with", "qualify"))
        or tree.find(exp.Window, exp.Subquery, exp.Join, exp.Union)
    )
    return tuple(key), time if simple else None


def _is_time_key(node: exp.Expr) -> bool:
    """Whether ``node`` is ``window_start``, or a truncation or bucket of it alone."""
    if isinstance(node, exp.TimestampTrunc | exp.DateBin):
        node = node.this if isinstance(node, exp.TimestampTrunc) else node.expression
    return isinstance(node, exp.Column) and node.name == TIME_COLUMN
