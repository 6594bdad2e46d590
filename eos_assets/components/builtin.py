"""What a declared stream gets, built from its declaration.

Every stream gets, keyed ``<stream>/<layer>/<table>`` (``defs/stream.py``):

- ``bronze/raw_events``: its topics, every committed record once, parsed by its contract;
- ``silver/events``: each valid event once; ``silver/entity_state`` when it declares an entity;
- ``gold/window_aggregates`` and ``gold/late_events``: its windows' dimensions and measures;
- ``gold/<kpi>``: each KPI it declares, a Delta table Spark keeps (with time, by and
  measures: from the events, batch by batch; with SQL: over the window and entity tables);
  ``serving/kpis`` and ``serving/sql_kpis``: those it serves, in DuckDB as ``<stream>.<kpi>``,
  each with the check that the copy equals the lake; ``outbound/kpi_alerts``: its declared
  alert rules (``defs/kpis.py``);
- ``outbound/agg_out``: its window revisions in Kafka, exactly once;
- the checks of each table, and its lag sensor ``<stream>_ingest_on_kafka_lag``.

The jobs, schedules and the automation sensor cover every stream and are built once
(``shared.build_shared``); a stream's lag sensor and the schedules of its checks that read Kafka
launch those jobs, so they come with them. A stream declared ``mode: continuous`` also gets its
continuous job and the sensor that keeps one run of it alive.

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
    kpis,
    outbound,
    sensors,
    silver,
)
from eos_assets.defs.stream import Stream


@dataclass(frozen=True)
class StreamParts:
    """Every definition of one stream, one field each (tools and tests run a part of them)."""

    stream: Stream
    raw_events: dg.AssetsDefinition
    events: dg.AssetsDefinition
    entity_state: dg.AssetsDefinition | None
    window_aggregates: dg.AssetsDefinition
    kpi_tables: dg.AssetsDefinition | None  # every gold/<kpi> kept from the events
    serving: dg.AssetsDefinition | None  # serving/kpis: the served KPI tables from the events
    sql_kpis: dg.AssetsDefinition | None  # every gold/<kpi> declared with SQL
    sql_serving: dg.AssetsDefinition | None  # serving/sql_kpis: the served SQL KPI tables
    kpi_alerts: dg.AssetsDefinition | None
    agg_out: dg.AssetsDefinition
    bronze_checks: list[dg.AssetChecksDefinition]
    derived_checks: list[dg.AssetChecksDefinition]
    agg_out_check: dg.AssetChecksDefinition
    # duckdb_matches_delta of serving/kpis and of serving/sql_kpis, the alerts' check
    kpi_checks: list[dg.AssetChecksDefinition]
    lag_sensor: dg.SensorDefinition

    @property
    def downstream(self) -> list[dg.AssetsDefinition]:
        """Every asset downstream of bronze."""
        optional = [
            self.entity_state,
            self.kpi_tables,
            self.sql_kpis,
            self.serving,
            self.sql_serving,
            self.kpi_alerts,
        ]
        return [
            self.events,
            self.window_aggregates,
            self.agg_out,
            *(a for a in optional if a is not None),
        ]

    @property
    def checks(self) -> list[dg.AssetChecksDefinition]:
        return [*self.bronze_checks, *self.derived_checks, self.agg_out_check, *self.kpi_checks]


def build(model: StreamModel) -> StreamParts:
    """Every definition of the stream, built from its declaration."""
    stream = Stream.of(model)
    agg_out, agg_out_check = outbound.agg_out_assets(stream)
    alerts = kpis.alert_assets(stream)
    served = (kpis.serving_check(stream, kpis.EVENTS), kpis.serving_check(stream, kpis.SQL))
    kpi_checks = [c for c in (*served, alerts and alerts[1]) if c is not None]
    return StreamParts(
        stream=stream,
        raw_events=bronze.raw_events_asset(stream),
        events=silver.events_asset(stream),
        entity_state=silver.entity_state_asset(stream) if stream.entity is not None else None,
        window_aggregates=gold.window_assets(stream),
        kpi_tables=kpis.kpi_tables_asset(stream),
        serving=kpis.serving_asset(stream),
        sql_kpis=kpis.sql_kpis_asset(stream),
        sql_serving=kpis.serving_asset(stream, kpis.SQL),
        kpi_alerts=alerts and alerts[0],
        agg_out=agg_out,
        bronze_checks=checks.bronze_checks(stream),
        derived_checks=derived_checks.derived_checks(stream),
        agg_out_check=agg_out_check,
        kpi_checks=kpi_checks,
        lag_sensor=sensors.lag_sensor(stream),
    )


def definitions(model: StreamModel) -> dg.Definitions:
    """The stream's assets, checks and job ``<stream>__ingest_and_refresh`` (and, continuous,
    its continuous job and keeper sensor).

    Its lag sensor and schedules launch the jobs over every stream, so they are built with
    those, once, with the automation sensor (``shared.build_shared``).
    """
    parts = build(model)
    # Everything downstream of bronze follows it (declarative automation), but on a continuous
    # stream: its continuous run carries the path to the served KPIs, and the lag sensor's
    # rest runs the publishers (``continuous_sensor.rest_request``).
    follow = parts.downstream
    if not parts.stream.continuous:
        follow = dg.map_asset_specs(
            lambda spec: spec.replace_attributes(automation_condition=automation.FOLLOW_UPSTREAM),
            parts.downstream,
        )
    stream_jobs: list[dg.JobDefinition | dg.UnresolvedAssetJobDefinition] = [
        jobs.stream_job(parts.stream)
    ]
    sensors: list[dg.SensorDefinition] = []
    if parts.stream.continuous:
        job = continuous.continuous_job(parts.stream)
        stream_jobs.append(job)
        sensors.append(continuous_sensor.keeper_sensor(parts.stream, job))
    return dg.Definitions(
        assets=[parts.raw_events, *follow],
        asset_checks=parts.checks,
        sensors=sensors,
        jobs=stream_jobs,
    )


def tables(model: StreamModel) -> list[dg.AssetKey]:
    """The stream's Delta tables, maintained daily."""
    stream = Stream.of(model)
    keys = [stream.raw_events, stream.events, stream.window_aggregates, stream.late_events]
    if stream.entity is not None:
        keys.append(stream.entity_state)
    for spec in stream.kpi_specs:
        keys.append(stream.kpi_key(spec.name))
        if spec.distinct:
            keys.append(stream.distinct_key(spec.name))
    return keys
