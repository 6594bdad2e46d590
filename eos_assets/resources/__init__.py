"""Dagster resources, built from the settings contract (and a stream's own declared settings)."""

import os
from collections.abc import Mapping
from typing import Any

import dagster as dg

from eos_assets.declared_resources import Declares, by_key, kafka_fields, own_keys
from eos_assets.lib import lake_store
from eos_assets.resources.alerts import AlertsResource
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import spark_resource
from eos_assets.resources.warehouse import WarehouseResource
from eos_assets.settings import Settings


def kafka_resource(settings: Settings, declared: Mapping[str, Any] | None = None) -> KafkaResource:
    """The Kafka resource of ``settings``, with the fields a stream declares in place of
    theirs.

    Each stream reads its declared topics unless ``EOS_TOPICS`` names others.
    """
    fields: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap,
        "topics": list(settings.topics) if settings.topics_from_env else None,
        "sasl_password": dg.EnvVar("EOS_KAFKA_SASL_PASSWORD")
        if "sasl.password" in settings.kafka_client
        else None,
        "agg_out_topic": settings.agg_out_topic,
    }
    return KafkaResource(**{**fields, **(declared or {})})


def lake_resource(root: str) -> LakeResource:
    """The lake at ``root``; only what is not secret: delta-rs reads the lake's credentials
    from the environment."""
    return LakeResource(root=root, storage_options=lake_store.storage_options(root, os.environ))


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """Every resource the assets use, configured from ``settings``."""
    return {
        "kafka": kafka_resource(settings),
        "alerts": AlertsResource(url=settings.alert_url),
        "lake": lake_resource(settings.lake_root),
        "pyspark": spark_resource(settings),
        "warehouse": WarehouseResource(path=settings.warehouse),
    }


# The resources built so far in this process, by key and configuration (what a repr shows).
_BUILT: dict[str, dg.ConfigurableResource] = {}


def _shared(key: str, resource: dg.ConfigurableResource) -> dg.ConfigurableResource:
    """The first resource built under ``key`` with ``resource``'s configuration."""
    return _BUILT.setdefault(f"{key} {resource!r}", resource)


def shared_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """``build_resources(settings)``, the same objects for the same configuration.

    ``dg.Definitions.merge`` takes a resource key bound by several definitions only when each
    binds the same object: the components of several streams bind these, and share them.
    """
    return {key: _shared(key, r) for key, r in build_resources(settings).items()}


def own_resources(settings: Settings, stream: str, model: Declares) -> dict[str, Any]:
    """The resources a stream configures itself (its ``kafka``, ``lake``, ``warehouse``),
    under its own keys (``kafka__<stream>``), the rest from ``settings``.

    Two streams that configure a resource alike get the same object (under their own keys).
    """
    built: dict[str, dg.ConfigurableResource] = {}
    if model.kafka is not None:
        built["kafka"] = kafka_resource(settings, kafka_fields(model.kafka))
    if model.lake is not None:
        built["lake"] = lake_resource(model.lake.root)
    if model.warehouse is not None:
        built["warehouse"] = WarehouseResource(path=model.warehouse.path)
    shared = {key: _shared(key, r) for key, r in built.items()}
    return by_key(shared, stream, own_keys(model))
