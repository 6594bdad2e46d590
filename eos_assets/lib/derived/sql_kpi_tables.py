"""Declared SQL KPIs (``kpi_sql.SqlKpi``) as Delta tables Spark computes, one per KPI.

A KPI table records, in ``txn`` actions committed with its rows, the version of each table
its SQL reads (``eos:upstream:gold/window_aggregates``, ``eos:upstream:silver/entity_state``)
and the fingerprint of the SQL (``eos:config:kpi_sql``). A run reads each source's current
snapshot once; a KPI whose table already records those versions (or later ones, a rival
run's) and that SQL is up to date, so a re-run after a crash commits nothing twice. Otherwise:

- **Per touched bucket**, for a KPI keyed by a time key of ``window_start`` whose table was
  built from the same SQL: the window rows in the files added since the consumed version name
  the touched buckets; the KPI runs over the window rows of the buckets from the first to the
  last touched one (files pruned by ``window_start``), and one commit replaces those buckets'
  rows (``mode="overwrite"`` with a predicate on the time column). The work grows with the
  buckets a batch touched, not with the history.
- **Whole**, for any other KPI (or when the log since the consumed version is gone): the KPI
  runs over both snapshots and one commit replaces the table (its schema too).

Every commit is made from the snapshot planned from, so a concurrent writer makes it fail and
the KPI is planned again from the sources' snapshots read anew (``incremental.MAX_ATTEMPTS``):
a rival that reflected newer versions leaves nothing to do.
"""

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

from eos_assets.lib.delta import delta_io, txn_ids
from eos_assets.lib.derived import increments
from eos_assets.lib.derived.incremental import MAX_ATTEMPTS
from eos_assets.lib.derived.kpi_sql import ENTITY, TIME_COLUMN, WINDOWS, SqlKpi
from eos_assets.lib.derived.windows import at
from eos_assets.lib.errors import EosError

SQL_APP = "eos:config:kpi_sql"
SOURCE_APPS = {
    WINDOWS: txn_ids.upstream_app("gold/window_aggregates"),
    ENTITY: txn_ids.upstream_app("silver/entity_state"),
}


@dataclass
class SqlKpiOutcome:
    """What one run of a SQL KPI table did.

    Attributes:
        version: the version committed; None: the table already reflected its sources.
        sources: the version of each source table the KPI reflects.
        rows_written: rows committed (the table's rows, or the touched buckets' rows).
        buckets: the first and last time bucket recomputed (``()``: none); None when the
            table was recomputed whole.
        attempts: attempts made (more than one after a lost commit race).
        seconds: time of the run.
    """

    version: int | None = None
    sources: dict[str, int] = field(default_factory=dict)
    rows_written: int = 0
    buckets: tuple[datetime, datetime] | tuple[()] | None = None
    attempts: int = 0
    seconds: float = 0.0


@dataclass
class _Sources:
    """The source snapshots a run reads, and their views in the Spark session."""

    spark: SparkSession
    uris: Mapping[str, str]
    storage_options: Mapping[str, str] | None
    snapshots: dict[str, DeltaTable] = field(default_factory=dict)
    views: dict[str, str] = field(default_factory=dict)

    def load(self, names: Iterable[str]) -> None:
        """The current snapshot of each source (again after a lost commit race: the rival
        may have read newer versions).

        Raises:
            EosError: a source table does not exist yet.
        """
        self.drop()
        for name in sorted(names):
            try:
                self.snapshots[name] = delta_io.load(self.uris[name], self.storage_options)
            except TableNotFoundError:
                raise EosError(
                    f"{self.uris[name]} does not exist yet: materialize {name} before the KPIs "
                    "that read it"
                ) from None

    def frame(self, source: str, predicate: str | None = None) -> DataFrame:
        dt = self.snapshots[source]
        files = [f.uri for f in delta_io.data_files(dt, predicate)]
        return delta_io.read_spark(self.spark, files, pa.schema(dt.schema().to_arrow()))  # type: ignore[arg-type]

    def whole(self) -> dict[str, str]:
        """A temporary view of every source snapshot, by source name (made once a run)."""
        for source in self.snapshots:
            if source not in self.views:
                self.views[source] = _view(self.frame(source))
        return self.views

    def drop(self) -> None:
        for view in self.views.values():
            self.spark.catalog.dropTempView(view)
        self.views.clear()


