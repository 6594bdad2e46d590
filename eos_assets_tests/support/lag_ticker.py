"""Ticks of the orders stream's lag sensor, evaluated the way the daemon does."""

import dagster as dg

from eos_assets.resources import build_resources
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets.settings import Settings
from eos_assets_tests.support.orders import LAG_SENSOR, RAW_EVENTS, ingest_on_kafka_lag, stream_job


class Ticker:
    """Evaluates the sensor the way the daemon does: one tick at a time, cursor carried over."""

    def __init__(self, kafka: KafkaResource, lake: LakeResource) -> None:
        pyspark = build_resources(Settings.from_env())["pyspark"]
        self.resources = {"kafka": kafka, "lake": lake, "pyspark": pyspark}
        self.instance = dg.DagsterInstance.ephemeral()
        self.cursor: str | None = None

    def tick(self) -> dg.SensorResult:
        context = dg.build_sensor_context(
            instance=self.instance,
            cursor=self.cursor,
            sensor_name=LAG_SENSOR,
            resources=self.resources,
            repository_def=definitions().get_repository_def(),
        )
        result = ingest_on_kafka_lag(context)
        assert isinstance(result, dg.SensorResult)
        self.cursor = result.cursor
        return result


def definitions() -> dg.Definitions:
    """The code location's definitions (imported when first needed: they load the streams)."""
    from eos_assets.definitions import defs

    return defs


def stream_job_def() -> dg.JobDefinition:
    return definitions().resolve_job_def(stream_job.name)


def observed(result: dg.SensorResult) -> dict:
    (event,) = result.asset_events
    assert isinstance(event, dg.AssetObservation) and event.asset_key == RAW_EVENTS
    return {k: v.value for k, v in event.metadata.items()}


def skip_reason(result: dg.SensorResult) -> str:
    assert not result.run_requests and result.skip_reason is not None
    return result.skip_reason.skip_message or ""
