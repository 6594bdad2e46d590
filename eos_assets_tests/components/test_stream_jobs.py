"""One stream at a time, and a stream whose topic does not exist yet.

Two streams are declared, ``readings`` on a topic with events and ``waiting`` on a topic nobody
created yet. The all-streams job ``ingest_and_refresh`` succeeds: it materializes ``readings``
and skips ``waiting`` with one line. The job ``readings__ingest_and_refresh`` then runs that
stream's graph alone. Real broker, Spark, Delta and DuckDB.
"""

import uuid
from pathlib import Path

import dagster as dg
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable

from eos_assets.components import builtin
from eos_assets.defs import jobs
from eos_assets.defs.stream import Stream
from eos_assets_tests.components.test_third_stream import readings
from eos_assets_tests.support import graph
from eos_assets_tests.support.declared import Loader, produce_json


def declaration(name: str, topic: str) -> dict:
    """A small stream of the readings: windows per device, no entity, no KPI."""
    return {
        "type": "eos_assets.components.EventStream",
        "attributes": {
            "name": name,
            "topics": [topic],
            "event_id": {"field": "reading_id"},
            "event_time": {"field": "at", "format": "epoch_seconds"},
            "payload": {"device": {"type": "string", "required": True}},
            "windows": {"dimensions": ["device"], "measures": {"readings": {"agg": "count"}}},
        },
    }


def _definitions(
    declared: dg.Definitions, models: list, bootstrap: str, lake_root: str, warehouse: Path
) -> dg.Definitions:
    """The declared streams with the jobs over all of them, on the test's resources."""
    streams = [Stream.of(model) for model in models]
    tables = [key for model in models for key in builtin.tables(model)]
    shared = dg.Definitions(
        jobs=jobs.build_jobs(streams, tables),
        resources=graph.resources(bootstrap, None, lake_root, warehouse),
        executor=dg.in_process_executor,
    )
    return dg.Definitions.merge(declared, shared)


def _materialized(result: dg.ExecuteInProcessResult) -> set[str]:
    return {
        e.step_materialization_data.materialization.asset_key.to_user_string()
        for e in result.get_asset_materialization_events()
    }


def test_a_stream_without_its_topic_is_skipped_and_one_stream_runs_by_name(
    load: Loader, kafka_bootstrap: str, make_topic, spark, lake_root: str, tmp_path: Path
) -> None:
    topic = make_topic(partitions=1)
    missing = f"waiting-{uuid.uuid4().hex[:8]}"
    declared, models = load(
        {"readings": declaration("readings", topic), "waiting": declaration("waiting", missing)}
    )
    _, valid = readings()
    produce_json(kafka_bootstrap, topic, valid[:30], partitions=1)
    defs = _definitions(declared, models, kafka_bootstrap, lake_root, tmp_path / "kpis.duckdb")
    instance = dg.DagsterInstance.ephemeral()

    every = defs.resolve_job_def(jobs.STREAM_JOB)
    result = every.execute_in_process(instance=instance, raise_on_error=False)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    done = _materialized(result)
    assert {"readings/bronze/raw_events", "readings/gold/window_aggregates"} <= done, done
    assert not any(key.startswith("waiting/") for key in done), done
    skipped = {e.step_key for e in result.all_events if e.event_type_value == "STEP_SKIPPED"}
    assert "waiting__silver__events" in skipped, skipped
    lines = [
        entry.user_message
        for entry in instance.all_logs(result.run_id)
        if entry.user_message.startswith("waiting: skipped")
    ]
    assert lines == [
        f"waiting: skipped: {missing!r} does not exist on {kafka_bootstrap} yet (the stream's "
        "first producer creates it)"
    ], lines
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert missing not in topics, "the skip must not create the topic"

    produce_json(kafka_bootstrap, topic, valid[30:], partitions=1)
    one = defs.resolve_job_def("readings__ingest_and_refresh")
    alone = one.execute_in_process(instance=instance, raise_on_error=False)
    assert alone.success, [e.message for e in alone.all_events if e.is_failure]
    steps = {e.step_key or "" for e in alone.all_events if e.event_type_value == "STEP_SUCCESS"}
    assert steps and all(s.startswith("readings__") for s in steps), steps
    assert alone.dagster_run.tags.get(jobs.STREAM_TAG) == "readings"
    uri = f"{lake_root}/readings/bronze/raw_events"
    assert DeltaTable(uri).to_pyarrow_table().num_rows == len(valid)
