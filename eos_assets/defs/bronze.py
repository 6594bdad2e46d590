"""Bronze layer: every committed Kafka record, once per (topic, partition, offset)."""

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import dagster as dg
from confluent_kafka.admin import AdminClient
from dagster_pyspark import LazyPySparkResource
from deltalake.exceptions import TableNotFoundError
from pydantic import Field

from eos_assets.defs.stream import BRONZE, Stream
from eos_assets.lib.delta import delta_io
from eos_assets.lib.errors import BrokerError, EosError, TopicMissingError
from eos_assets.lib.ingest.ingest import IngestOptions, IngestOutcome, ingest_bronze
from eos_assets.lib.kafka.kafka_admin import quiet_logger, topic_metadata
from eos_assets.resources.kafka import KafkaResource, registry_config
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import spark_session

INGEST_POOL = "eos_ingest"
# Offsets (records and transaction markers) one ingest run reads at most, by default.
DEFAULT_MAX_RECORDS_PER_RUN = 2_000_000


class IngestConfig(dg.Config):
    """Run configuration of the ingest."""

    max_records_per_run: int | None = Field(
        default=DEFAULT_MAX_RECORDS_PER_RUN,
        description="Cap on offsets read in one run, shared fairly across partitions; it "
        "bounds a run's memory and time whatever the backlog (null: no cap). The lag sensor "
        "launches the next run while a backlog remains.",
    )
    read_timeout_s: float = Field(
        default=300.0, description="A range not read completely in this time fails the run."
    )
    accept_data_loss: bool = Field(
        default=False,
        description="Go past offsets Kafka deleted (retention, delete-records) before they "
        "were ingested, recording them as acknowledged loss (eos.lost in the Delta commit). "
        "Off: such a loss stops the run with one line naming them, nothing committed. Set it "
        "for the one run that accepts a loss, never as a default.",
    )


def raw_events_asset(stream: Stream) -> dg.AssetsDefinition:
    """``<stream>/bronze/raw_events``: the stream's topics, every committed record once."""

    @dg.asset(
        key=stream.raw_events,
        group_name=stream.group(BRONZE),
        kinds={"kafka", "spark", "delta"},
        pool=INGEST_POOL,
        # Skipped, with what follows it in the run, while none of its topics exists yet.
        output_required=False,
    )
    @stream.keyed
    def raw_events(
        context: dg.AssetExecutionContext,
        config: IngestConfig,
        kafka: KafkaResource,
        lake: LakeResource,
        pyspark: LazyPySparkResource,
    ) -> Iterator[dg.MaterializeResult]:
        """Every committed record of the stream's topics, exactly once, malformed ones flagged.

        Positions live in the Delta table's own ``txn`` actions (one per topic-partition); each
        run reads ``[position, last stable offset)`` with read_committed in Spark tasks and
        commits all rows and the new positions in one Delta commit. Kafka group commits are
        advisory only. Offsets Kafka deleted before they were read stop the run unless
        ``accept_data_loss``. While none of the stream's topics exists yet (a new stream, no
        producer yet) the asset and what follows it in the run are skipped, with one line.
        """
        table_uri = lake.table_uri(*stream.raw_events.path)
        options = IngestOptions(
            max_records=config.max_records_per_run,
            read_timeout_s=config.read_timeout_s,
            group_id=kafka.consumer_group,
            accept_data_loss=config.accept_data_loss,
            start=stream.start,
            asset=stream.raw_events.to_user_string(),
        )
        client_config = kafka.client_config()
        topics: list[str] = []
        try:
            topics = kafka.topics_for(stream.topics, stream.topic_pattern)
            if not topics and _holds_records(table_uri, lake.storage_options):
                raise dg.Failure(
                    description=f"{stream.name}: no topic matches topic_pattern "
                    f"{stream.topic_pattern!r} on {client_config.get('bootstrap.servers')}, "
                    f"but {stream.raw_events.to_user_string()} holds records read from it: "
                    "check EOS_KAFKA_BOOTSTRAP (another cluster?) and that the user may "
                    "DESCRIBE the topics"
                )
            if not topics:
                context.log.warning(
                    f"{stream.name}: skipped: no topic matches topic_pattern "
                    f"{stream.topic_pattern!r} yet"
                )
                return
            outcome = ingest_bronze(
                spark_session(pyspark),
                table_uri,
                topics,
                client_config,
                options,
                lake.storage_options,
                contract=stream.contract,
                registry=registry_config() if stream.contract.registry else None,
            )
        except TopicMissingError as exc:
            # A stream whose topics are not created yet is skipped; one that bronze has read
            # before has lost them (another cluster, a deleted topic): that fails.
            if _none_exists(topics, client_config) and not _holds_records(
                table_uri, lake.storage_options
            ):
                context.log.warning(
                    f"{stream.name}: skipped: {exc.topic!r} does not exist on {exc.bootstrap} yet "
                    "(the stream's first producer creates it)"
                )
                return
            raise dg.Failure(description=str(exc)) from exc
        except EosError as exc:
            raise dg.Failure(description=str(exc)) from exc
        yield dg.MaterializeResult(
            metadata=ingest_metadata(context.log, stream, outcome, table_uri)
        )

    return raw_events


def ingest_metadata(
    log: dg.DagsterLogManager, stream: Stream, outcome: IngestOutcome, table_uri: str
) -> dict[str, Any]:
    """The metadata of one ingest's materialization of bronze; what it passed over is logged."""
    lag = {f"{p.topic}[{p.partition}]": p.lag for p in outcome.plans}
    if outcome.version is None:
        log.info("nothing new to ingest")
    lost = [r.as_dict() for r in outcome.lost]
    skipped = [r.as_dict() for r in outcome.skipped]
    if skipped:
        log.info(
            f"started at the declared start {stream.start!r}: passed over "
            f"{outcome.skipped_offsets} retained offsets: {skipped}"
        )
    if lost:
        log.warning(
            f"acknowledged as lost: {outcome.lost_offsets} offsets Kafka deleted before they "
            f"were ingested: {lost}"
        )
    return {
        "records": outcome.records,
        "malformed": outcome.malformed,
        "lost_offsets": outcome.lost_offsets,
        "lost_ranges": dg.MetadataValue.json(lost),
        "skipped_offsets": outcome.skipped_offsets,
        "skipped_ranges": dg.MetadataValue.json(skipped),
        "delta_version": outcome.version,
        "ranges": dg.MetadataValue.json(outcome.ranges()),
        "lag_at_plan": dg.MetadataValue.json(lag),
        "attempts": outcome.attempts,
        "advisory_commit": outcome.advisory_committed,
        "seconds": dg.MetadataValue.json({k: round(v, 3) for k, v in outcome.seconds.items()}),
        "table_uri": table_uri,
    }


def _holds_records(table_uri: str, storage_options: Mapping[str, str]) -> bool:
    """Whether the bronze table at ``table_uri`` exists and holds data files."""
    try:
        return bool(delta_io.load(table_uri, storage_options).file_uris())
    except TableNotFoundError:
        return False


def _none_exists(topics: Sequence[str], client_config: Mapping[str, str]) -> bool:
    """Whether none of ``topics`` exists on the broker (False when it does not answer)."""
    bootstrap = client_config.get("bootstrap.servers", "")
    admin = AdminClient(dict(client_config), logger=quiet_logger(__name__))
    try:
        metadata = topic_metadata(admin, bootstrap, 10.0)
    except BrokerError:
        return False
    return not any(topic in metadata.topics for topic in topics)
