"""Jobs named for what they do."""

import dagster as dg

from eos_assets.defs.bronze import RAW_EVENTS
from eos_assets.defs.checks import FRESHNESS_KEY, KAFKA_AUDIT_KEY, SCHEDULED_CHECKS
from eos_assets.defs.maintenance import maintain_tables

ingest_job = dg.define_asset_job(
    "ingest_kafka_to_bronze",
    # The checks that read Kafka run on their own schedules, not after every ingest.
    selection=dg.AssetSelection.assets(RAW_EVENTS) - dg.AssetSelection.checks(*SCHEDULED_CHECKS),
    description="Read every new committed Kafka record into bronze/raw_events, exactly once, "
    "then check its offsets (blocking) and its malformed rate.",
)

stream_job = dg.define_asset_job(
    "ingest_and_refresh",
    # What the lag sensor launches: one run, one SparkSession, from Kafka to the served KPIs.
    selection=dg.AssetSelection.assets(RAW_EVENTS).downstream()
    - dg.AssetSelection.checks(*SCHEDULED_CHECKS),
    description="Ingest every new committed Kafka record into bronze, exactly once, then bring "
    "silver, gold, the DuckDB serving tables and the outbound publishers up to it in the same "
    "run (a failed blocking check stops what depends on it).",
)

freshness_job = dg.define_asset_job(
    "check_bronze_freshness",
    selection=dg.AssetSelection.checks(FRESHNESS_KEY),
    description="Warn when the oldest Kafka record not yet in bronze is older than the limit.",
)

audit_job = dg.define_asset_job(
    "audit_bronze_against_kafka",
    selection=dg.AssetSelection.checks(KAFKA_AUDIT_KEY),
    description="Re-read the retained Kafka log and compare it with bronze, offset by offset.",
)

refresh_job = dg.define_asset_job(
    "refresh_silver_and_gold",
    selection=dg.AssetSelection.assets(RAW_EVENTS).downstream(include_self=False),
    description="Bring silver, gold and the DuckDB serving tables up to the current bronze.",
)

all_assets_job = dg.define_asset_job(
    "materialize_all",
    selection=dg.AssetSelection.all(),
    description="Materialize the whole asset graph, bronze to gold.",
)

outbound_job = dg.define_asset_job(
    "publish_outbound",
    selection=dg.AssetSelection.groups("outbound"),
    description="Publish new window revisions to Kafka (exactly once) and deliver KPI alerts "
    "over HTTP (idempotency key, ledger), with their checks.",
)


@dg.job(name="maintain_delta_tables", tags={"dagster/pool": "eos_maintenance"})
def maintenance_job() -> None:
    """Compact small files, vacuum orphaned files and checkpoint the log of every table."""
    maintain_tables()
