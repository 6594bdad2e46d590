"""The configuration contract: one typed object read from ``EOS_*`` environment variables."""

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eos_assets.lib.checks.limits import Limits
from eos_assets.lib.errors import ConfigError

if TYPE_CHECKING:  # imported where used: it brings Delta and Arrow, which most commands skip
    from eos_assets.lib.outbound.alert_notify import DeliveryPolicy

# EOS_KAFKA_* variables that are settings of their own, not librdkafka client properties.
_KAFKA_RESERVED = {"EOS_KAFKA_BOOTSTRAP", "EOS_KAFKA_RETRY_SECONDS"}
# EOS_SPARK_CONNECT value for the local server that `eos-assets spark up` starts.
LOCAL_SPARK = "local"

# Where window revisions go unless EOS_AGG_OUT_TOPIC says otherwise: one topic per stream.
AGG_OUT_TOPIC = "{stream}-agg-out"


@dataclass(frozen=True)
class Settings:
    """Everything the product reads from the environment; all fields have local defaults.

    Attributes:
        kafka_bootstrap: Kafka bootstrap servers; None means "the embedded broker".
        topics: topics to ingest when ``EOS_TOPICS`` names them (``topics_from_env``);
            otherwise the declared stream's topics are (``orders`` for the tools that run
            without the definitions: the demo producer, the bench).
        topics_from_env: ``EOS_TOPICS`` is set and overrides the declared topics.
        lake_root: root of the Delta tables (local path or object-store URI).
        warehouse: path of the DuckDB serving database.
        spark_master: Spark master URL (of the in-process session, and of the local Spark
            Connect server's own context).
        spark_connect: where runs get Spark: None for a classic in-process session,
            ``"local"`` for the server of ``eos-assets spark up`` (looked up when a run first
            uses Spark), or a remote Spark Connect URL (``sc://host:port``).
        state_dir: where the embedded broker keeps its data and address file.
        kafka_client: extra librdkafka properties from ``EOS_KAFKA_<NAME>`` variables
            (``EOS_KAFKA_SASL_MECHANISM`` -> ``sasl.mechanism``).
        agg_out_topic: Kafka topic that window revisions are published to; ``{stream}`` in
            it stands for the stream's name (``KafkaResource.agg_out_topic_of``).
        alert_url: HTTP endpoint that KPI alerts are delivered to; None records them only.
        schema_registry_url: the schema registry of registry-framed streams (the base URL of
            its Confluent API); None: the local one of ``eos-assets registry up``.
        schema_registry_username: its basic-auth user (with ``schema_registry_password``).
    """

    kafka_bootstrap: str | None = None
    topics: tuple[str, ...] = ("orders",)
    topics_from_env: bool = False
    lake_root: str = ".eos/lake"
    warehouse: str = ".eos/warehouse.duckdb"
    spark_master: str = "local[*]"
    spark_connect: str | None = None
    state_dir: str = ".eos"
    kafka_client: Mapping[str, str] = field(default_factory=dict)
    agg_out_topic: str = AGG_OUT_TOPIC
    alert_url: str | None = None
    schema_registry_url: str | None = None
    schema_registry_username: str | None = None
    schema_registry_password: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        """Read the settings from ``env`` (default: the process environment)."""
        env = os.environ if env is None else env
        topics = tuple(t.strip() for t in env.get("EOS_TOPICS", "orders").split(",") if t.strip())
        if not topics:
            raise ConfigError("EOS_TOPICS is empty: set it to a comma-separated list of topics")
        return cls(
            kafka_bootstrap=env.get("EOS_KAFKA_BOOTSTRAP") or None,
            topics=topics,
            topics_from_env="EOS_TOPICS" in env,
            lake_root=env.get("EOS_LAKE_ROOT") or ".eos/lake",
            warehouse=env.get("EOS_WAREHOUSE") or ".eos/warehouse.duckdb",
            spark_master=env.get("EOS_SPARK_MASTER") or "local[*]",
            spark_connect=_spark_connect(env.get("EOS_SPARK_CONNECT") or None),
            state_dir=env.get("EOS_STATE_DIR") or ".eos",
            kafka_client=kafka_client_properties(env),
            agg_out_topic=env.get("EOS_AGG_OUT_TOPIC") or AGG_OUT_TOPIC,
            alert_url=env.get("EOS_ALERT_URL") or None,
            schema_registry_url=env.get("EOS_SCHEMA_REGISTRY_URL") or None,
            schema_registry_username=env.get("EOS_SCHEMA_REGISTRY_USERNAME") or None,
            schema_registry_password=env.get("EOS_SCHEMA_REGISTRY_PASSWORD") or None,
        )

    def table_uri(self, *key: str) -> str:
        """Return the location of the Delta table of asset key ``key`` under the lake root."""
        # ``s3a://`` is an alias of ``s3://``, the scheme every engine reads (``lake_store``,
        # imported here: it brings Delta and Arrow, which most commands skip).
        from eos_assets.lib.lake_store import table_root

        root = table_root(self.lake_root.rstrip("/"))
        if "://" not in root:
            root = str(Path(root).resolve())
        return "/".join([root, *key])


