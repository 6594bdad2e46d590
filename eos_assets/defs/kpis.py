"""A stream's declared KPIs: the tables kept from its events, their DuckDB serving, the check
of the served copy, and the alerts declared over them.

- ``<stream>/gold/<kpi>``, one per KPI declared with ``time``, ``by`` and ``measures``, all
  from one asset (one Spark job a batch for every KPI, each table its own commits:
  ``lib/derived/kpi_tables.py``); a KPI that counts distinct values also keeps them in
  ``<stream>/gold/<kpi>_distinct``.
- ``<stream>/gold/<kpi>``, one per KPI declared with ``sql``, all from one asset: Spark runs
  the SQL (translated from DuckDB's dialect when the declaration loads) over the window and
  entity tables, per touched time bucket or whole (``lib/derived/sql_kpi_tables.py``).
- ``<stream>/serving/kpis``: the served KPI tables kept from the events, in DuckDB as
  ``<stream>.<kpi>``, upserted with the Delta version each reflects (``lib/serving/serving.py``);
  it is on the path a run takes first (and that a continuous stream takes at every batch).
- ``<stream>/serving/sql_kpis``: the served SQL KPI tables, replaced whole the same way; they
  follow the windows and the entity state (the follow steps of a continuous stream).
- ``duckdb_matches_delta`` on each: the served copies equal their Delta tables.
- ``<stream>/outbound/kpi_alerts`` and ``no_alert_stuck_in_flight``: the declared alert rules
  over final rows, delivered over HTTP with an idempotency key, every attempt in a ledger.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import duckdb
from dagster_pyspark import LazyPySparkResource
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import SparkSession

from eos_assets.defs.automation import check_with_asset
from eos_assets.defs.checks import report_result
from eos_assets.defs.derived_checks import missing
from eos_assets.defs.outbound import OUTBOUND_POOL, warn
from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.silver import Context, from_silver_metadata, run_or_fail
from eos_assets.defs.stream import OUTBOUND, SERVING, Stream
from eos_assets.lib.checks.reconcile import Served, reconcile_serving
from eos_assets.lib.derived.kpi_compute import kpi_schema
from eos_assets.lib.derived.kpi_sql import ENTITY, WINDOWS, SqlKpi
from eos_assets.lib.derived.kpi_tables import KpiOutcome, KpiTable, update_kpis
from eos_assets.lib.derived.sql_kpi_tables import SqlKpiOutcome, metadata_of, update_sql_kpis
from eos_assets.lib.errors import EosError
from eos_assets.lib.outbound import alert_ledger, alert_rules
from eos_assets.lib.outbound.alert_notify import stuck
from eos_assets.lib.serving import serving
from eos_assets.lib.serving.serving import VERSIONS_TABLE, MirrorOutcome
from eos_assets.resources.alerts import AlertsResource
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import spark_session
from eos_assets.resources.warehouse import WarehouseResource

SERVING_RECONCILE = "duckdb_matches_delta"
# The kinds of served KPI tables: kept from the events, and computed with SQL.
EVENTS, SQL = "events", "sql"
ALERTS_NOT_STUCK = "no_alert_stuck_in_flight"


def kpi_tables(stream: Stream, lake: LakeResource) -> list[KpiTable]:
    """Where the stream's KPI tables kept from the events live."""
    return [
        KpiTable(
            spec,
            lake.table_uri(*stream.kpi_key(spec.name).path),
            lake.table_uri(*stream.distinct_key(spec.name).path) if spec.distinct else None,
        )
        for spec in stream.kpi_specs
    ]


def update(
    stream: Stream, spark: SparkSession, lake: LakeResource, upto: int | None = None
) -> dict[str, KpiOutcome]:
    """Bring the stream's KPI tables up to silver version ``upto`` (None: the latest)."""
    return update_kpis(
        spark,
        kpi_tables(stream, lake),
        stream.contract,
        lake.table_uri(*stream.events.path),
        lake.storage_options,
        upto=upto,
        grace=stream.window.grace,
    )


def kpi_events(
    stream: Stream, context: Context, outcomes: dict[str, KpiOutcome]
) -> Iterator[dg.MaterializeResult]:
    """The materializations of one update: each KPI table, then its distinct values."""
    for spec in stream.kpi_specs:
        outcome = outcomes[spec.name]
        yield dg.MaterializeResult(
            asset_key=stream.kpi_key(spec.name), metadata=kpi_metadata(context, outcome)
        )
        if spec.distinct:
            yield dg.MaterializeResult(
                asset_key=stream.distinct_key(spec.name),
                metadata={
                    "delta_version": outcome.distinct_version,
                    "new_values": outcome.new_distinct,
                },
            )


