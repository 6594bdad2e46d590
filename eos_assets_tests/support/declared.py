"""Tests of declared streams: write declarations as a defs package, load them the way
``eos_assets.definitions`` loads ``eos_assets/streams``, and run one stream's definitions."""

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import dagster as dg
import yaml
from confluent_kafka import Producer

import eos_assets.streams
from eos_assets.components import builtin
from eos_assets.declaration import StreamModel
from eos_assets_tests.support import graph

Loader = Callable[..., tuple[dg.Definitions, list[StreamModel]]]
SHIPPED = Path(eos_assets.streams.__file__).parent / "orders" / "defs.yaml"


def orders() -> dict:
    """The shipped declaration of the orders stream, as a YAML document."""
    return yaml.safe_load(SHIPPED.read_text())


def produce_json(bootstrap: str, topic: str, values: Iterable[object], partitions: int) -> int:
    """Send ``values`` (JSON documents, or bytes as they are) round-robin over the partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    count = 0
    for i, value in enumerate(values):
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        producer.produce(topic, raw, partition=i % partitions)
        count += 1
    assert producer.flush(30) == 0
    return count


def run_stream(
    model: StreamModel, bootstrap: str, lake_root: str, warehouse: Path
) -> tuple[builtin.StreamParts, dg.ExecuteInProcessResult]:
    """Materialize every asset of one declared stream, with its checks, on real resources.

    The stream reads the topics its declaration names; the Spark resource reuses the session
    of the ``spark`` fixture.
    """
    parts = builtin.build(model)
    result = dg.materialize(
        [parts.raw_events, *parts.downstream, *parts.checks],
        resources=graph.resources(bootstrap, None, lake_root, warehouse),
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    return parts, result
