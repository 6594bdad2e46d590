"""The session's schema registry (the real Apicurio Registry of ``eos-assets registry up``) and
values framed for it as the registry's serializers frame them: by fastavro here, or by Apache
Avro's own Java writer in a program of its own (``java_framed``)."""

import io
import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

from eos_assets.devkit import registry
from eos_assets.lib.spark import jars
from eos_assets.lib.spark.java import compile_java, require_java
from eos_assets_tests.support import released

JAVA_PRODUCER = Path(__file__).resolve().parents[2] / "deploy" / "peers" / "AvroFramedProducer.java"
JAVA_USER = "the Avro producer in Java"


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of the Confluent API of one registry for the whole session."""
    info = registry.start_registry(tmp_path_factory.mktemp("registry"))
    stop = released.on_release("schema_registry", lambda: registry.stop_registry(info))
    try:
        yield info.url
    finally:
        stop()


def register(url: str, subject: str, schema: object, kind: str | None = None) -> int:
    """Register ``schema`` (Avro as parsed JSON, or the text of another ``kind``) under
    ``subject``; its id."""
    body: dict[str, object] = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
    if kind:
        body["schemaType"] = kind
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["id"]


def framed(schema: Any, record: object, schema_id: int) -> bytes:
    """``record`` written with the Avro ``schema`` (by fastavro) in the registry's wire format:
    the magic byte 0, the id in 4 big-endian bytes, the record."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def java_framed(
    bootstrap: str, topic: str, schema: Any, schema_id: int, records: list[str], work: Path
) -> int:
    """Send ``records`` (each in Avro's JSON encoding of ``schema``) to ``topic`` with Apache
    Avro's Java writer and Kafka's Java producer (``deploy/peers/AvroFramedProducer.java``),
    framed with ``schema_id``; the number the program says it sent."""
    classes = compile_java(JAVA_PRODUCER, jars.classpath("avro"), work / "classes", JAVA_USER)
    (work / "schema.avsc").write_text(json.dumps(schema))
    (work / "records.jsonl").write_text("\n".join(records) + "\n")
    args = {
        "bootstrap": bootstrap, "topic": topic, "schema": work / "schema.avsc",
        "id": schema_id, "input": work / "records.jsonl",
    }  # fmt: skip
    command = [require_java(JAVA_USER), "-cp", f"{classes}:{jars.classpath('avro')}"]
    command += ["AvroFramedProducer", *(f"{k}={v}" for k, v in args.items())]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.strip().splitlines()[-1])
