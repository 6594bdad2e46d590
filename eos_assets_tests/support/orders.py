"""The shipped orders stream's definitions, one object each, for tests that run a part of them.

Built by the same factories the code location uses (``components/builtin.py``), so a test
materializes exactly what the definitions hold.
"""

from typing import TypeVar

import dagster as dg

from eos_assets.components import builtin
from eos_assets.declaration import read_declaration
from eos_assets.defs import jobs, sensors
from eos_assets.defs.checks import FRESHNESS, KAFKA_AUDIT, MALFORMED_RATE, OFFSETS_CONTIGUOUS
from eos_assets.defs.derived_checks import EVENT_ID_UNIQUE, WINDOWS_RECONCILE
from eos_assets.defs.kpis import ALERTS_NOT_STUCK, SERVING_RECONCILE
from eos_assets.defs.maintenance import z_order
from eos_assets.defs.outbound import AGG_OUT_CAUGHT_UP
from eos_assets.defs.stream import ORDERS as STREAM
from eos_assets.streams import declaration

MODEL = read_declaration(declaration("orders"))

RAW_EVENTS = STREAM.raw_events
EVENTS = STREAM.events
ORDER_STATE = STREAM.entity_state
WINDOW_AGGREGATES = STREAM.window_aggregates
LATE_EVENTS = STREAM.late_events
SERVING_KPI = STREAM.kpis  # the served KPI tables kept from the events
SQL_SERVING = STREAM.sql_serving  # the served SQL KPI tables
REVENUE_BY_HOUR = STREAM.kpi_key("revenue_by_hour")  # a SQL KPI
AGG_OUT = STREAM.agg_out
KPI_WINDOW = STREAM.kpi_key("kpi_window")
KPI_DAILY = STREAM.kpi_key("kpi_daily")
KPI_WINDOW_DISTINCT = STREAM.distinct_key("kpi_window")
KPI_DAILY_DISTINCT = STREAM.distinct_key("kpi_daily")
KPI_ALERTS = STREAM.kpi_alerts

PARTS = builtin.build(MODEL)
T = TypeVar("T")


def present(part: T | None) -> T:
    """A part the orders stream has (its declaration has an entity, KPIs and alerts)."""
    assert part is not None
    return part


raw_events = PARTS.raw_events
events = PARTS.events
order_state = present(PARTS.entity_state)
window_aggregates = PARTS.window_aggregates
kpi_tables = present(PARTS.kpi_tables)  # kpi_window, kpi_daily and their distinct values
serving_kpi = present(PARTS.serving)
sql_kpis = present(PARTS.sql_kpis)  # revenue_by_hour, orders_by_status
sql_serving = present(PARTS.sql_serving)
agg_out, caught_up_with_window_aggregates = PARTS.agg_out, PARTS.agg_out_check
kpi_alerts = present(PARTS.kpi_alerts)
duckdb_matches_delta, sql_matches_delta, no_alert_stuck_in_flight = PARTS.kpi_checks
event_id_unique, final_windows_match_silver = PARTS.derived_checks
(
    offsets_contiguous,
    malformed_rate_below_threshold,
    fresh_within_max_age,
    matches_kafka_log,
) = PARTS.bronze_checks
ingest_on_kafka_lag = PARTS.lag_sensor

OFFSETS_CONTIGUOUS_KEY = dg.AssetCheckKey(RAW_EVENTS, OFFSETS_CONTIGUOUS)
MALFORMED_RATE_KEY = dg.AssetCheckKey(RAW_EVENTS, MALFORMED_RATE)
FRESHNESS_KEY = dg.AssetCheckKey(RAW_EVENTS, FRESHNESS)
KAFKA_AUDIT_KEY = dg.AssetCheckKey(RAW_EVENTS, KAFKA_AUDIT)
EVENT_ID_UNIQUE_KEY = dg.AssetCheckKey(EVENTS, EVENT_ID_UNIQUE)
WINDOWS_RECONCILE_KEY = dg.AssetCheckKey(WINDOW_AGGREGATES, WINDOWS_RECONCILE)
SERVING_RECONCILE_KEY = dg.AssetCheckKey(SERVING_KPI, SERVING_RECONCILE)
AGG_OUT_CAUGHT_UP_KEY = dg.AssetCheckKey(AGG_OUT, AGG_OUT_CAUGHT_UP)
ALERTS_NOT_STUCK_KEY = dg.AssetCheckKey(KPI_ALERTS, ALERTS_NOT_STUCK)

TABLES = tuple(builtin.tables(MODEL))
Z_ORDER = {key: z_order(key) for key in TABLES if z_order(key)}
LAG_SENSOR = STREAM.named(sensors.LAG_SENSOR)
_JOBS = {job.name: job for job in jobs.build_jobs([STREAM], TABLES)}
ingest_job = _JOBS[jobs.INGEST_JOB]
stream_job = _JOBS[jobs.STREAM_JOB]
maintenance_job = _JOBS[jobs.MAINTENANCE_JOB]
