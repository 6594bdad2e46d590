"""The schema registry of streams whose values it frames: writer schemas by id, fetched once.

A read's driver fetches every version of each topic's value subject (``<topic>-value``, the
registry's default naming) before it reads anything, and ships them to its tasks in a
``SchemaBook``. A task asks the registry only for an id outside those subjects (a schema named
after its record, or another topic's), once per id per process: a schema id never changes what
it names. The registry is asked over the Confluent schema registry's REST API with basic auth
when a user is set, and a registry that does not answer, or refuses the credentials, fails
the read with one line naming its URL: only "no such schema" (HTTP 404) is an answer.
"""

import base64
import functools
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eos_assets.lib.contract.avro_careful import AvroInvalid, Reader, compile_schema
from eos_assets.lib.errors import RegistryError

TIMEOUT_S = 10.0
AVRO = "AVRO"


@dataclass(frozen=True)
class RegistryConfig:
    """Where the registry answers and who asks: ``url`` is the base of its Confluent API."""

    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def get(self, path: str) -> Any:
        """The JSON answer to ``GET url + path``; None for HTTP 404 (no such subject or id).

        Raises:
            RegistryError: the registry did not answer, refused the credentials, or failed.
        """
        return self._ask("GET", path)

    def register(self, subject: str, schema: str, kind: str = AVRO) -> int:
        """The id of ``schema`` (its text) under ``subject``, registered if it is new there.

        Raises:
            RegistryError: the registry did not answer, or refused the schema (one line with
                its answer: an incompatible version, say).
        """
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
        body = {"schema": schema, **({} if kind == AVRO else {"schemaType": kind})}
        return int(self._ask("POST", path, body)["id"])

    def _ask(self, method: str, path: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url.rstrip('/')}{path}", data, method=method)
        request.add_header("Accept", "application/vnd.schemaregistry.v1+json")
        if data is not None:
            request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        if self.username:
            token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.load(response)
        except urllib.error.HTTPError as failed:
            if failed.code == 404 and method == "GET":
                return None
            if failed.code in (401, 403):
                raise RegistryError(
                    f"the schema registry at {self.url} refused the credentials "
                    f"({failed.code}): check EOS_SCHEMA_REGISTRY_USERNAME and "
                    "EOS_SCHEMA_REGISTRY_PASSWORD"
                ) from None
            if method != "GET":
                answer = failed.read().decode(errors="replace").strip()[:300]
                raise RegistryError(
                    f"the schema registry at {self.url} refused {method} {path} "
                    f"(HTTP {failed.code}): {answer}"
                ) from None
            raise RegistryError(
                f"the schema registry at {self.url} failed GET {path} (HTTP {failed.code}): "
                "see its log, then run again; nothing was committed"
            ) from None
        except (OSError, ValueError) as failed:
            cause = getattr(failed, "reason", failed)
            raise RegistryError(
                f"the schema registry at {self.url} did not answer ({cause}): start it "
                "(eos-assets registry up) or fix EOS_SCHEMA_REGISTRY_URL; nothing was committed"
            ) from None


@dataclass(frozen=True)
class Schema:
    """One writer schema: its type (``AVRO``, ``PROTOBUF``, ``JSON``) and text."""

    type: str
    text: str


@dataclass(frozen=True)
class SchemaBook:
    """The writer schemas a read may meet, by id, and the registry to ask for any other."""

    registry: RegistryConfig
    schemas: tuple[tuple[int, Schema], ...] = ()

    def readers(self, ids: Iterable[int]) -> dict[int, Reader | None]:
        """The Avro reader of each id (None: the registry has no such schema).

        Raises:
            RegistryError: the registry was needed and did not answer.
        """
        known = dict(self.schemas)
        return {i: _reader(known.get(i) or _fetched(self.registry, i)) for i in set(ids)}

    def unknown(self, schema_id: int) -> str:
        """The detail of an id the registry does not have."""
        return f"the registry at {self.registry.url} has no schema {schema_id}"


def prefetch(registry: RegistryConfig, topics: Iterable[str]) -> SchemaBook:
    """Every version of the value subject of each topic (``<topic>-value``), by id.

    Raises:
        RegistryError: the registry did not answer.
    """
    found: dict[int, Schema] = {}
    for topic in topics:
        subject = urllib.parse.quote(f"{topic}-value", safe="")
        for version in registry.get(f"/subjects/{subject}/versions") or []:
            entry = registry.get(f"/subjects/{subject}/versions/{version}")
            if entry is not None:
                found[int(entry["id"])] = _schema(entry)
                _remember(registry, int(entry["id"]), found[int(entry["id"])])
    return SchemaBook(registry, tuple(sorted(found.items())))


def _schema(entry: Mapping[str, Any]) -> Schema:
    return Schema(type=str(entry.get("schemaType") or AVRO), text=str(entry["schema"]))


# Schemas fetched by this process, by registry and id: ids are immutable.
_FETCHED: dict[tuple[str, int], Schema | None] = {}
_LOCK = threading.Lock()


def _remember(registry: RegistryConfig, schema_id: int, schema: Schema | None) -> None:
    with _LOCK:
        _FETCHED[(registry.url, schema_id)] = schema


def _fetched(registry: RegistryConfig, schema_id: int) -> Schema | None:
    with _LOCK:
        if (registry.url, schema_id) in _FETCHED:
            return _FETCHED[(registry.url, schema_id)]
    entry = registry.get(f"/schemas/ids/{schema_id}")
    schema = None if entry is None else _schema(entry)
    _remember(registry, schema_id, schema)
    return schema


def _reader(schema: Schema | None) -> Reader | None:
    if schema is None:
        return None
    if schema.type != AVRO:
        return functools.partial(_other_type, schema.type)
    return _compiled(schema.text)


@functools.lru_cache(maxsize=256)
def _compiled(text: str) -> Reader:
    return compile_schema(json.loads(text))


def _other_type(kind: str, data: bytes, pos: int) -> tuple[Any, int]:
    raise AvroInvalid(f"the schema is {kind}, not AVRO")
