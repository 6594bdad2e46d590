"""The built-in pipeline behind a declared stream, and the shape it computes.

This version's tables are computed by code written for one shape of event, the order events
of the demo (``eos_assets/defs``). A declaration drives it as follows:

- taken from the file: ``topics`` (``EOS_TOPICS`` overrides them for a deployment);
- taken from the file: ``entity``, folded as declared over the payload (``silver/order_state``,
  ``lib/entity_state.py``);
- taken from the file: ``kpis`` and ``serve``, run by DuckDB over the stream's window and
  entity tables into the serving database (the asset ``serving/<stream>_kpis``, beside the
  built-in ``serving/kpi``);
- checked against the built-in shape, with one line naming the first difference: the event
  id and time fields, the payload, the windows' dimensions and measures;
- checked against the built-in defaults: ``start``, window ``size`` and ``grace`` (a run's
  config still sets them per run) and the thresholds (``EOS_*`` variables still override them).

Streams of another shape, more than one stream, ``topic_pattern`` and a ``start`` other than
earliest are refused when the definitions load, with one line saying so.
"""

import dagster as dg

from eos_assets.stream_specs import entity_spec
from eos_assets.declaration import (
    DeclarationError,
    StreamModel,
    as_timedelta,
)
from eos_assets.defs import (
    automation,
    bronze,
    checks,
    derived_checks,
    gold,
    jobs,
    outbound,
    schedules,
    sensors,
    silver,
)
from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.lib import declared_kpis
from eos_assets.lib.contract import EVENT_TYPES
from eos_assets.lib.limits import Limits
from eos_assets.lib.windows import WindowSpec
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.warehouse import WarehouseResource

# What the built-in tables compute, field by field, as a declaration would say it.
SHAPE: dict[str, object] = {
    "event_id": {"field": "event_id"},
    "event_time": {"field": "event_time", "format": "iso8601"},
    "payload": {
        "event_type": {"type": "string", "required": True, "values": list(EVENT_TYPES)},
        "order_id": {"type": "string", "required": False, "values": None},
        "customer_id": {"type": "string", "required": False, "values": None},
        "amount": {"type": "double", "required": True, "values": None},
        "currency": {"type": "string", "required": False, "values": None},
    },
    "windows.dimensions": ["event_type", "currency"],
    "windows.measures": {
        "event_count": {"agg": "count", "of": None},
        "distinct_orders": {"agg": "count_distinct", "of": "order_id"},
        "distinct_customers": {"agg": "count_distinct", "of": "customer_id"},
        "amount_sum": {"agg": "sum", "of": "amount"},
    },
}


def check_shape(stream: StreamModel, source: str) -> None:
    """Refuse what the built-in pipeline would not compute as declared.

    Raises:
        DeclarationError: the first field that differs, with what this version computes.
    """

    def refuse(field: str, problem: str, fix: str) -> None:
        raise DeclarationError(source, field, problem, fix)

    declared = stream.model_dump(mode="json")
    declared["windows.dimensions"] = declared["windows"]["dimensions"]
    declared["windows.measures"] = declared["windows"]["measures"]
    for field, expected in SHAPE.items():
        if declared[field] != expected:
            refuse(
                field,
                "this version computes one shape of event, the orders stream's, and this "
                "declaration differs from it",
                f"declare {field} as eos_assets/streams/orders/defs.yaml does",
            )
    if stream.topic_pattern:
        refuse("topic_pattern", "this version reads named topics only", "list them under topics")
    if stream.start != "earliest":
        refuse("start", "this version starts new partitions at earliest only", "set earliest")
    default = WindowSpec()
    if as_timedelta(stream.windows.size) != default.size:
        refuse(
            "windows.size",
            "this version's default window is 5m",
            "set 5m (a run's config sets another)",
        )
    if as_timedelta(stream.windows.grace) != default.grace:
        refuse(
            "windows.grace",
            "this version's default grace is 10m",
            "set 10m (a run's config sets another)",
        )
    limits, thresholds = Limits(), stream.thresholds
    for field, declared_value, built_in in (
        ("lag_max_records", thresholds.lag_max_records, limits.lag_max_records),
        ("lag_max_age", as_timedelta(thresholds.lag_max_age).total_seconds(), limits.lag_max_age_s),
        (
            "freshness_max_age",
            as_timedelta(thresholds.freshness_max_age).total_seconds(),
            limits.freshness_max_age_s,
        ),
        ("malformed_max_rate", thresholds.malformed_max_rate, limits.malformed_max_rate),
    ):
        if declared_value != built_in:
            refuse(
                f"thresholds.{field}",
                f"this version's threshold is {built_in} (set per deployment with EOS_* variables)",
                f"declare {built_in} or leave it out",
            )


