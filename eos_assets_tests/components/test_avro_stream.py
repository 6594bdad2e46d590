"""A stream declared ``format: avro``: values framed by the session's real schema registry,
three versions of the schema in one topic, every record-level reason, materialized end to end
on the real broker, Spark, Delta and DuckDB, and the same tables as the same events in JSON.

The readings stream of ``test_third_stream`` with its id and device in a nested record
(``meta.id``, ``meta.device``) and its time an Avro ``timestamp-micros`` read as the declared
``epoch_seconds``. Version 2 adds an optional field with a default (it keeps flowing); version 3
drops the required ``celsius`` (its records are malformed, never null and valid). A quarter of
the valid records come from a producer that is not ours: Apache Avro's Java writer and Kafka's
Java producer (``deploy/peers/AvroFramedProducer.java``).
"""

import copy
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest
from deltalake import DeltaTable

from eos_assets.lib.ports import free_port
from eos_assets_tests.components.test_third_stream import START, declaration, readings
from eos_assets_tests.support.declared import Loader, produce_json, run_stream
from eos_assets_tests.support.registry import framed, java_framed, register

META = {"type": "record", "name": "Meta", "fields": [
    {"name": "id", "type": "string"}, {"name": "device", "type": "string"},
]}  # fmt: skip
AT = {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}}
V1 = {"type": "record", "name": "Reading", "namespace": "sensors", "fields": [
    {"name": "meta", "type": META}, AT, {"name": "celsius", "type": "double"},
    {"name": "ok", "type": ["null", "boolean"], "default": None},
]}  # fmt: skip
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": "string", "default": ""}]}
V3 = {**V1, "fields": [f for f in V1["fields"] if f["name"] != "celsius"]}


PLACES = (
    "topic", "partition", "offset", "kafka_timestamp", "bronze_version", "silver_version",
    "revision", "last_topic", "last_partition", "last_offset",
)  # fmt: skip


def avro_declaration(topic: str) -> dict[str, Any]:
    document = copy.deepcopy(declaration(topic))
    attributes = document["attributes"]
    attributes["format"] = "avro"
    attributes["event_id"] = {"field": "meta.id"}
    attributes["payload"]["device"]["path"] = "meta.device"
    return document


def record(event: dict[str, Any]) -> dict[str, Any]:
    at = datetime.fromtimestamp(event["at"], UTC)
    return {
        "meta": {"id": event["reading_id"], "device": event["device"]},
        "at": at,
        "celsius": event["celsius"],
        "ok": event["ok"],
    }


def avro_json(event: dict[str, Any]) -> str:
    """``record(event)`` in Avro's JSON encoding of ``V1`` (a union's value named by its
    branch), as the Java producer reads it."""
    micros = round(event["at"] * 1_000_000)
    return json.dumps({
        "meta": {"id": event["reading_id"], "device": event["device"]},
        "at": micros,
        "celsius": event["celsius"],
        "ok": {"boolean": event["ok"]},
    })  # fmt: skip


def tables(lake_root: str, parts: Any) -> dict[str, list[dict[str, Any]]]:
    stream = parts.stream
    keys = {
        "events": stream.events,
        "windows": stream.window_aggregates,
        "state": stream.entity_state,
    }
    found = {}
    for name, key in keys.items():
        rows = DeltaTable(f"{lake_root}/{'/'.join(key.path)}").to_pyarrow_table().to_pylist()
        for row in rows:  # where in Kafka and in the lake each row came from differs
            for column in PLACES:
                row.pop(column, None)
        found[name] = sorted(rows, key=repr)
    return found


def failure(result: dg.ExecuteInProcessResult) -> str:
    """The one line of the run's one failed step."""
    assert not result.success
    (failed,) = [e for e in result.all_events if e.is_step_failure]
    data = failed.step_failure_data
    error = data.user_failure_data.description if data.user_failure_data else None
    line = error or (data.error.message if data.error else "")
    assert line and "\n" not in line.strip(), line
    return line


