"""The session's schema registry (the real Apicurio Registry of ``eos-assets registry up``) and
values framed for it as the registry's serializers frame them."""

import io
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import fastavro
import pytest

from eos_assets.devkit import registry
from eos_assets_tests.support import released


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
