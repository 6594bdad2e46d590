"""Where one stream runs, when not where the environment says: its own Kafka cluster, lake root
and DuckDB serving database (``kafka``, ``lake`` and ``warehouse`` in its ``defs.yaml``).

A declared field overrides its ``EOS_*`` variable for that stream only; what it leaves out comes
from the environment, as for every other stream. A stream that declares one of them binds its
own resource key for it (``kafka__<stream>``, ``lake__<stream>``, ``warehouse__<stream>``), the
key its assets, checks, sensor and jobs name; streams configured alike still share one object
(``resources.shared``). Spark is the project's: one session per run process serves every stream.
"""

import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Protocol

import dagster as dg
from pydantic import ConfigDict, Field

from eos_assets.lib import lake_store

# The resources a stream may configure itself, by the key every other stream uses.
OWN_KEYS = ("kafka", "lake", "warehouse")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SERVERS = re.compile(r"^[^\s,]+(,[^\s,]+)*$")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class _Strict(dg.Model, dg.Resolvable):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StreamKafka(_Strict):
    """This stream's Kafka cluster: its topics are read there and its window revisions
    published there; fields left out come from ``EOS_KAFKA_*``."""

    bootstrap_servers: str | None = Field(
        default=None,
        description="host:port[,host:port] of the cluster, in place of EOS_KAFKA_BOOTSTRAP",
    )
    security_protocol: str | None = Field(
        default=None,
        description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL: in place of "
        "EOS_KAFKA_SECURITY_PROTOCOL",
    )
    sasl_mechanism: str | None = Field(
        default=None,
        description="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 ...: in place of EOS_KAFKA_SASL_MECHANISM",
    )
    sasl_username: str | None = Field(
        default=None, description="in place of EOS_KAFKA_SASL_USERNAME"
    )
    sasl_password_env: str | None = Field(
        default=None,
        description="the environment variable holding the SASL password (read when a run or a "
        "sensor tick connects; a password is never declared)",
    )


class StreamLake(_Strict):
    """This stream's lake: its Delta tables are ``<root>/<stream>/<layer>/<table>``."""

    root: str = Field(
        description="local path or s3:// URI, in place of EOS_LAKE_ROOT (on S3 only when "
        "EOS_LAKE_ROOT is too: the project's Spark reads one store)"
    )


class StreamWarehouse(_Strict):
    """This stream's DuckDB serving database: its served KPIs are ``<stream>.<kpi>`` there."""

    path: str = Field(description="path of the DuckDB file, in place of EOS_WAREHOUSE")


class Declares(Protocol):
    """What a stream declares about where it runs (``StreamModel`` has these fields)."""

    @property
    def kafka(self) -> StreamKafka | None: ...
    @property
    def lake(self) -> StreamLake | None: ...
    @property
    def warehouse(self) -> StreamWarehouse | None: ...


def own_keys(model: Declares) -> tuple[str, ...]:
    """The resources the stream configures itself, by their shared keys."""
    return tuple(key for key in OWN_KEYS if getattr(model, key) is not None)


def kafka_fields(kafka: StreamKafka) -> dict[str, Any]:
    """The ``KafkaResource`` fields a stream declares (its password as a ``dg.EnvVar``)."""
    fields: dict[str, Any] = {
        name: value
        for name, value in kafka.model_dump(exclude={"sasl_password_env"}).items()
        if value is not None
    }
    if kafka.sasl_password_env is not None:
        fields["sasl_password"] = dg.EnvVar(kafka.sasl_password_env)
    return fields


def check_own(model: Declares, name: str, fail: Any) -> None:
    """Check what the stream ``name`` declares about where it runs, on its own.

    ``fail(field, problem, fix)`` raises the declaration's one-line error.
    """
    kafka = model.kafka
    if kafka is not None:
        if not any(v is not None for v in kafka.model_dump().values()):
            fail("kafka", "declares nothing", "set bootstrap_servers, or remove kafka")
        servers = kafka.bootstrap_servers
        if servers is not None and not _SERVERS.match(servers):
            fail("kafka.bootstrap_servers", f"{servers!r} is not a list of servers",
                 "write host:port, comma-separated, without spaces")  # fmt: skip
        protocol = kafka.security_protocol
        if protocol is not None and protocol not in _PROTOCOLS:
            fail("kafka.security_protocol", f"{protocol!r} is not a security protocol",
                 f"use one of {', '.join(_PROTOCOLS)}")  # fmt: skip
        env = kafka.sasl_password_env
        if env is not None and not _ENV_NAME.match(env):
            fail("kafka.sasl_password_env", f"{env!r} is not the name of a variable",
                 "name the variable holding the password, e.g. ORDERS_KAFKA_PASSWORD")  # fmt: skip
    if model.lake is not None:
        root = model.lake.root.strip()
        if not root:
            fail("lake.root", "is empty", "set a local path or an s3://<bucket>/<prefix> URI")
        if lake_store.is_s3(root) and not lake_store.bucket_of(root):
            fail("lake.root", f"{root!r} names no bucket", "write s3://<bucket>/<prefix>")
    if model.warehouse is not None:
        path = model.warehouse.path.strip()
        if not path:
            fail("warehouse.path", "is empty", "set the path of the stream's DuckDB file")
        # DuckDB names the database after the file: `<stream>.<kpi>` would name both.
        if PurePath(path).stem == name:
            fail("warehouse.path", f"the file {PurePath(path).name!r} is named like the stream, "
                 f"so DuckDB cannot tell the database from the schema {name}",
                 f"name the file otherwise, e.g. {name}_kpis.duckdb")  # fmt: skip


def check_store(model: Declares, project_root: str, fail: Any) -> None:
    """A stream's own lake is on the store of the project's (``EOS_LAKE_ROOT``): the one Spark
    session of a run reads one store (its s3a settings come from the project's lake)."""
    if (
        model.lake is not None
        and lake_store.is_s3(model.lake.root)
        and not lake_store.is_s3(project_root)
    ):
        fail("lake.root", f"{model.lake.root!r} is on S3 while EOS_LAKE_ROOT "
             f"({project_root!r}) is not, and the project's Spark reads one store",
             "set EOS_LAKE_ROOT on the same store, or give this stream a local lake")  # fmt: skip


def topic_home(model: Declares) -> str:
    """The cluster a stream's topics are named on, as declared ('' for the environment's)."""
    return (model.kafka.bootstrap_servers or "") if model.kafka is not None else ""


def by_key(resources: Mapping[str, Any], stream: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """A stream's own resources under the keys its definitions name (``<key>__<stream>``)."""
    return {own_key(key, stream): resources[key] for key in keys}


def own_key(key: str, stream: str) -> str:
    """The key of a resource a stream configures itself: ``<key>__<stream>``."""
    return f"{key}__{stream}"
