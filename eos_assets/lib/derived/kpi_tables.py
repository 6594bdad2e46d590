"""Declared KPI tables (``KpiSpec``), kept from silver/events batch by batch.

Every measure but ``count_distinct`` is mergeable: counts and sums are added to the touched
keys' rows, min and max combined, formulas evaluated again in declared order. Distinct values
are not additive: each KPI with a ``count_distinct`` keeps its values in a table of its own
(insert-if-absent: key, measure, value, and the silver version that first brought it), and a
key's count grows by the batch's values not in that table. Work per batch grows with the batch
and the distinct values of the keys it touches, never with the events already consumed.

One Spark job aggregates a batch for every KPI of the call (``kpi_compute.aggregate``); each
table then commits with delta-rs from the snapshot it planned from (``incremental.run``): the
distinct values first with their own ``txn``, then the rows with the consumed silver version
(and, for windows, their size; with a grace period, the max event time and the watermark).
Counting only the distinct rows with ``silver_version <= consumed`` as already seen keeps a
re-run after a crash between the two commits exact.
"""

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.lib import faults
from eos_assets.lib.contract.stream_shape import WINDOW, Contract, KpiSpec
from eos_assets.lib.delta import delta_io, txn_ids
from eos_assets.lib.derived import incremental, increments, kpi_distinct, kpi_rows
from eos_assets.lib.derived.incremental import FromSilverOutcome
from eos_assets.lib.derived.kpi_compute import Batch, aggregate, distinct_schema, kpi_schema
from eos_assets.lib.derived.windows import SIZE_APP, at
from eos_assets.lib.errors import EosError

APP = txn_ids.FROM_SILVER
AFTER_DISTINCT = "kpi_after_distinct"
AFTER_COMMIT = "kpi_after_commit"
CRASH_POINTS = (AFTER_DISTINCT, AFTER_COMMIT)


@dataclass(frozen=True)
class KpiTable:
    """A declared KPI and where it lives: its table and, with a ``count_distinct``, the table
    of its distinct values."""

    spec: KpiSpec
    uri: str
    distinct_uri: str | None = None


@dataclass
class KpiOutcome(FromSilverOutcome):
    """What one run of a KPI table did, besides what every table from silver reports.

    Attributes:
        rows_written: rows upserted (one per touched key).
        new_distinct: values new to the distinct table, after reading ``distinct_rows_read``
            rows of it; ``distinct_version`` is the version this run committed there (None:
            none).
        watermark: the max event time consumed minus the grace period (None without one).
        shared_job: the batch's aggregates came from the Spark job of another KPI of the call.
    """

    rows_written: int = 0
    new_distinct: int = 0
    distinct_rows_read: int = 0
    distinct_version: int | None = None
    watermark: datetime | None = None
    shared_job: bool = False


def update_kpis(
    spark: SparkSession,
    tables: Sequence[KpiTable],
    contract: Contract,
    events_uri: str,
    storage_options: Mapping[str, str] | None = None,
    upto: int | None = None,
    grace: timedelta | None = None,
) -> dict[str, KpiOutcome]:
    """Bring every KPI table up to silver version ``upto`` (None: the latest now), each with
    its own commits; KPIs at the same consumed version share one Spark job.

    Raises:
        EosError: a table was built with another shape or window size, a KPI cannot be
            computed from the contract, silver was rewritten, or commits kept conflicting.
    """
    if upto is None:
        upto = increments.load_upstream(events_uri, storage_options).version()
    specs = tuple(t.spec for t in tables)
    jobs: dict[tuple[int | None, int], Batch] = {}
    outcomes = {}
    for table in tables:
        derived = _derived(table, contract, events_uri, storage_options, upto)

        def step(a: incremental.Attempt, o: KpiOutcome, table: KpiTable = table) -> None:
            key = (a.increment.consumed, a.increment.version)
            o.shared_job = key in jobs
            if not o.shared_job:
                jobs[key] = aggregate(spark, specs, contract, a.increment)
            _step(table, contract, jobs[key], grace, a, o)

        outcomes[table.spec.name] = incremental.run(derived, KpiOutcome, step)
    return outcomes


