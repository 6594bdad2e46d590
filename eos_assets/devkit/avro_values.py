"""Demo events as Avro values framed for a schema registry (``eos-assets produce --format avro``).

The producer plans its records as JSON, as always; each is then written again as an Avro record
of a schema made from the stream's declaration, and framed as the registry's serializers frame
it: the magic byte 0, the schema id in 4 big-endian bytes, the record. A seed therefore gives
the same events in both formats, and a duplicate keeps the same bytes.

The schema has one field per declared field and the optional ``schema_version`` every stream
may carry, each ``["null", type]`` with default null, so a record can lack any of them. A
malformed record keeps a defect of the same meaning:

- a JSON value that breaks the contract (no id, a time that does not parse, a value outside its
  declared values) is written with the same value, and one of a type Avro cannot hold (a
  number in a string) as null, which a required field refuses with the same code;
- ``invalid_utf8`` becomes ``not_framed`` (the JSON bytes, unframed), ``invalid_json``
  ``invalid_avro`` (a framed record cut in half), ``not_an_object`` ``unknown_schema_id`` (an
  id the registry never gave); the manifest names the new code.
"""

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import fastavro

from eos_assets.declaration import FieldType, StreamModel, TimeFormat
from eos_assets.devkit.events import Record, TransactionPlan
from eos_assets.lib.contract.contract import Malformed
from eos_assets.lib.contract.registry_fields import Framed
from eos_assets.lib.contract.schema_fields import SCHEMA_VERSION
from eos_assets.lib.schema_registry import RegistryConfig

# An id no registry gives out: ids count up from 1.
UNKNOWN_ID = 2**31 - 1
_TYPES = {
    FieldType.STRING: "string",
    FieldType.LONG: "long",
    FieldType.DOUBLE: "double",
    FieldType.BOOLEAN: "boolean",
    FieldType.TIMESTAMP: {"type": "long", "logicalType": "timestamp-micros"},
}
_TIMES = {TimeFormat.ISO8601: "string", TimeFormat.EPOCH_MILLIS: "long"}
_RECORD_CODES: dict[str, str] = {
    Malformed.INVALID_UTF8: Framed.NOT_FRAMED,
    Malformed.INVALID_JSON: Framed.INVALID_AVRO,
    Malformed.NOT_AN_OBJECT: Framed.UNKNOWN_SCHEMA_ID,
}


def _leaves(model: StreamModel) -> list[tuple[str, list[str], Any]]:
    """Each field an event carries: its JSON key, its path in the Avro record and its type."""
    leaves = [
        (model.event_id.field, model.event_id.field, "string"),
        (
            model.event_time.field,
            model.event_time.field,
            _TIMES.get(model.event_time.format, "double"),
        ),
        *[(name, spec.path or name, _TYPES[spec.type]) for name, spec in model.payload.items()],
        (SCHEMA_VERSION, SCHEMA_VERSION, "int"),
    ]
    return [(key, path.split("."), kind) for key, path, kind in leaves]


def schema_of(model: StreamModel) -> dict[str, Any]:
    """The Avro schema of ``model``'s events: its id, time and payload fields at their paths
    (names joined by dots make nested records), each optional."""
    tree: dict[str, Any] = {}
    for _, (*parents, leaf), kind in _leaves(model):
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = kind
    return _record(model.name, "", tree)


def _record(name: str, path: str, tree: dict[str, Any]) -> dict[str, Any]:
    fields = []
    for key, kind in tree.items():
        if isinstance(kind, dict) and "type" not in kind:
            kind = _record(name, f"{path}_{key}", kind)
        fields.append({"name": key, "type": ["null", kind], "default": None})
    return {"type": "record", "name": f"{name}{path}", "namespace": "eos_assets", "fields": fields}


@dataclass(frozen=True)
class AvroValues:
    """Writes a stream's JSON values as framed Avro records of one registered schema."""

    schema: dict[str, Any]
    schema_id: int
    leaves: tuple[tuple[str, tuple[str, ...], Any], ...]

    @classmethod
    def registered(cls, model: StreamModel, registry: RegistryConfig, topic: str) -> "AvroValues":
        """The writer of ``model``'s events, its schema registered under ``<topic>-value``.

        Raises:
            RegistryError: the registry did not answer or refused the schema.
        """
        schema = schema_of(model)
        schema_id = registry.register(f"{topic}-value", json.dumps(schema))
        return cls(schema, schema_id, tuple((k, tuple(p), t) for k, p, t in _leaves(model)))

    def transcode(self, plans: Iterator[TransactionPlan]) -> Iterator[TransactionPlan]:
        """``plans`` with every value written as Avro (see the module's docstring)."""
        parsed = fastavro.parse_schema(self.schema)
        for plan in plans:
            records = [self._record(record, parsed) for record in plan.records]
            yield TransactionPlan(plan.index, records, plan.abort)

    def _record(self, record: Record, parsed: Any) -> Record:
        value, code = record.value, record.malformed
        if value is None:
            return record
        if code == Malformed.INVALID_UTF8:
            return record._replace(malformed=_RECORD_CODES[code])
        if code == Malformed.INVALID_JSON:
            # The record the cut JSON began as is gone: any whole record, cut in half.
            body = self._body(parsed, {})
            return record._replace(
                value=self._frame(body[: len(body) // 2]), malformed=_RECORD_CODES[code]
            )
        payload = json.loads(value)
        if code == Malformed.NOT_AN_OBJECT:
            (payload,) = payload
            framed = self._frame(self._body(parsed, payload), UNKNOWN_ID)
            return record._replace(value=framed, malformed=_RECORD_CODES[code])
        return record._replace(value=self._frame(self._body(parsed, payload)))

    def _frame(self, body: bytes, schema_id: int | None = None) -> bytes:
        return b"\x00" + (schema_id or self.schema_id).to_bytes(4, "big") + body

    def _body(self, parsed: Any, payload: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, self._fitted(payload))
        return out.getvalue()

    def _fitted(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` in the shape of the schema: each declared JSON key's value at its path,
        null where its type cannot hold it."""
        fitted: dict[str, Any] = {}
        for key, (*parents, leaf), kind in self.leaves:
            node = fitted
            for parent in parents:
                node = node.setdefault(parent, {})
            node[leaf] = _fit(kind, payload.get(key))
        return fitted


def _fit(kind: Any, value: Any) -> Any:
    """``value`` as Avro ``kind`` holds it, or None when it cannot."""
    if value is None or isinstance(value, bool) != (kind == "boolean"):
        return None
    if kind == "string":
        return value if isinstance(value, str) else None
    if kind in ("int", "long"):
        return value if isinstance(value, int) else None
    if kind == "double":
        return float(value) if isinstance(value, int | float) else None
    if isinstance(kind, dict):  # a timestamp: ISO text in the JSON value
        try:
            return datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            return None
    return value