def update_sql_kpis(
    spark: SparkSession,
    kpis: Sequence[tuple[SqlKpi, str]],
    sources: Mapping[str, str],
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, SqlKpiOutcome]:
    """Bring each KPI's table (``(kpi, uri)``) up to the current versions of ``sources`` (the
    Delta URI of each table the SQL may read, by name).

    Raises:
        EosError: a table the SQL reads does not exist yet, the SQL failed in Spark, or
            commits kept conflicting.
    """
    read = _Sources(spark, sources, storage_options)
    read.load({s for kpi, _ in kpis for s in kpi.sources})
    try:
        return {kpi.name: _update(read, kpi, uri, storage_options) for kpi, uri in kpis}
    finally:
        read.drop()


def _update(
    read: _Sources, kpi: SqlKpi, uri: str, storage_options: Mapping[str, str] | None
) -> SqlKpiOutcome:
    for number in range(1, MAX_ATTEMPTS + 1):
        started = time.monotonic()
        outcome = SqlKpiOutcome(attempts=number)
        outcome.sources = {s: read.snapshots[s].version() for s in kpi.sources}
        txns = {SOURCE_APPS[s]: v for s, v in outcome.sources.items()} | {SQL_APP: kpi.fingerprint}
        try:
            target: DeltaTable | None = delta_io.load(uri, storage_options)
        except TableNotFoundError:
            target = None
        if target is not None and _reflects(target, kpi, outcome.sources):
            outcome.seconds = time.monotonic() - started
            return outcome  # this run's versions, or a rival's newer ones
        run_id = uuid.uuid4().hex
        lineage: dict[str, Any] = {}
        for source in kpi.sources:
            snapshot = read.snapshots[source]
            consumed = delta_io.positions(snapshot, (txn_ids.FROM_SILVER,))
            app = SOURCE_APPS[source].removeprefix(txn_ids.UPSTREAM_PREFIX)
            lineage |= txn_ids.lineage(app, snapshot.version(), consumed)
        metadata = {
            txn_ids.OPERATION: f"gold/{kpi.name}",
            txn_ids.RUN_ID: run_id,
            txn_ids.LINEAGE: lineage,
        }
        props = delta_io.commit_properties(txns, metadata, text_values=True)
        try:
            span = _touched(read, kpi, target)
            if span is None:
                rows = _compute(read, kpi, read.whole())
                with delta_io.lake_errors(uri):
                    write_deltalake(
                        target if target is not None else uri,
                        rows,
                        mode="overwrite",
                        schema_mode="overwrite",
                        storage_options=None if target is not None else dict(storage_options or {}),
                        commit_properties=props,
                    )
            else:
                assert target is not None
                rows = _replace_buckets(read, kpi, target, span, props)
                outcome.buckets = span
        except CommitFailedError:
            read.load(read.snapshots)
            continue
        outcome.rows_written = rows.num_rows
        outcome.version = delta_io.find_commit(uri, txn_ids.RUN_ID, run_id, storage_options)
        outcome.seconds = time.monotonic() - started
        return outcome
    raise EosError(
        f"gold/{kpi.name} at {uri} lost {MAX_ATTEMPTS} commit races with concurrent writers: "
        "let one run at a time and retry"
    )


def _reflects(target: DeltaTable, kpi: SqlKpi, versions: Mapping[str, int]) -> bool:
    """Whether the table was built from this SQL and reflects ``versions`` of its sources or
    later ones."""
    if target.transaction_version(SQL_APP) != kpi.fingerprint:
        return False
    for source, version in versions.items():
        reflected = target.transaction_version(SOURCE_APPS[source])
        if reflected is None or reflected < version:
            return False
    return True


