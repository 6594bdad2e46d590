"""Kafka client settings as a Dagster resource."""

from collections.abc import Sequence
from pathlib import Path

import dagster as dg
from pydantic import Field

from eos_assets.devkit import broker, registry
from eos_assets.lib.errors import ConfigError
from eos_assets.lib.kafka.kafka_admin import matching_topics
from eos_assets.lib.schema_registry import RegistryConfig
from eos_assets.settings import AGG_OUT_TOPIC, Settings

# Seconds to list the broker's topics for a topic pattern.
_LIST_TIMEOUT_S = 10.0


class KafkaResource(dg.ConfigurableResource):
    """Connection to the Kafka cluster the topics are read from.

    Extra librdkafka properties come from ``EOS_KAFKA_<NAME>`` variables at run time (for
    example ``EOS_KAFKA_SECURITY_PROTOCOL=SASL_SSL``), so secrets never appear in the config
    the UI shows; ``sasl_password`` is meant to be given as ``dg.EnvVar``.
    """

    bootstrap_servers: str | None = Field(
        default=None,
        description="Bootstrap servers; empty: the embedded broker of `eos-assets broker up`.",
    )
    security_protocol: str | None = Field(default=None, description="PLAINTEXT, SSL, SASL_SSL...")
    sasl_mechanism: str | None = Field(default=None, description="PLAIN, SCRAM-SHA-512, ...")
    sasl_username: str | None = Field(default=None, description="SASL user name.")
    sasl_password: str | None = Field(default=None, description="SASL password (use dg.EnvVar).")
    topics: list[str] | None = Field(
        default=None,
        description="Topics to ingest instead of the declared ones (EOS_TOPICS); only with "
        "one declared stream. Empty: each stream reads the topics its declaration names.",
    )
    consumer_group: str = Field(
        default="eos-assets",
        description="Group that receives the advisory offset commits (for lag tools).",
    )
    agg_out_topic: str = Field(
        default=AGG_OUT_TOPIC,
        description="Topic the window revisions are published to (EOS_AGG_OUT_TOPIC); {stream} "
        "in it stands for the stream's name.",
    )

    def agg_out_topic_of(self, stream: str) -> str:
        """The topic a stream's window revisions are published to."""
        return self.agg_out_topic.replace("{stream}", stream)

    def topics_for(self, declared: Sequence[str], pattern: str | None = None) -> list[str]:
        """The topics a stream reads: this resource's override, ``EOS_TOPICS``, ``declared``,
        or the topics that match the declared ``pattern`` now (a new one is read from the next
        run on).

        Raises:
            BrokerError: a pattern is declared and Kafka is unreachable.
        """
        if self.topics:
            return list(self.topics)
        settings = Settings.from_env()
        if settings.topics_from_env:
            return list(settings.topics)
        if pattern:
            return matching_topics(self.client_config(), pattern, _LIST_TIMEOUT_S)
        return list(declared)

    def client_config(self) -> dict[str, str]:
        """librdkafka properties for every client the product creates."""
        settings = Settings.from_env()
        config = dict(settings.kafka_client)
        config["bootstrap.servers"] = self.bootstrap_servers or bootstrap_servers(settings)
        for key, value in {
            "security.protocol": self.security_protocol,
            "sasl.mechanism": self.sasl_mechanism,
            "sasl.username": self.sasl_username,
            "sasl.password": self.sasl_password,
        }.items():
            if value:
                config[key] = value
        return config


def bootstrap_servers(settings: Settings) -> str:
    """The Kafka bootstrap servers: ``EOS_KAFKA_BOOTSTRAP``, or the embedded broker's address.

    Raises:
        BrokerError: neither is set up.
    """
    if settings.kafka_bootstrap:
        return settings.kafka_bootstrap
    return broker.embedded_bootstrap(Path(settings.state_dir))


def registry_config(settings: Settings | None = None) -> RegistryConfig:
    """The schema registry of registry-framed streams: ``EOS_SCHEMA_REGISTRY_URL`` (its user
    and password from ``EOS_SCHEMA_REGISTRY_USERNAME`` and ``_PASSWORD``, read at run time and
    never shown), else the local registry of ``eos-assets registry up``.

    Raises:
        ConfigError: neither is set up.
    """
    settings = settings or Settings.from_env()
    url = settings.schema_registry_url
    if url is None:
        local = registry.registry_status(Path(settings.state_dir))
        if local is None:
            raise ConfigError(
                "a stream is declared format avro and no schema registry is set: set "
                "EOS_SCHEMA_REGISTRY_URL, or start the local one with eos-assets registry up"
            )
        url = local.url
    return RegistryConfig(url, settings.schema_registry_username, settings.schema_registry_password)
