"""What a declared stream gets, built from its declaration.

Every stream gets, keyed ``<stream>/<layer>/<table>`` (``defs/stream.py``):

- ``bronze/raw_events``: its topics, every committed record once, parsed by its contract;
- ``silver/events``: each valid event once; ``silver/entity_state`` when it declares an entity;
- ``gold/window_aggregates`` and ``gold/late_events``: its windows' dimensions and measures;
- ``serving/kpis``: its declared KPIs, served in DuckDB as ``<stream>.<kpi>``;
- ``outbound/agg_out``: its window revisions in Kafka, exactly once;
- the checks of each table, and its lag sensor ``<stream>_ingest_on_kafka_lag``.

A stream whose events have the order shape (``lib/revenue/shape.py``) also gets the revenue KPI
tables and their alerts (``defs/order_kpis.py``). The jobs, schedules and the automation sensor
cover every stream and are built once (``eos_assets/definitions.py``).

The declared window ``size`` and ``grace`` are the defaults of the windows' run config, and the
thresholds those of the checks and the lag sensor (``EOS_*`` variables still override them).
A ``topic_pattern`` is resolved against the broker at every run and tick, and ``start`` says
where a partition never read starts (``lib/kafka/starts.py``).
"""

from dataclasses import dataclass

import dagster as dg

from eos_assets.declaration import StreamModel
from eos_assets.defs import (
    automation,
    bronze,
    checks,
    continuous,
    continuous_sensor,
    derived_checks,
    gold,
    jobs,
    order_alerts,
    order_kpis,
    outbound,
    schedules,
    sensors,
    serving,
    silver,
)
from eos_assets.defs.stream import Stream
from eos_assets.lib.revenue.shape import ORDER_SHAPE


def has_order_shape(stream: StreamModel) -> bool:
    """Whether the stream's events have the order shape that the revenue KPIs compute from."""
    declared = stream.model_dump(mode="json")
    declared["windows.dimensions"] = declared["windows"]["dimensions"]
    declared["windows.measures"] = declared["windows"]["measures"]
    return all(declared[field] == expected for field, expected in ORDER_SHAPE.items())


@dataclass(frozen=True)
class StreamParts:
    """Every definition of one stream, one field each (tools and tests run a part of them)."""

    stream: Stream
    raw_events: dg.AssetsDefinition
    events: dg.AssetsDefinition
    entity_state: dg.AssetsDefinition | None
    window_aggregates: dg.AssetsDefinition
    kpis: dg.AssetsDefinition | None
    agg_out: dg.AssetsDefinition
    bronze_checks: list[dg.AssetChecksDefinition]
    derived_checks: list[dg.AssetChecksDefinition]
    agg_out_check: dg.AssetChecksDefinition
    revenue: list[dg.AssetsDefinition]  # kpi_window, kpi_daily, serving_kpi (order shape)
    revenue_checks: list[dg.AssetChecksDefinition]  # duckdb_matches_delta, the alerts' check
    kpi_alerts: dg.AssetsDefinition | None
    lag_sensor: dg.SensorDefinition
    schedules: list[dg.ScheduleDefinition]  # the checks that read Kafka

    @property
    def downstream(self) -> list[dg.AssetsDefinition]:
        """Every asset downstream of bronze."""
        optional = [self.entity_state, self.kpis, self.kpi_alerts]
        return [
            self.events,
            self.window_aggregates,
            self.agg_out,
            *self.revenue,
            *(a for a in optional if a is not None),
        ]

    @property
    def checks(self) -> list[dg.AssetChecksDefinition]:
        return [*self.bronze_checks, *self.derived_checks, self.agg_out_check, *self.revenue_checks]


def build(model: StreamModel) -> StreamParts:
    """Every definition of the stream, built from its declaration."""
    stream = Stream.of(model)
    agg_out, agg_out_check = outbound.agg_out_assets(stream)
    revenue: list[dg.AssetsDefinition] = []
    revenue_checks: list[dg.AssetChecksDefinition] = []
    kpi_alerts = None
    served = stream.kpis
    if has_order_shape(model):
        revenue = order_kpis.kpi_assets(stream)
        kpi_alerts, alerts_check = order_alerts.alert_assets(stream)
        revenue_checks = [order_kpis.serving_check(stream), alerts_check]
        served = order_kpis.OrderKpiKeys.of(stream).serving_kpi
    return StreamParts(
        stream=stream,
        raw_events=bronze.raw_events_asset(stream),
        events=silver.events_asset(stream),
        entity_state=silver.entity_state_asset(stream) if stream.entity is not None else None,
        window_aggregates=gold.window_assets(stream),
        kpis=serving.kpis_asset(stream) if stream.served else None,
        agg_out=agg_out,
        bronze_checks=checks.bronze_checks(stream),
        derived_checks=derived_checks.derived_checks(stream),
        agg_out_check=agg_out_check,
        revenue=revenue,
        revenue_checks=revenue_checks,
        kpi_alerts=kpi_alerts,
        lag_sensor=sensors.lag_sensor(stream, served),
        schedules=schedules.stream_schedules(stream),
    )


def definitions(model: StreamModel) -> dg.Definitions:
    """The stream's assets, checks, job ``<stream>__ingest_and_refresh`` and lag sensor.

    The jobs, schedules and the automation sensor cover every stream and are built once
    (``eos_assets/definitions.py``).
    """
    parts = build(model)
    # Everything downstream of bronze follows it (declarative automation); on a continuous
    # stream, the path to the served KPIs follows its continuous run instead.
    loop = continuous_path(parts) if parts.stream.continuous else set()
    follow = dg.map_asset_specs(
        lambda spec: spec.replace_attributes(
            automation_condition=None if spec.key in loop else automation.FOLLOW_UPSTREAM
        ),
        parts.downstream,
    )
    stream_jobs: list[dg.JobDefinition | dg.UnresolvedAssetJobDefinition] = [
        jobs.stream_job(parts.stream)
    ]
    sensors = [parts.lag_sensor]
    if parts.stream.continuous:
        job = continuous.continuous_job(parts.stream)
        stream_jobs.append(job)
        sensors.append(continuous_sensor.keeper_sensor(parts.stream, job))
    return dg.Definitions(
        assets=[parts.raw_events, *follow],
        asset_checks=parts.checks,
        sensors=sensors,
        schedules=parts.schedules,
        jobs=stream_jobs,
    )


def continuous_path(parts: StreamParts) -> set[dg.AssetKey]:
    """The assets a continuous run materializes: bronze to the served revenue KPIs."""
    return {spec.key for asset in [parts.raw_events, parts.events, *parts.revenue]
            for spec in asset.specs}  # fmt: skip


def tables(model: StreamModel) -> list[dg.AssetKey]:
    """The stream's Delta tables, maintained daily."""
    stream = Stream.of(model)
    keys = [stream.raw_events, stream.events, stream.window_aggregates, stream.late_events]
    if stream.entity is not None:
        keys.append(stream.entity_state)
    if has_order_shape(model):
        revenue = order_kpis.OrderKpiKeys.of(stream)
        keys += [revenue.kpi_window, revenue.kpi_daily, revenue.kpi_daily_customers]
    return keys