def definitions(stream: StreamModel) -> dg.Definitions:
    """The assets, checks, jobs, sensors and schedules of the stream (built-in pipeline)."""
    declared = [kpi_asset(stream)] if stream.serve else []
    spec = entity_spec(stream)
    if spec is not None:
        declared.append(
            silver.entity_state_asset(spec, automation_condition=automation.FOLLOW_UPSTREAM)
        )
    return dg.Definitions(
        assets=[
            *dg.load_assets_from_modules([bronze]),
            *dg.load_assets_from_modules(
                [silver, gold, outbound], automation_condition=automation.FOLLOW_UPSTREAM
            ),
            *declared,
        ],
        asset_checks=dg.load_asset_checks_from_modules([checks, derived_checks, outbound]),
        jobs=[
            jobs.ingest_job,
            jobs.stream_job,
            jobs.refresh_job,
            jobs.all_assets_job,
            jobs.freshness_job,
            jobs.audit_job,
            jobs.outbound_job,
            jobs.maintenance_job,
        ],
        sensors=[sensors.ingest_on_kafka_lag, sensors.downstream_sensor],
        schedules=[
            schedules.freshness_schedule,
            schedules.audit_schedule,
            schedules.maintenance_schedule,
        ],
    )


def kpi_asset(stream: StreamModel) -> dg.AssetsDefinition:
    """``serving/<stream>_kpis``: the declared KPIs, served in DuckDB as ``<stream>.<kpi>``."""
    sources = {declared_kpis.WINDOWS: gold.WINDOW_AGGREGATES}  # the tables the KPI SQL reads
    if stream.entity is not None:
        sources[declared_kpis.ENTITY] = silver.ORDER_STATE
    kpis = {name: stream.kpis[name].sql for name in stream.serve}

    @dg.asset(
        key=dg.AssetKey(["serving", f"{stream.name}_kpis"]),
        deps=list(sources.values()),
        group_name="serving",
        kinds={"delta", "duckdb"},
        op_tags=AFTER_SERVING,
        automation_condition=automation.FOLLOW_UPSTREAM,
        description=f"The KPIs declared by stream {stream.name} ({', '.join(kpis)}), computed "
        f"by DuckDB over its window and entity tables and served as {stream.name}.<kpi>.",
    )
    def declared_kpi_tables(
        context: dg.AssetExecutionContext, lake: LakeResource, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        outcome = silver.run_or_fail(
            lambda: declared_kpis.refresh(
                warehouse.path,
                stream.name,
                kpis,
                {name: lake.table_uri(*key.path) for name, key in sources.items()},
                lake.storage_options,
            )
        )
        if outcome.up_to_date:
            context.log.info("the KPIs already reflect the current Delta versions")
        return dg.MaterializeResult(
            metadata={
                "delta_versions": dg.MetadataValue.json(outcome.versions),
                "rows": dg.MetadataValue.json(outcome.rows),
                "up_to_date": outcome.up_to_date,
                "warehouse": warehouse.path,
                "seconds": round(outcome.seconds, 3),
            }
        )

    return declared_kpi_tables
