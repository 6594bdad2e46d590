"""Outbound path of every stream: window revisions to Kafka, exactly once.

``<stream>/outbound/agg_out`` publishes every new revision of the stream's
``gold/window_aggregates`` to the topic ``<stream>-agg-out`` (``EOS_AGG_OUT_TOPIC`` overrides;
``{stream}`` in it stands for the name) in Kafka transactions that also carry the publisher's
position (``eos_assets/lib/outbound/outbound_publish.py``). KPI alerts over HTTP belong to the
declared KPIs (``kpis.py``).
"""

import dagster as dg
from deltalake.exceptions import TableNotFoundError
from pydantic import Field

from eos_assets.defs.automation import check_with_asset
from eos_assets.defs.checks import check_result
from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.silver import run_or_fail
from eos_assets.defs.stream import OUTBOUND, Stream
from eos_assets.lib.errors import EosError
from eos_assets.lib.outbound import outbound_publish
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets.settings import read_agg_out_max_behind

# One publisher at a time: runs may overlap (the lag sensor launches the next ingest once a
# run has served its KPIs), and a second agg_out run would fence the first one (both have the
# same transactional.id), failing it.
OUTBOUND_POOL = "eos_outbound"
AGG_OUT_CAUGHT_UP = "caught_up_with_window_aggregates"


class AggOutConfig(dg.Config):
    """Publication of window revisions."""

    partitions: int = Field(default=3, ge=1, description="Partitions of a topic it creates.")
    max_records_per_transaction: int = Field(
        default=10_000, ge=1, description="Records per Kafka transaction (whole versions)."
    )


def agg_out_assets(stream: Stream) -> tuple[dg.AssetsDefinition, dg.AssetChecksDefinition]:
    """``<stream>/outbound/agg_out`` and its check: window revisions to Kafka, exactly once."""

    @dg.asset(
        key=stream.agg_out,
        deps=[stream.window_aggregates],
        group_name=stream.group(OUTBOUND),
        kinds={"kafka", "delta"},
        op_tags=AFTER_SERVING,
        pool=OUTBOUND_POOL,
    )
    @stream.keyed
    def agg_out(
        config: AggOutConfig, lake: LakeResource, kafka: KafkaResource
    ) -> dg.MaterializeResult:
        """Every new revision of the stream's window_aggregates in Kafka, once.

        Records and the publisher's position (last Delta version published, in the topic
        ``<topic>.position``) are committed in one Kafka transaction under one stable
        transactional.id per table and topic, so a new run fences a crashed or hung one; read with
        read_committed.
        """
        topic = kafka.agg_out_topic_of(stream.name)
        outcome = run_or_fail(
            lambda: outbound_publish.publish_windows(
                stream.windows,
                lake.table_uri(*stream.window_aggregates.path),
                kafka.client_config(),
                topic,
                config.partitions,
                config.max_records_per_transaction,
                lake.storage_options,
            )
        )
        return dg.MaterializeResult(
            metadata={
                "topic": topic,
                "table_version": outcome.table_version,
                "versions_published": dg.MetadataValue.json(
                    [outcome.first_version, outcome.last_version] if outcome.records else []
                ),
                "records": outcome.records,
                "transactions": outcome.transactions,
                "versions_without_data_change": dg.MetadataValue.json(
                    {str(k): v for k, v in outcome.skipped_versions.items()}
                ),
                "transactional_id": outcome.transactional_id,
                "seconds": round(outcome.seconds, 3),
            }
        )

    @check_with_asset(
        stream.agg_out,
        AGG_OUT_CAUGHT_UP,
        "The committed position of the agg-out publisher is at most EOS_AGG_OUT_MAX_BEHIND "
        "data-changing versions behind gold/window_aggregates (warns).",
        op_tags=AFTER_SERVING,
    )
    @stream.keyed
    def caught_up_with_window_aggregates(
        lake: LakeResource, kafka: KafkaResource
    ) -> dg.AssetCheckResult:
        """Warn when window revisions wait too long to reach Kafka."""
        topic = kafka.agg_out_topic_of(stream.name)
        try:
            limit = read_agg_out_max_behind()
            lag = outbound_publish.lag(
                lake.table_uri(*stream.window_aggregates.path),
                kafka.client_config(),
                topic,
                lake.storage_options,
            )
        except (EosError, OSError, TableNotFoundError) as exc:
            return warn(False, f"cannot compare agg-out with the table: {exc}", {})
        passed = len(lag.behind) <= limit
        return warn(
            passed,
            f"{len(lag.behind)} data-changing versions not published to {topic} (limit {limit})",
            {
                "published_version": lag.published,
                "table_version": lag.current,
                "versions_behind": dg.MetadataValue.json(lag.behind[:50]),
            },
        )

    return agg_out, caught_up_with_window_aggregates


def warn(passed: bool, description: str, metadata: dict) -> dg.AssetCheckResult:
    return check_result(passed, description, metadata, dg.AssetCheckSeverity.WARN)