def _spark_connect(value: str | None) -> str | None:
    if value is None or value == LOCAL_SPARK or value.startswith("sc://"):
        return value
    raise ConfigError(
        f"EOS_SPARK_CONNECT={value!r} is neither 'local' nor a Spark Connect URL: set it to "
        "'local' (the server of `eos-assets spark up`), to sc://host:port, or unset it"
    )


def kafka_client_properties(env: Mapping[str, str]) -> dict[str, str]:
    """Map ``EOS_KAFKA_SASL_MECHANISM=PLAIN`` style variables to librdkafka properties."""
    props: dict[str, str] = {}
    for name, value in env.items():
        if name.startswith("EOS_KAFKA_") and name not in _KAFKA_RESERVED:
            props[name.removeprefix("EOS_KAFKA_").lower().replace("_", ".")] = value
    return props


def read_limits(env: Mapping[str, str] | None = None, declared: Limits | None = None) -> Limits:
    """The thresholds of the checks and the lag sensor: ``EOS_<FIELD NAME>`` of ``Limits``.

    Read when a check or a sensor tick runs (default: the process environment). A variable
    that is set overrides ``declared`` (a stream's declared thresholds), which overrides the
    built-in defaults.

    Raises:
        ConfigError: a variable is not a positive number.
    """
    return replace(declared or Limits(), **_numbers(Limits, "EOS_", env))


def read_alert_policy(env: Mapping[str, str] | None = None) -> "DeliveryPolicy":
    """How KPI alerts are delivered: ``EOS_ALERT_<FIELD NAME>`` of ``DeliveryPolicy`` (the
    rules are declared with the stream).

    Raises:
        ConfigError: a variable is not a positive number.
    """
    from eos_assets.lib.outbound.alert_notify import DeliveryPolicy

    return DeliveryPolicy(**_numbers(DeliveryPolicy, "EOS_ALERT_", env))


def _numbers(kind: type, prefix: str, env: Mapping[str, str] | None) -> dict[str, Any]:
    """The fields of dataclass ``kind`` set by ``<prefix><FIELD NAME>`` variables."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for f in fields(kind):
        name = f"{prefix}{f.name.upper()}"
        raw = env.get(name)
        if not raw:
            continue
        whole = f.type in (int, "int")
        kind_of = "whole number" if whole else "number"
        try:
            value = int(raw) if whole else float(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a {kind_of}: fix or unset it") from None
        if value <= 0:
            raise ConfigError(f"{name}={raw!r} is not a positive {kind_of}: fix or unset it")
        values[f.name] = value
    return values


def read_agg_out_max_behind(env: Mapping[str, str] | None = None) -> int:
    """``EOS_AGG_OUT_MAX_BEHIND``: data-changing versions the publisher may lag (default 5).

    Raises:
        ConfigError: it is not a whole number >= 0.
    """
    raw = (os.environ if env is None else env).get("EOS_AGG_OUT_MAX_BEHIND") or "5"
    if not raw.isdigit():
        raise ConfigError(f"EOS_AGG_OUT_MAX_BEHIND={raw!r} is not a whole number: fix or unset it")
    return int(raw)


# eos_assets/settings.py -> the checkout that holds .jars (`make install`), when it is one.
_CHECKOUT_JARS = Path(__file__).resolve().parents[1] / ".jars"


def read_jars_root(env: Mapping[str, str] | None = None) -> Path:
    """``EOS_JARS_DIR``: the root of the jars ``eos-assets jars`` fetched.

    Unset, a checkout's ``.jars`` where ``make install`` put them, else the user's cache
    (``$XDG_CACHE_HOME/eos_assets/jars``, ``~/.cache/eos_assets/jars``): never the installed
    package's folder. An installation fact like ``JAVA_HOME``: read where a jar is needed, so
    an image that installed them elsewhere only sets the variable.
    """
    env = os.environ if env is None else env
    configured = env.get("EOS_JARS_DIR")
    if configured:
        return Path(configured).resolve()
    if _CHECKOUT_JARS.is_dir():
        return _CHECKOUT_JARS
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "eos_assets" / "jars"
