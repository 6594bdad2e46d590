"""Real-service fixtures: one Kafka broker per test session, fresh topics, a committed reader.

``EOS_KAFKA_BOOTSTRAP`` points the tests at a Kafka of your own; otherwise one embedded broker
is started for the session in a temporary folder and stopped with SIGTERM at the end.
"""

import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from eos_assets.devkit import broker
from eos_assets.settings import Settings

# (partition, offset, key, value) of one record read back.
ReadRecord = tuple[int, int, bytes | None, bytes | None]

# The other real-service fixtures (a SparkSession, a lake root, an S3 server) live next to
# this file.
pytest_plugins = [
    "eos_assets_tests.support.plugins",
    "eos_assets_tests.support.cluster",
    "eos_assets_tests.support.s3",
]

_quiet = logging.getLogger("eos_assets_tests.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


# Fixtures that start or reach a real service: a test using one (directly or through another
# fixture) is marked ``services``, and ``make test-fast`` leaves it out.
SERVICE_FIXTURES = frozenset(
    {
        "kafka_bootstrap",
        "kafka_cluster",
        "spark",
        "spark_server",
        "dagster_dev",
        "chromium",
        "postgres",
        "s3_server",
    }
)
# Modules whose tests start a broker, a JVM or a Spark server of their own, without a fixture.
SERVICE_MODULES = frozenset(
    {"test_broker", "test_cli", "test_spark_cds", "test_spark_connect", "test_bronze_asset"}
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs a service (``make test-fast`` runs the others)."""
    for item in items:
        module = getattr(item, "module", None)
        own = module is not None and module.__name__.rpartition(".")[2] in SERVICE_MODULES
        if own or SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)


@pytest.fixture(scope="session")
def kafka_client_config() -> dict[str, str]:
    """Extra client properties (security) from ``EOS_KAFKA_*``; empty for the embedded broker."""
    return dict(Settings.from_env().kafka_client)


@pytest.fixture(scope="session")
def kafka_bootstrap(
    tmp_path_factory: pytest.TempPathFactory, kafka_client_config: dict[str, str]
) -> Iterator[str]:
    """Bootstrap servers of the session's broker: ``EOS_KAFKA_BOOTSTRAP`` or an embedded one."""
    external = os.environ.get("EOS_KAFKA_BOOTSTRAP")
    if external:
        broker.check_reachable(external, kafka_client_config)
        yield external
        return
    info = broker.start_broker(tmp_path_factory.mktemp("kafka"))
    try:
        yield info.bootstrap
    finally:
        broker.stop_broker(info)


@pytest.fixture
def make_topic(
    kafka_bootstrap: str, kafka_client_config: dict[str, str], request: pytest.FixtureRequest
) -> Callable[..., str]:
    """Factory: ``make_topic(partitions=3)`` creates a topic of its own; returns its name."""

    def make(partitions: int = 3) -> str:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80]
        name = f"{stem}-{uuid.uuid4().hex[:8]}"
        broker.ensure_topic(kafka_bootstrap, name, partitions, kafka_client_config)
        return name

    return make


@pytest.fixture
def read_committed(
    kafka_bootstrap: str, kafka_client_config: dict[str, str]
) -> Callable[..., list[ReadRecord]]:
    """Factory: ``read_committed(topic, starts=None)`` reads to the end as read_committed.

    ``starts`` maps partitions to first offsets (default: every partition from its beginning);
    partitions not in a given ``starts`` are not read.
    """

    def read(topic: str, starts: dict[int, int] | None = None, timeout: float = 30.0):
        consumer = Consumer(
            {
                **kafka_client_config,
                "bootstrap.servers": kafka_bootstrap,
                "group.id": f"test-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "logger": _quiet,
            }
        )
        try:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            if starts is None:
                starts = {p: 0 for p in partitions}
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10, cached=False)[1]
                for p in starts
            }
            pending = {p for p in starts if starts[p] < ends[p]}
            consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(pending)])
            records: list[ReadRecord] = []
            deadline = time.monotonic() + timeout
            while pending:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}: partitions {sorted(pending)} did not finish")
                for msg in consumer.consume(1000, 0.2):
                    err = msg.error()
                    if err is not None and err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    elif err is not None:
                        raise RuntimeError(err.str())
                    else:
                        partition, offset = msg.partition(), msg.offset()
                        assert partition is not None and offset is not None
                        records.append((partition, offset, msg.key(), msg.value()))
                for tp in consumer.position([TopicPartition(topic, p) for p in pending]):
                    if tp.offset >= ends[tp.partition]:
                        pending.discard(tp.partition)
            return records
        finally:
            consumer.close()

    return read
