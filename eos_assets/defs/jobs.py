"""Jobs named for what they do, over every declared stream.

A job selects the same layer of every stream; the lag sensor of a stream names its own assets
in each run it launches (``stream_selection``), so one job serves every stream.
"""

from collections.abc import Sequence

import dagster as dg

from eos_assets.defs.checks import FRESHNESS, KAFKA_AUDIT, scheduled_checks
from eos_assets.defs.maintenance import maintain_tables
from eos_assets.defs.stream import OUTBOUND, Stream

INGEST_JOB = "ingest_kafka_to_bronze"
STREAM_JOB = "ingest_and_refresh"
FRESHNESS_JOB = "check_bronze_freshness"
AUDIT_JOB = "audit_bronze_against_kafka"
MAINTENANCE_JOB = "maintain_delta_tables"
# The tag naming the stream a run was launched for.
STREAM_TAG = "eos/stream"


def stream_selection(stream: Stream) -> dg.AssetSelection:
    """One stream's ingest and everything downstream, without the checks that read Kafka."""
    return dg.AssetSelection.assets(stream.raw_events).downstream() - dg.AssetSelection.checks(
        *scheduled_checks(stream)
    )


def stream_job_name(stream: Stream) -> str:
    """The name of the job that runs one stream's graph: ``<stream>__ingest_and_refresh``."""
    return f"{stream.name}__{STREAM_JOB}"


def stream_job(stream: Stream):  # dagster does not export the type of the job
    """``<stream>__ingest_and_refresh``: one stream's ingest and everything downstream."""
    return dg.define_asset_job(
        stream_job_name(stream),
        selection=stream_selection(stream),
        tags={STREAM_TAG: stream.name},
        description=f"Ingest every new committed record of the stream {stream.name} into its "
        "bronze, exactly once, then bring its silver, gold, serving and outbound tables up to "
        "it in the same run (the other streams are left alone).",
    )


def build_jobs(streams: Sequence[Stream], tables: Sequence[dg.AssetKey]) -> list:
    """Every job, over the assets of ``streams``; maintenance over the Delta ``tables``."""
    bronze = dg.AssetSelection.assets(*(s.raw_events for s in streams))
    scheduled = dg.AssetSelection.checks(*(k for s in streams for k in scheduled_checks(s)))

    def checks(name: str) -> dg.AssetSelection:
        return dg.AssetSelection.checks(*(dg.AssetCheckKey(s.raw_events, name) for s in streams))

    @dg.job(name=MAINTENANCE_JOB, tags={"dagster/pool": "eos_maintenance"})
    def maintenance_job() -> None:
        """Compact small files, vacuum orphaned files and checkpoint the log of every table."""
        maintain_tables(tables, {s.name: s.resource_key("lake") for s in streams})()

    return [
        dg.define_asset_job(
            INGEST_JOB,
            # The checks that read Kafka run on their own schedules, not after every ingest.
            selection=bronze - scheduled,
            description="Read every new committed Kafka record into bronze, exactly once, then "
            "check its offsets (blocking) and its malformed rate.",
        ),
        dg.define_asset_job(
            STREAM_JOB,
            # What the lag sensors launch: one run, one SparkSession, from Kafka to the KPIs.
            selection=bronze.downstream() - scheduled,
            description="Ingest every new committed Kafka record into bronze, exactly once, then "
            "bring silver, gold, the DuckDB serving tables and the outbound publishers up to it "
            "in the same run (a failed blocking check stops what depends on it).",
        ),
        dg.define_asset_job(
            FRESHNESS_JOB,
            selection=checks(FRESHNESS),
            description="Warn when the oldest Kafka record not yet in bronze is older than the "
            "limit.",
        ),
        dg.define_asset_job(
            AUDIT_JOB,
            selection=checks(KAFKA_AUDIT),
            description="Re-read the retained Kafka log and compare it with bronze, offset by "
            "offset.",
        ),
        dg.define_asset_job(
            "refresh_silver_and_gold",
            selection=bronze.downstream(include_self=False),
            description="Bring silver, gold and the DuckDB serving tables up to the current "
            "bronze.",
        ),
        dg.define_asset_job(
            "materialize_all",
            selection=dg.AssetSelection.all(),
            description="Materialize the whole asset graph, bronze to gold.",
        ),
        dg.define_asset_job(
            "publish_outbound",
            selection=dg.AssetSelection.groups(*(s.group(OUTBOUND) for s in streams)),
            description="Publish new window revisions to Kafka (exactly once) and deliver KPI "
            "alerts over HTTP (idempotency key, ledger), with their checks.",
        ),
        maintenance_job,
    ]