def kpi_metadata(context: Context, outcome: KpiOutcome) -> dict[str, Any]:
    """The metadata of one update of a KPI table."""
    details = {
        "rows_upserted": outcome.rows_written,
        "new_distinct_values": outcome.new_distinct,
        "distinct_rows_read": outcome.distinct_rows_read,
        "spark_job_shared": outcome.shared_job,
    }
    if outcome.watermark is not None:
        details["watermark"] = outcome.watermark.isoformat()
    return from_silver_metadata(context, outcome, details)


def kpi_tables_asset(stream: Stream) -> dg.AssetsDefinition | None:
    """``<stream>/gold/<kpi>`` (and ``<kpi>_distinct``) of every KPI kept from the events."""
    if not stream.kpi_specs:
        return None
    descriptions: dict[dg.AssetKey, str] = {}
    for spec in stream.kpi_specs:
        measures = ", ".join(m.name for m in spec.measures)
        period = {"window": "window", "day": "day"}.get(spec.time or "", "all time")
        by = f" and {', '.join(spec.by)}" if spec.by else ""
        descriptions[stream.kpi_key(spec.name)] = (
            f"KPI {spec.name} per {period}{by}: {measures}. Kept from the events batch by "
            "batch: a batch updates only the rows it touches."
        )
        if spec.distinct:
            descriptions[stream.distinct_key(spec.name)] = (
                f"The distinct values behind {spec.name}'s exact distinct counts, per row key."
            )

    @dg.multi_asset(
        name=f"{stream.name}__gold__kpis",
        specs=stream.spark_tables([stream.events], descriptions),
    )
    @stream.keyed
    def declared_kpi_tables(
        context: dg.AssetExecutionContext, lake: LakeResource, pyspark: LazyPySparkResource
    ) -> Iterator[dg.MaterializeResult]:
        outcomes = run_or_fail(lambda: update(stream, spark_session(pyspark), lake))
        yield from kpi_events(stream, context, outcomes)

    return declared_kpi_tables


def served_tables(
    stream: Stream, lake: LakeResource, kinds: tuple[str, ...] = (EVENTS, SQL)
) -> list[serving.ServedTable]:
    """The served KPI tables of the ``kinds`` asked (kept from the events, SQL) as DuckDB's
    ``<stream>.<kpi>``: the first upserted by key, the SQL ones replaced whole."""
    tables = []
    if EVENTS in kinds:
        tables += [
            serving.ServedTable(
                f"{stream.name}.{spec.name}",
                lake.table_uri(*stream.kpi_key(spec.name).path),
                kpi_schema(spec, stream.contract),
                spec.key,
            )
            for spec in stream.served_specs
        ]
    if SQL in kinds:
        tables += [
            serving.ServedTable(
                f"{stream.name}.{kpi.name}", lake.table_uri(*stream.kpi_key(kpi.name).path)
            )
            for kpi in stream.served_sql
        ]
    return tables


def serve(
    stream: Stream,
    lake: LakeResource,
    warehouse: WarehouseResource,
    kinds: tuple[str, ...] = (EVENTS, SQL),
) -> MirrorOutcome:
    """Mirror the served KPI tables of the ``kinds`` asked into DuckDB.

    Raises:
        EosError: a table to serve does not exist yet.
    """
    return serving.serve(warehouse.path, served_tables(stream, lake, kinds), lake.storage_options)


def serving_metadata(context: Context, outcome: MirrorOutcome, path: str) -> dict[str, Any]:
    """The metadata of one refresh of the DuckDB serving tables."""
    if not outcome.upserted:
        context.log.info("DuckDB already reflects the current Delta versions")
    return {
        "delta_versions": dg.MetadataValue.json(outcome.versions),
        "rows_upserted": dg.MetadataValue.json(outcome.upserted),
        "up_to_date": dg.MetadataValue.json(outcome.skipped),
        "warehouse": path,
        "seconds": round(outcome.seconds, 3),
    }


def serving_key(stream: Stream, kind: str) -> dg.AssetKey:
    """Where the served KPI tables of a kind are: ``serving/kpis`` (kept from the events) or
    ``serving/sql_kpis``."""
    return stream.kpis if kind == EVENTS else stream.sql_serving


def _served_names(stream: Stream, kind: str) -> list[str]:
    return (
        [s.name for s in stream.served_specs]
        if kind == EVENTS
        else [k.name for k in stream.served_sql]
    )


