"""Jobs named for what they do."""

import dagster as dg

from eos_assets.defs.bronze import RAW_EVENTS

ingest_job = dg.define_asset_job(
    "ingest_kafka_to_bronze",
    selection=dg.AssetSelection.assets(RAW_EVENTS),
    description="Read every new committed Kafka record into bronze/raw_events, exactly once.",
)

all_assets_job = dg.define_asset_job(
    "materialize_all",
    selection=dg.AssetSelection.all(),
    description="Materialize the whole asset graph, bronze to gold.",
)
