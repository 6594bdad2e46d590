"""Silver layer: deduplicated events and the state of every entity."""

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.stream import Stream
from eos_assets.lib.derived.entity_state import EntityStateOutcome, update_entity_state
from eos_assets.lib.derived.incremental import FromSilverOutcome, Outcome
from eos_assets.lib.derived.silver_events import EventsOutcome, update_events
from eos_assets.lib.errors import EosError, raised_in
from eos_assets.lib.spark.spark_modes import run_server_lost
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import spark_session

T = TypeVar("T")


def run_or_fail(step: Callable[[], T]) -> T:
    """Run ``step``; an error the user can fix fails the run with its one-line message, also
    when a Spark task raised it.

    A Spark Connect server that stopped answering under the step is one of them: the step has
    committed nothing (every table commits after Spark has computed), and the rerun after
    ``eos-assets spark up`` does the work.
    """
    try:
        return step()
    except EosError as exc:
        raise dg.Failure(description=str(exc)) from exc
    except PySparkException as exc:
        # Pages of gRPC or Java stack would only bury the line: the server's, or the one a
        # task raised (a store that stopped answering under its write, say).
        said = run_server_lost(exc) or raised_in(str(exc))
        if said is None:
            raise
        raise dg.Failure(description=str(said)) from None


def versions_json(versions: tuple[int, int] | None) -> dg.MetadataValue:
    """Upstream versions ``[first, last]`` consumed by a run (empty: none)."""
    return dg.MetadataValue.json(list(versions) if versions else [])


def seconds(values: dict[str, float]) -> dg.MetadataValue:
    """Durations as rounded JSON metadata."""
    return dg.MetadataValue.json({k: round(v, 3) for k, v in values.items()})


# What a table's metadata is logged through: an asset's step, or the loop of a continuous run.
Context = dg.AssetExecutionContext | dg.OpExecutionContext


def derived_metadata(
    context: Context,
    outcome: Outcome,
    upstream: str,
    details: Mapping[str, Any],
) -> dict[str, Any]:
    """A derived table's run metadata around its own ``details``; a run with nothing new logs so."""
    if outcome.consumed is None:
        context.log.info(f"no new {upstream} versions: nothing to do")
    return {
        "delta_version": outcome.version,
        f"{upstream}_versions_consumed": versions_json(outcome.consumed),
        **details,
        "attempts": outcome.attempts,
        "seconds": seconds(outcome.seconds),
    }


def from_silver_metadata(
    context: Context, outcome: FromSilverOutcome, details: Mapping[str, Any]
) -> dict[str, Any]:
    """``derived_metadata`` of a table derived from silver/events: the events in come first."""
    details = {"events_in": outcome.events, **details}
    return derived_metadata(context, outcome, "silver", details)


def events_metadata(context: Context, outcome: EventsOutcome) -> dict[str, Any]:
    """The metadata of one update of silver/events."""
    details = {
        "bronze_rows_in": outcome.bronze_rows,
        "malformed_excluded": outcome.malformed,
        "duplicates_in_batch": outcome.duplicates_in_batch,
        "duplicates_already_in_silver": outcome.duplicates_existing,
        "rows_inserted": outcome.inserted,
        "event_dates": dg.MetadataValue.json(outcome.dates),
        "silver_files_read_for_dedup": outcome.existing_files_read,
        "silver_rows_read_for_dedup": outcome.existing_rows_read,
        "files_written": outcome.files_written,
    }
    return derived_metadata(context, outcome, "bronze", details)


def events_asset(stream: Stream) -> dg.AssetsDefinition:
    """``<stream>/silver/events``: each valid event once, deduplicated by event id."""

    @stream.spark_table(stream.events, [stream.raw_events])
    def events(
        context: dg.AssetExecutionContext, lake: LakeResource, pyspark: LazyPySparkResource
    ) -> dg.MaterializeResult:
        """One row per event_id among valid bronze records: the first delivery wins.

        Reads only the bronze files added since the bronze version recorded in this table's
        ``txn`` action, drops malformed records, keeps the first delivery of each event
        (earliest bronze version, then lowest topic/partition/offset) and anti-joins it against
        the silver files of the same dates and event-time spans (insert-if-absent). Rows and the
        consumed version commit together.
        """
        outcome = run_or_fail(
            lambda: update_events(
                spark_session(pyspark),
                stream.contract,
                lake.table_uri(*stream.raw_events.path),
                lake.table_uri(*stream.events.path),
                lake.storage_options,
            )
        )
        return dg.MaterializeResult(metadata=events_metadata(context, outcome))

    return events


def entity_state_asset(
    stream: Stream, automation_condition: dg.AutomationCondition | None = None
) -> dg.AssetsDefinition:
    """``<stream>/silver/entity_state``: the stream's entity state, folded as declared."""
    spec = stream.entity
    if spec is None:
        raise ValueError(f"stream {stream.name} declares no entity")
    key = stream.entity_state
    folds = ", ".join(f"{f.name} ({f.fold})" for f in spec.folds)

    @stream.spark_table(
        key,
        [stream.events],
        op_tags=AFTER_SERVING,
        automation_condition=automation_condition,
        description=f"The state of each {spec.key}, folded from its events: {folds}. A "
        "commutative merge: a latest value comes from the entity's latest event by "
        "(event_time, topic, partition, offset), so out-of-order and replayed arrivals give "
        "the same state. Only the entities touched by new silver rows are read and merged.",
    )
    def entity_state(
        context: dg.AssetExecutionContext, lake: LakeResource, pyspark: LazyPySparkResource
    ) -> dg.MaterializeResult:
        outcome = run_or_fail(lambda: fold_entities(stream, spark_session(pyspark), lake))
        return dg.MaterializeResult(metadata=entity_state_metadata(context, outcome))

    return entity_state


def fold_entities(
    stream: Stream, spark: SparkSession, lake: LakeResource, upto: int | None = None
) -> EntityStateOutcome:
    """Fold the stream's silver events up to version ``upto`` (None: the latest) into its
    entity state."""
    assert stream.entity is not None
    return update_entity_state(
        spark,
        stream.entity,
        lake.table_uri(*stream.events.path),
        lake.table_uri(*stream.entity_state.path),
        lake.storage_options,
        upto=upto,
    )


def entity_state_metadata(context: Context, outcome: EntityStateOutcome) -> dict[str, Any]:
    """The metadata of one update of the entity state."""
    details = {
        "entities_touched": outcome.entities_touched,
        "entities_inserted": outcome.entities_inserted,
        "entities_updated": outcome.entities_updated,
        "files_rewritten_by_merge": outcome.files_rewritten,
        "rows_copied_by_merge": outcome.rows_copied,
    }
    return from_silver_metadata(context, outcome, details)