def _touched(
    read: _Sources, kpi: SqlKpi, target: DeltaTable | None
) -> tuple[datetime, datetime] | tuple[()] | None:
    """The first and last time bucket of the window rows changed since the version the table
    consumed (``()``: none changed); None when the table must be recomputed whole."""
    if kpi.time is None or target is None or target.transaction_version(SQL_APP) != kpi.fingerprint:
        return None
    consumed = target.transaction_version(SOURCE_APPS[WINDOWS])
    windows = read.snapshots[WINDOWS]
    if consumed is None or consumed >= windows.version():
        return None
    try:
        added = increments.added_files(
            windows.table_uri, consumed + 1, windows.version(), append_only=False
        )
    except EosError:
        return None  # the log since the consumed version is gone
    names = {a.uri.rsplit("/", 1)[-1] for a in added}
    live = [f.uri for f in delta_io.data_files(windows) if f.uri.rsplit("/", 1)[-1] in names]
    schema = pa.schema(windows.schema().to_arrow())  # type: ignore[arg-type]
    changed = delta_io.read_spark(read.spark, live, schema)
    key = F.unix_micros(F.expr(kpi.time.spark_expr))  # an instant, whatever the local zone
    low, high = changed.agg(F.min(key), F.max(key)).collect()[0]
    return () if low is None else (at(low), at(high))


def _replace_buckets(
    read: _Sources,
    kpi: SqlKpi,
    target: DeltaTable,
    span: tuple[datetime, datetime] | tuple[()],
    props: CommitProperties,
) -> pa.Table:
    """Replace the rows of the buckets ``span`` covers with the KPI over their window rows, in
    one commit from ``target`` (with no bucket, commit only the ``txn`` actions)."""
    assert kpi.time is not None
    schema = pa.schema(target.schema().to_arrow())  # type: ignore[arg-type]
    if not span:
        with delta_io.lake_errors(target.table_uri):
            target.create_write_transaction(
                [], mode="append", schema=schema, commit_properties=props
            )
        return schema.empty_table()
    low, high = span
    rows = read.frame(WINDOWS, f"{TIME_COLUMN} >= {delta_io.sql_literal(low)}")
    key = F.expr(kpi.time.spark_expr)
    view = _view(rows.where((key >= F.lit(low)) & (key <= F.lit(high))))
    try:
        computed = _compute(read, kpi, {WINDOWS: view})
    finally:
        read.spark.catalog.dropTempView(view)
    column = f'"{kpi.time.column}"'
    bounds = f"{column} >= {delta_io.sql_literal(low)} AND {column} <= {delta_io.sql_literal(high)}"
    with delta_io.lake_errors(target.table_uri):
        write_deltalake(
            target,
            computed.select(schema.names).cast(schema),
            mode="overwrite",
            predicate=bounds,
            commit_properties=props,
        )
    return computed


def _compute(read: _Sources, kpi: SqlKpi, views: dict[str, str]) -> pa.Table:
    """The KPI's rows over ``views``, with DuckDB's column names and DOUBLE for DECIMAL.

    Raises:
        EosError: Spark failed the SQL (one line).
    """
    try:
        frame = read.spark.sql(kpi.spark_sql(views)).toDF(*kpi.columns)
        frame = frame.select(
            *(
                F.col(f"`{f.name}`").cast("double").alias(f.name)
                if isinstance(f.dataType, DecimalType)
                else F.col(f"`{f.name}`")
                for f in frame.schema.fields
            )
        )
        return frame.toArrow()
    except Exception as exc:  # Spark's errors are of several classes, local and Connect
        if isinstance(exc, EosError):
            raise
        detail = " ".join(str(exc).split())[:300]
        raise EosError(
            f"KPI {kpi.name} failed in Spark ({detail}): fix its SQL in the stream's declaration"
        ) from None


def _view(frame: DataFrame) -> str:
    """``frame`` as a temporary view of a name no other call uses (KPI steps may run in
    parallel threads on one session)."""
    name = f"eos_kpi_source_{uuid.uuid4().hex}"
    frame.createOrReplaceTempView(name)
    return name


def metadata_of(outcome: SqlKpiOutcome) -> dict[str, Any]:
    """The materialization metadata of one run of a SQL KPI table."""
    return {
        "delta_version": outcome.version,
        "source_versions": outcome.sources,
        "rows_written": outcome.rows_written,
        "recomputed": _span(outcome.buckets),
        "seconds": round(outcome.seconds, 3),
    }


def _span(buckets: tuple[datetime, datetime] | tuple[()] | None) -> str:
    if buckets is None:
        return "whole"
    if not buckets:
        return "no bucket"
    return " to ".join(b.isoformat() for b in buckets)
