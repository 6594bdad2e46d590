"""Gold layer: a stream's event-time windows with grace, and the events that came late."""

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field, create_model
from pyspark.sql import SparkSession

from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.silver import Context, from_silver_metadata, run_or_fail
from eos_assets.defs.stream import Stream
from eos_assets.lib.derived.window_aggregates import WindowsOutcome, update_windows
from eos_assets.lib.derived.windows import WindowSpec
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import spark_session


def window_config(stream: Stream) -> type[dg.Config]:
    """The run config of the stream's windows: its declared size and grace, changeable per run."""
    return create_model(
        f"{stream.name}_window_config",
        __base__=dg.Config,
        __doc__="Tumbling event-time windows (defaults: the declared size and grace).",
        window_minutes=_minutes(stream.window.size, gt=0, description="Window size in minutes."),
        grace_minutes=_minutes(
            stream.window.grace,
            ge=0,
            description="A window is final once max event time seen minus this passes its end.",
        ),
    )


def _minutes(default: timedelta, **field: Any) -> tuple[type[float], Any]:
    """A run config field in minutes whose default is ``default``."""
    return (float, Field(default=default.total_seconds() / 60, **field))


def window_assets(stream: Stream) -> dg.AssetsDefinition:
    """``<stream>/gold/window_aggregates`` and ``late_events``: the declared windows."""
    dimensions = ", ".join(stream.windows.dimensions) or "window"
    measures = ", ".join(f"{m.name} ({m.agg})" for m in stream.windows.measures)
    WindowConfig = window_config(stream)

    @dg.multi_asset(
        name=stream.window_aggregates.to_python_identifier(),
        specs=stream.spark_tables(
            [stream.events],
            {
                stream.window_aggregates: f"Tumbling event-time windows per {dimensions}: "
                f"{measures}; revision, is_final, late events and the watermark.",
                stream.late_events: "Events that arrived for a window already final, with the "
                "watermark they missed; their windows were recomputed, never silently lost.",
            },
        ),
        op_tags=AFTER_SERVING,
    )
    @stream.keyed
    def window_aggregates(
        context: dg.AssetExecutionContext,
        config: WindowConfig,  # pyright: ignore[reportInvalidTypeForm] (the stream's class)
        lake: LakeResource,
        pyspark: LazyPySparkResource,
    ):
        """Recompute the windows touched by new silver rows; flag late events and final windows."""
        spec = WindowSpec(
            size=timedelta(minutes=config.window_minutes),
            grace=timedelta(minutes=config.grace_minutes),
        )
        outcome = run_or_fail(lambda: aggregate(stream, spark_session(pyspark), lake, spec))
        yield from window_events(stream, context, outcome, spec)

    return window_aggregates


def aggregate(
    stream: Stream,
    spark: SparkSession,
    lake: LakeResource,
    spec: WindowSpec,
    upto: int | None = None,
) -> WindowsOutcome:
    """Bring the stream's windows and late events up to silver version ``upto`` (None: the
    latest)."""
    return update_windows(
        spark,
        stream.windows,
        stream.contract,
        lake.table_uri(*stream.events.path),
        lake.table_uri(*stream.window_aggregates.path),
        lake.table_uri(*stream.late_events.path),
        spec,
        lake.storage_options,
        upto=upto,
    )


def window_events(
    stream: Stream, context: Context, outcome: WindowsOutcome, spec: WindowSpec
) -> Iterator[dg.MaterializeResult]:
    """The materializations of one update of the windows and the late events."""
    details = {
        "windows_recomputed": outcome.windows_recomputed,
        "windows_finalized": outcome.windows_finalized,
        "silver_rows_read_for_recompute": outcome.silver_rows_read,
        "late_events": outcome.late_events,
        "watermark": str(outcome.watermark) if outcome.watermark else None,
        "window_minutes": spec.size.total_seconds() / 60,
        "grace_minutes": spec.grace.total_seconds() / 60,
    }
    yield dg.MaterializeResult(
        asset_key=stream.window_aggregates,
        metadata=from_silver_metadata(context, outcome, details),
    )
    yield dg.MaterializeResult(
        asset_key=stream.late_events,
        metadata={"delta_version": outcome.late_version, "late_events": outcome.late_events},
    )