def serving_asset(stream: Stream, kind: str = EVENTS) -> dg.AssetsDefinition | None:
    """The served KPI tables of a kind in DuckDB as ``<stream>.<kpi>`` (None: none is):
    ``serving/kpis``, on the path a run takes first, upserts those kept from the events;
    ``serving/sql_kpis`` replaces the SQL ones, after the windows and the entity state."""
    served = _served_names(stream, kind)
    if not served:
        return None
    names = ", ".join(f"{stream.name}.{kpi}" for kpi in served)
    how = "upserted" if kind == EVENTS else "replaced whole"

    @dg.asset(
        key=serving_key(stream, kind),
        deps=[stream.kpi_key(kpi) for kpi in served],
        group_name=stream.group(SERVING),
        kinds={"delta", "duckdb"},
        op_tags=None if kind == EVENTS else AFTER_SERVING,
        description=f"KPI tables of stream {stream.name} served in DuckDB ({names}), {how} "
        "with the Delta version each reflects (eos_delta_versions) in one DuckDB "
        "transaction, made on a copy of the file then swapped in: readers keep their version "
        "and never block it.",
    )
    @stream.keyed
    def served_kpis(
        context: dg.AssetExecutionContext, lake: LakeResource, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        outcome = run_or_fail(lambda: serve(stream, lake, warehouse, (kind,)))
        return dg.MaterializeResult(metadata=serving_metadata(context, outcome, warehouse.path))

    return served_kpis


def sql_kpi_tables(stream: Stream, lake: LakeResource) -> list[tuple[SqlKpi, str]]:
    """The stream's SQL KPIs and where their tables live."""
    return [(kpi, lake.table_uri(*stream.kpi_key(kpi.name).path)) for kpi in stream.sql_kpis]


def sql_sources(stream: Stream) -> dict[str, dg.AssetKey]:
    """The tables the SQL KPIs may read, by the name the SQL gives them."""
    sources = {WINDOWS: stream.window_aggregates}
    if stream.entity is not None:
        sources[ENTITY] = stream.entity_state
    return sources


def update_sql(stream: Stream, spark: SparkSession, lake: LakeResource) -> dict[str, SqlKpiOutcome]:
    """Bring the stream's SQL KPI tables up to the current window and entity tables.

    Raises:
        EosError: a table the SQL reads does not exist yet, Spark failed a KPI, or commits
            kept conflicting.
    """
    return update_sql_kpis(
        spark,
        sql_kpi_tables(stream, lake),
        {name: lake.table_uri(*key.path) for name, key in sql_sources(stream).items()},
        lake.storage_options,
    )


def sql_kpi_events(
    stream: Stream, outcomes: dict[str, SqlKpiOutcome]
) -> Iterator[dg.MaterializeResult]:
    """The materializations of one update of the SQL KPI tables."""
    for kpi in stream.sql_kpis:
        yield dg.MaterializeResult(
            asset_key=stream.kpi_key(kpi.name), metadata=metadata_of(outcomes[kpi.name])
        )


def sql_kpis_asset(stream: Stream) -> dg.AssetsDefinition | None:
    """``<stream>/gold/<kpi>`` of every KPI declared with SQL (None: none is)."""
    if not stream.sql_kpis:
        return None
    descriptions = {}
    for kpi in stream.sql_kpis:
        upkeep = (
            f"kept per touched {kpi.time.column}" if kpi.time is not None else "recomputed whole"
        )
        descriptions[stream.kpi_key(kpi.name)] = (
            f"KPI {kpi.name}: its declared SQL run by Spark over {' and '.join(kpi.sources)} "
            f"at each new version of theirs ({upkeep}): {' '.join(kpi.sql.split())}"
        )

    @dg.multi_asset(
        name=f"{stream.name}__gold__sql_kpis",
        specs=stream.spark_tables(list(sql_sources(stream).values()), descriptions),
    )
    def declared_sql_kpis(
        lake: LakeResource, pyspark: LazyPySparkResource
    ) -> Iterator[dg.MaterializeResult]:
        outcomes = run_or_fail(lambda: update_sql(stream, spark_session(pyspark), lake))
        yield from sql_kpi_events(stream, outcomes)

    return declared_sql_kpis


def served_result(
    stream: Stream, lake: LakeResource, warehouse: WarehouseResource, kind: str = EVENTS
) -> dg.AssetCheckResult:
    """``duckdb_matches_delta``: each served copy of a kind equals its Delta table at the
    version DuckDB records as mirrored."""
    served = [Served(t.name, t.key, t.uri) for t in served_tables(stream, lake, (kind,))]
    try:
        with warehouse.read() as con:
            report = reconcile_serving(con, served, VERSIONS_TABLE, lake.storage_options)
    except (EosError, TableNotFoundError, duckdb.Error) as exc:
        cause = " ".join(str(exc).split())[:300]
        return missing(f"cannot read the serving database {warehouse.path} ({cause})")
    return report_result(report)


def serving_check(stream: Stream, kind: str = EVENTS) -> dg.AssetChecksDefinition | None:
    """``duckdb_matches_delta`` on the serving asset of a kind (None: it serves nothing)."""
    if not _served_names(stream, kind):
        return None

    @check_with_asset(
        serving_key(stream, kind),
        SERVING_RECONCILE,
        "Each served KPI table in DuckDB equals, row by row, its Delta table at the version "
        "DuckDB records as mirrored.",
        op_tags=None if kind == EVENTS else AFTER_SERVING,
    )
    @stream.keyed
    def duckdb_matches_delta(
        lake: LakeResource, warehouse: WarehouseResource
    ) -> dg.AssetCheckResult:
        """Reconcile the DuckDB serving tables with the Delta KPI tables."""
        return served_result(stream, lake, warehouse, kind)

    return duckdb_matches_delta


def alert_assets(
    stream: Stream,
) -> tuple[dg.AssetsDefinition, dg.AssetChecksDefinition] | None:
    """``<stream>/outbound/kpi_alerts`` and its check (None: the stream declares no alert)."""
    if not stream.alerts:
        return None
    specs = {spec.name: spec for spec in stream.kpi_specs}
    by_kpi: dict[str, list[alert_rules.Rule]] = {}
    for rule in stream.alerts:
        by_kpi.setdefault(rule.kpi, []).append(rule)
    key = stream.kpi_alerts

    @dg.asset(
        key=key,
        deps=[stream.kpi_key(kpi) for kpi in by_kpi],
        group_name=stream.group(OUTBOUND),
        kinds={"delta"},
        op_tags=AFTER_SERVING,
        pool=OUTBOUND_POOL,
        description=f"Alerts of stream {stream.name}'s rules "
        f"({', '.join(r.name for r in stream.alerts)}) on final KPI rows, delivered to "
        "EOS_ALERT_URL with an idempotency key; the table is the delivery ledger (PENDING, "
        "SENDING, SUCCESS, FAILED, UNKNOWN per attempt). Without EOS_ALERT_URL the alerts are "
        "recorded as PENDING and nothing is delivered.",
    )
    @stream.keyed
    def kpi_alerts(
        context: dg.AssetExecutionContext, lake: LakeResource, alerts: AlertsResource
    ) -> dg.MaterializeResult:
        url = alerts.url
        policy = run_or_fail(alerts.policy)
        ledger = lake.table_uri(*key.path)
        kpis = [
            (specs[kpi], lake.table_uri(*stream.kpi_key(kpi).path), rules)
            for kpi, rules in by_kpi.items()
        ]
        outcome = run_or_fail(
            lambda: alert_rules.notify(kpis, ledger, url, policy, lake.storage_options)
        )
        if url is None:
            context.log.warning(
                "EOS_ALERT_URL is unset: alerts recorded as PENDING, none delivered"
            )
        if outcome.gave_up:
            context.log.warning(f"{len(outcome.gave_up)} alerts FAILED after their last attempt")
        return dg.MaterializeResult(
            metadata={
                "endpoint": url or "unset: nothing delivered",
                "rules": dg.MetadataValue.json({r.name: r.version for r in stream.alerts}),
                "alerts_raised": outcome.raised,
                "delivered": outcome.delivered,
                "confirmed_by_status": outcome.confirmed,
                "requests": outcome.requests,
                "rounds": outcome.rounds,
                "gave_up": dg.MetadataValue.json(outcome.gave_up),
                "ledger_states": dg.MetadataValue.json(outcome.states),
                "seconds": round(outcome.seconds, 3),
            }
        )

    @check_with_asset(
        key,
        ALERTS_NOT_STUCK,
        "No alert has been SENDING or UNKNOWN for longer than EOS_ALERT_STUCK_AFTER_S (warns); "
        "alerts FAILED for good are counted.",
        op_tags=AFTER_SERVING,
    )
    @stream.keyed
    def no_alert_stuck_in_flight(lake: LakeResource, alerts: AlertsResource) -> dg.AssetCheckResult:
        """Warn when deliveries stay unresolved: the endpoint cannot confirm them."""
        uri = lake.table_uri(*key.path)
        try:
            policy = alerts.policy()
            states = alert_ledger.read_states(uri, lake.storage_options)
        except (EosError, OSError, TableNotFoundError) as exc:
            return warn(False, f"cannot read the alert ledger at {uri}: {exc}", {})
        late = stuck(states, policy.stuck_after_s)
        failed = sorted(a for a, s in states.items() if s.state == alert_ledger.FAILED)
        return warn(
            not late,
            f"{len(late)} alerts SENDING or UNKNOWN for over {policy.stuck_after_s:g}s; "
            f"{len(failed)} FAILED",
            {
                "stuck": dg.MetadataValue.json(sorted(s.alert_id for s in late)[:50]),
                "failed": dg.MetadataValue.json(failed[:50]),
                "alerts": len(states),
            },
        )

    return kpi_alerts, no_alert_stuck_in_flight