def _derived(
    table: KpiTable,
    contract: Contract,
    events_uri: str,
    storage_options: Mapping[str, str] | None,
    upto: int,
) -> incremental.Derived:
    """The KPI as a derived table (created when missing), refusing a table of another shape."""
    spec, schema = table.spec, kpi_schema(table.spec, contract)
    delta_io.ensure_table(
        table.uri, schema, storage_options, configuration=delta_io.merged_table_config()
    )
    companions: tuple[str, ...] = ()
    if spec.distinct:
        if table.distinct_uri is None:
            raise EosError(f"the KPI {spec.name} counts distinct values: give it a distinct_uri")
        delta_io.ensure_table(table.distinct_uri, distinct_schema(spec), storage_options)
        companions = (table.distinct_uri,)

    def check(dt: DeltaTable) -> None:
        if pa.schema(dt.schema().to_arrow()).names != schema.names:  # type: ignore[arg-type]
            raise EosError(
                f"{table.uri} holds other columns than the KPI {spec.name} declares: delete it "
                "(and its distinct values) to rebuild, or declare it as it was"
            )
        built = dt.transaction_version(SIZE_APP)
        if spec.time == WINDOW and built is not None and built * 1_000_000 != spec.size_us:
            raise EosError(
                f"{table.uri} holds {built}s windows, not {(spec.size_us or 0) // 1_000_000}s: "
                "delete it (and its distinct values) to rebuild with the new size, or keep "
                "the old size"
            )

    return incremental.Derived(
        f"gold/{spec.name}",
        table.uri,
        events_uri,
        APP,
        storage_options,
        companions=companions,
        check=check,
        upto=upto,
    )


def _step(
    table: KpiTable,
    contract: Contract,
    batch: Batch,
    grace: timedelta | None,
    attempt: incremental.Attempt,
    outcome: KpiOutcome,
) -> None:
    spec, increment, dt = table.spec, attempt.increment, attempt.target
    outcome.events = increment.records
    schema = kpi_schema(spec, contract)
    counters = batch.counters(spec)
    names = list(spec.key)
    fresh = {kpi_rows.key_of(spec, r): r for r in counters.to_pylist()}
    where = kpi_rows.predicate(spec, list(fresh))
    metadata = attempt.metadata(f"kpi:{spec.name}")
    added: dict[tuple, int] = {}
    if spec.distinct:
        (distinct_dt,) = attempt.companions
        values = kpi_distinct.pairs(spec, batch.values(spec))
        added, missing, outcome.distinct_rows_read = kpi_distinct.new_values(
            spec, values, distinct_dt, where, increment.consumed
        )
        outcome.new_distinct = sum(added.values())
        outcome.distinct_version = kpi_distinct.commit(
            distinct_dt, missing, APP, attempt.txns, metadata
        )
    faults.crash_point(AFTER_DISTINCT)
    current = {
        tuple(r[n] for n in names): r for r in delta_io.read_rows(dt, schema, where).to_pylist()
    }
    rows = [
        kpi_rows.merge(spec, key, fresh[key], current.get(key), added)
        | {"silver_version": increment.version}
        for key in fresh
    ]
    outcome.rows_written = len(rows)
    outcome.seconds["compute"] = time.monotonic() - attempt.started
    txns = attempt.txns
    if spec.time == WINDOW:
        txns |= {SIZE_APP: (spec.size_us or 0) // 1_000_000}
    if grace is not None:
        txns |= kpi_rows.progress(dt, [r["_top"] for r in fresh.values()], grace)
        mark = txns.get(txn_ids.WATERMARK)
        outcome.watermark = None if mark is None else at(mark)
    rows_table = pa.Table.from_pylist(rows, schema=schema)
    delta_io.upsert(dt, rows_table, names, names[0], txns, metadata)
    faults.crash_point(AFTER_COMMIT)
