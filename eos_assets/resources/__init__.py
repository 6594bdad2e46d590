"""Dagster resources, built from the settings contract."""

import os

import dagster as dg

from eos_assets.lib import lake_store
from eos_assets.resources.alerts import AlertsResource
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import spark_resource
from eos_assets.resources.warehouse import WarehouseResource
from eos_assets.settings import Settings


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """Every resource the assets use, configured from ``settings``.

    Each stream reads its declared topics unless ``EOS_TOPICS`` names others.
    """
    return {
        "kafka": KafkaResource(
            bootstrap_servers=settings.kafka_bootstrap,
            topics=list(settings.topics) if settings.topics_from_env else None,
            sasl_password=dg.EnvVar("EOS_KAFKA_SASL_PASSWORD")
            if "sasl.password" in settings.kafka_client
            else None,
            agg_out_topic=settings.agg_out_topic,
        ),
        "alerts": AlertsResource(url=settings.alert_url),
        # Only what is not secret: delta-rs reads the lake's credentials from the environment.
        "lake": LakeResource(
            root=settings.lake_root,
            storage_options=lake_store.storage_options(settings.lake_root, os.environ),
        ),
        "pyspark": spark_resource(settings),
        "warehouse": WarehouseResource(path=settings.warehouse),
    }


# The resources built so far in this process, by their configuration (what their repr shows).
_BUILT: dict[str, dict[str, dg.ConfigurableResource]] = {}


def shared_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """``build_resources(settings)``, the same objects for the same configuration.

    ``dg.Definitions.merge`` takes a resource key bound by several definitions only when each
    binds the same object: the components of several streams bind these, and share them.
    """
    built = build_resources(settings)
    return dict(_BUILT.setdefault(repr(built), built))
