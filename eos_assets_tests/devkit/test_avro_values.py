"""``eos-assets produce --format avro``: the demo events of each shipped stream as Avro records
framed for the session's real schema registry, read by the product's registry decoder into the
bronze rows of the same events in JSON, every malformed record with the code the manifest
gives it."""

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from eos_assets import cli, examples
from eos_assets.declaration import StreamModel, ValueFormat, read_declaration
from eos_assets.devkit.avro_values import AvroValues, schema_of
from eos_assets.devkit.events import Mix, Record
from eos_assets.devkit.producer import PLANNERS, read_manifest
from eos_assets.lib.contract.contract import error_code
from eos_assets.lib.contract.schema import to_bronze_table
from eos_assets.lib.schema_registry import RegistryConfig, prefetch
from eos_assets.stream_specs import contract
from eos_assets_tests.support.committed import read_committed_records

START = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
MIX = Mix(duplicate_ratio=0.1, late_ratio=0.1, malformed_ratio=0.3)
# Where in Kafka and how a record was framed: not part of the event.
PLACES = {"topic", "partition", "offset", "kafka_timestamp", "key", "value", "schema_id", "error"}


def as_avro(model: StreamModel) -> StreamModel:
    return model.model_copy(update={"format": ValueFormat.AVRO})


def bronze(
    model: StreamModel, values: Sequence[bytes | None], registry: RegistryConfig, topic: str
) -> list[dict[str, Any]]:
    """The bronze rows of ``values`` read as ``model`` declares them."""
    n = len(values)
    book = prefetch(registry, [topic]) if model.format == ValueFormat.AVRO else None
    table: pa.Table = to_bronze_table(
        contract(model), topic, 0, range(n), [0] * n, [None] * n, values, book
    )
    return table.to_pylist()


@pytest.mark.parametrize("stream", list(PLANNERS))
def test_a_seed_gives_the_same_events_in_avro_and_every_defect_keeps_its_code(
    stream: str, schema_registry: str
) -> None:
    model = read_declaration(examples.shipped(stream))
    registry, topic = RegistryConfig(schema_registry), f"{stream}-{uuid.uuid4().hex[:8]}"
    writer = AvroValues.registered(model, registry, topic)
    plans = list(PLANNERS[stream](7, START, 800, 50, MIX))
    avro = [r for plan in writer.transcode(iter(plans)) for r in plan.records]
    again = [r for plan in writer.transcode(iter(plans)) for r in plan.records]
    records: list[Record] = [r for plan in plans for r in plan.records]
    assert again == avro and len(avro) == len(records) == 800

    as_json = bronze(model, [r.value for r in records], registry, topic)
    as_framed = bronze(as_avro(model), [r.value for r in avro], registry, topic)
    assert [error_code(row["error"]) for row in as_json] == [r.malformed for r in records]
    assert [error_code(row["error"]) for row in as_framed] == [r.malformed for r in avro]
    for json_row, avro_row, record in zip(as_json, as_framed, avro, strict=True):
        if record.malformed is None:
            assert {k: v for k, v in avro_row.items() if k not in PLACES} == {
                k: v for k, v in json_row.items() if k not in PLACES
            }
            assert avro_row["schema_id"] == writer.schema_id
    codes = {r.malformed for r in avro} - {None}
    moved = {r.malformed for r in records} - codes - {None}
    assert codes and not codes & {"invalid_utf8", "invalid_json", "not_an_object"}, codes
    assert moved <= {"invalid_utf8", "invalid_json", "not_an_object"}
    # A duplicate is the bytes of the event it repeats.
    first = {r.event_id: r.value for r in avro if r.kind in ("valid", "late")}
    assert all(r.value == first[r.event_id] for r in avro if r.kind == "duplicate")


def test_the_schema_of_a_declaration_nests_dotted_paths_and_makes_every_field_optional() -> None:
    model = read_declaration(examples.shipped("orders"))
    nested = model.model_copy(
        update={
            "payload": {
                **model.payload,
                "customer_id": model.payload["customer_id"].model_copy(
                    update={"path": "customer.id"}
                ),
            }
        }
    )
    schema = schema_of(nested)
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["event_time"]["type"] == ["null", "string"]
    assert fields["amount"]["type"] == ["null", "double"]
    customer = fields["customer"]["type"][1]
    assert customer["type"] == "record" and [f["name"] for f in customer["fields"]] == ["id"]
    assert all(f["default"] is None for f in schema["fields"])


def test_produce_format_avro_sends_framed_records_and_its_manifest_names_their_codes(
    schema_registry: str,
    kafka_bootstrap: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    topic = f"orders-avro-{uuid.uuid4().hex[:8]}"
    manifest = tmp_path / "manifest.jsonl"
    argv = [
        "produce", "--topic", topic, "--bootstrap", kafka_bootstrap, "--count", "300",
        "--seed", "3", "--malformed-ratio", "0.2", "--abort-ratio", "0.2", "--partitions", "1",
        "--format", "avro", "--registry", schema_registry, "--manifest", str(manifest),
    ]  # fmt: skip
    assert cli.main(argv) == 0
    assert "committed" in capsys.readouterr().out
    committed = [line for line in read_manifest(manifest) if line["status"] == "committed"]
    read = read_committed_records({"bootstrap.servers": kafka_bootstrap}, topic)
    assert [offset for _, offset, _, _ in read] == [line["offset"] for line in committed]

    model = as_avro(read_declaration(examples.shipped("orders")))
    values = [value for _, _, _, value in read]
    rows = bronze(model, values, RegistryConfig(schema_registry), topic)
    assert [error_code(row["error"]) for row in rows] == [line["malformed"] for line in committed]
    assert {line["malformed"] for line in committed} >= {None, "not_framed", "invalid_avro"}