@pytest.fixture
def registry_url(schema_registry: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("EOS_SCHEMA_REGISTRY_URL", schema_registry)
    return schema_registry


def test_an_avro_stream_gives_the_tables_of_its_json_twin_and_keeps_every_bad_record(
    load: Loader,
    kafka_bootstrap: str,
    make_topic,
    spark,
    registry_url: str,
    tmp_path: Path,
) -> None:
    avro_topic, json_topic = make_topic(partitions=2), make_topic(partitions=2)
    subject = f"{avro_topic}-value"
    ids = [register(registry_url, subject, v) for v in (V1, V2, V3)]
    foreign = register(registry_url, f"other-{uuid.uuid4().hex[:6]}-value", V1 | {"name": "X"})
    sent, valid = readings()
    json_valid = [v for v in sent if isinstance(v, dict) and v in valid]
    values = [  # versions 1 and 2 in turn, each framed with its own id
        framed(V1, record(v), ids[0]) if i % 2 else framed(V2, record(v) | {"note": "n"}, ids[1])
        for i, v in enumerate(json_valid)
    ]
    values[7] = framed(V1, record(json_valid[7]), foreign)  # an id outside the subject: fetched
    # Every fourth is written by Apache Avro's Java writer and Kafka's Java producer instead.
    java = [i for i in range(len(json_valid)) if i % 4 == 1]
    sent_by_java = java_framed(
        kafka_bootstrap, avro_topic, V1, ids[0], [avro_json(json_valid[i]) for i in java],
        tmp_path / "java",
    )  # fmt: skip
    assert sent_by_java == len(java)
    values = [v for i, v in enumerate(values) if i not in java]
    at = datetime.fromtimestamp(START, UTC) + timedelta(minutes=1)
    bad = {
        "invalid_celsius: celsius is missing or null": framed(
            V3, {"meta": {"id": "v3", "device": "d0"}, "at": at}, ids[2]
        ),
        "not_framed: the value starts with 0x7b, not the magic byte 0": b'{"reading_id": "x"}',
        "unknown_schema_id: the registry at "
        f"{registry_url} has no schema 2147483647": b"\x00\x7f\xff\xff\xff\x00",
        f"invalid_avro: the payload ends inside field celsius (schema {ids[0]})": framed(
            V1, record(json_valid[0]), ids[0]
        )[:-3],
    }
    values += bad.values()
    produce_json(kafka_bootstrap, avro_topic, values, partitions=2)
    produce_json(kafka_bootstrap, json_topic, json_valid, partitions=2)

    _, (avro_model,) = load({"readings": avro_declaration(avro_topic)})
    avro_lake, json_lake = str(tmp_path / "avro"), str(tmp_path / "json")
    parts, result = run_stream(avro_model, kafka_bootstrap, avro_lake, tmp_path / "avro.duckdb")
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    _, (json_model,) = load({"readings": declaration(json_topic)})
    json_parts, twin = run_stream(json_model, kafka_bootstrap, json_lake, tmp_path / "json.duckdb")
    assert twin.success

    bronze_uri = f"{avro_lake}/{'/'.join(parts.stream.raw_events.path)}"
    bronze = DeltaTable(bronze_uri).to_pyarrow_table().to_pylist()
    assert len(bronze) == len(values) + len(java)
    # Avro's binary encoding is canonical: the Java writer's bytes are fastavro's.
    raw = {r["value"] for r in bronze}
    assert {framed(V1, record(json_valid[i]), ids[0]) for i in java} <= raw
    errors = sorted(r["error"] for r in bronze if r["error"] is not None)
    assert errors == sorted(bad), errors
    assert {r["schema_id"] for r in bronze if r["error"] is None} == {*ids[:2], foreign}

    ours, theirs = tables(avro_lake, parts), tables(json_lake, json_parts)
    for name in ours:
        assert ours[name] == theirs[name], name
    query = "SELECT device, readings FROM readings.by_device ORDER BY device"
    with duckdb.connect(str(tmp_path / "avro.duckdb"), read_only=True) as con:
        served = con.execute(query).fetchall()
    with duckdb.connect(str(tmp_path / "json.duckdb"), read_only=True) as con:
        assert served == con.execute(query).fetchall() and served


def test_a_json_bronze_table_under_an_avro_declaration_is_refused_in_one_line(
    load: Loader, kafka_bootstrap: str, make_topic, spark, registry_url: str, tmp_path: Path
) -> None:
    topic = make_topic(partitions=1)
    produce_json(kafka_bootstrap, topic, readings()[1][:3], partitions=1)
    lake = str(tmp_path / "lake")
    _, (json_model,) = load({"readings": declaration(topic)})
    assert run_stream(json_model, kafka_bootstrap, lake, tmp_path / "w.duckdb")[1].success
    _, (avro_model,) = load({"readings": avro_declaration(topic)})
    _, result = run_stream(avro_model, kafka_bootstrap, lake, tmp_path / "w.duckdb")
    refused = "was written for a json stream and the declaration says format avro: ingest into"
    assert refused in failure(result)


def test_a_registry_that_is_gone_fails_bronze_in_one_line_and_commits_nothing(
    load: Loader,
    kafka_bootstrap: str,
    make_topic,
    spark,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = make_topic(partitions=1)
    produce_json(kafka_bootstrap, topic, [b"\x00\x00\x00\x00\x01\x00"], partitions=1)
    gone = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"  # nothing listens there
    monkeypatch.setenv("EOS_SCHEMA_REGISTRY_URL", gone)
    _, (model,) = load({"readings": avro_declaration(topic)})
    lake = str(tmp_path / "lake")
    parts, result = run_stream(model, kafka_bootstrap, lake, tmp_path / "w.duckdb")
    assert f"the schema registry at {gone} did not answer" in failure(result)
    bronze = DeltaTable(f"{lake}/{'/'.join(parts.stream.raw_events.path)}")
    assert bronze.to_pyarrow_table().num_rows == 0  # created, nothing committed


def _readme_example() -> tuple[str, str]:
    """The YAML declaration and the Python producer of the README's Avro example."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = text.split("### Avro values through a schema registry", 1)[1]
    yaml_text = section.split("<!-- avro-stream -->", 1)[1].split("```", 2)[1]
    code = section.split("<!-- avro-producer -->", 1)[1].split("```", 2)[1]
    return yaml_text.removeprefix("yaml\n"), code.removeprefix("python\n")


def test_the_readme_avro_example_as_written_serves_its_kpi(
    load: Loader,
    kafka_bootstrap: str,
    make_topic,
    spark,
    registry_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    declared, code = _readme_example()
    topic = make_topic(partitions=1)  # the example's topic, made unique for this test
    monkeypatch.setenv("EOS_KAFKA_BOOTSTRAP", kafka_bootstrap)
    exec(compile(code.replace('"payments"', f'"{topic}"'), "README.md", "exec"), {})
    _, (model,) = load({"payments": declared.replace("[payments]", f"[{topic}]")})
    warehouse = tmp_path / "serving.duckdb"
    _, result = run_stream(model, kafka_bootstrap, str(tmp_path / "lake"), warehouse)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    with duckdb.connect(str(warehouse), read_only=True) as con:
        served = con.execute(
            "SELECT method, payments, total FROM payments.by_method ORDER BY method"
        ).fetchall()
    card, transfer = range(0, 100, 2), range(1, 100, 2)
    assert served == [
        ("card", 50, sum(10.0 + n for n in card)),
        ("transfer", 50, sum(10.0 + n for n in transfer)),
    ]
