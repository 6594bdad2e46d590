"""Probes and topic creation that work with any Kafka broker (embedded or real)."""

import logging
import re
import socket
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ClusterMetadata,  # pyright: ignore[reportPrivateImportUsage] (documented; the stub hides it)
)
from confluent_kafka.cimpl import NewTopic  # the documented admin module's stub hides it

from eos_assets.lib.errors import BrokerError, BrokerUnreachable

# The topic and transactional id that probe_transactions uses.
READY_TOPIC = "__eos_assets_ready"
# Suffixes of the topics the product writes: never read as a stream's input.
_OWN = ("-agg-out", ".position")
_START_OR_FIX = "start it (`eos-assets broker up`) or fix EOS_KAFKA_BOOTSTRAP"


def quiet_logger(module: str) -> logging.Logger:
    """The logger for the librdkafka clients of ``module``: it drops what they log.

    A client of a broker that is down or that fenced it logs every failed connect (every
    50 ms); its caller raises one clear line instead.
    """
    quiet = logging.getLogger(f"{module}.librdkafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    return quiet


# A probe of a broker that is down is expected to fail: the caller raises one clear line.
_quiet = quiet_logger(__name__)


def probe(
    bootstrap: str,
    client_config: Mapping[str, str] | None,
    timeout: float,
    errors: list[KafkaError] | None = None,
) -> bool:
    """Return True when the broker answers a metadata request within ``timeout`` seconds.

    ``errors`` receives what the client reported meanwhile (a failed authentication or TLS
    handshake), for the caller to name the cause.
    """
    config: dict[str, Any] = {**(client_config or {}), "bootstrap.servers": bootstrap}
    if errors is not None:
        config["error_cb"] = errors.append
    admin = AdminClient(config, logger=_quiet)
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException:
        # Serves error_cb: what the client reported (it may come a moment late).
        waited = time.monotonic() + 3.0
        while errors is not None and time.monotonic() < waited:
            admin.poll(0.2)
            if errors:
                break
        return False
    return True


def wait_ready(
    bootstrap: str, timeout: float = 30.0, client_config: Mapping[str, str] | None = None
) -> None:
    """Wait until the broker at ``bootstrap`` answers a metadata request.

    Raises:
        BrokerError: it did not answer within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if probe(bootstrap, client_config, max(0.1, min(remaining, 2.0))):
            return
        if time.monotonic() >= deadline:
            raise BrokerError(
                f"Kafka at {bootstrap} did not answer within {timeout:g}s: {_START_OR_FIX}"
            )
        time.sleep(0.1)


def check_reachable(
    bootstrap: str, client_config: Mapping[str, str] | None = None, timeout: float = 10.0
) -> None:
    """Fail fast with a one-line error when no broker answers at ``bootstrap``.

    A TCP connect to each bootstrap address comes first: librdkafka would keep retrying a
    refused connection until ``timeout``, while the socket says "refused" at once.

    Raises:
        BrokerUnreachable: nothing listens at any address, or the broker does not answer.
        BrokerError: the broker refused the client's credentials or certificates.
    """
    if not any(_connects(host, port, min(timeout, 3.0)) for host, port in _addresses(bootstrap)):
        raise BrokerUnreachable(f"Kafka at {bootstrap} is unreachable: {_START_OR_FIX}")
    errors: list[KafkaError] = []
    if not probe(bootstrap, client_config, timeout, errors):
        refused = security_failure(bootstrap, client_config or {}, errors)
        if refused:
            raise BrokerError(refused)
        raise BrokerUnreachable(
            f"Kafka at {bootstrap} accepts connections but did not answer within "
            f"{timeout:g}s: check that it is a Kafka broker and the EOS_KAFKA_* security settings"
        )


def security_failure(
    bootstrap: str, client_config: Mapping[str, str], errors: list[KafkaError]
) -> str | None:
    """The one line naming a failed authentication or TLS handshake among ``errors``."""
    for err in errors:
        text = err.str()
        if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            if "SSL handshake failed" in text or "certificate verify failed" in text:
                return _untrusted(bootstrap, text)
            user = client_config.get("sasl.username", "?")
            return (
                f"authentication failed for user {user} at Kafka {bootstrap}: check "
                "EOS_KAFKA_SASL_USERNAME, EOS_KAFKA_SASL_PASSWORD and EOS_KAFKA_SASL_MECHANISM"
            )
        if err.code() == KafkaError._SSL or "SSL handshake failed" in text:
            return _untrusted(bootstrap, text)
    return None


def not_authorized(
    client_config: Mapping[str, str], name: str, rights: str, kind: str = "topic"
) -> str:
    """``user bob is not authorized for topic orders ...: grant User:bob READ on topic
    orders``; ``kind`` names the resource (``transactional id``, say)."""
    user = client_config.get("sasl.username") or "this client"
    return (
        f"user {user} is not authorized for {kind} {name} on Kafka at "
        f"{client_config.get('bootstrap.servers', '?')}: grant User:{user} {rights} on {kind} "
        f'{name} (README, "A Kafka cluster")'
    )


def _untrusted(bootstrap: str, text: str) -> str:
    reason = text.rsplit(": ", 1)[-1][:200]
    return (
        f"the TLS handshake with Kafka at {bootstrap} failed ({reason}): set "
        "EOS_KAFKA_SSL_CA_LOCATION to the CA that signed the brokers' certificates"
    )


def ensure_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    client_config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    topic_config: Mapping[str, str] | None = None,
) -> int:
    """Create ``topic`` with ``partitions`` partitions unless it exists; return its count.

    ``topic_config`` holds topic settings for the creation (``cleanup.policy``, say). An
    existing topic is left as it is, whatever its partition count or settings: changing its
    partitions would move keys between them under running readers.

    Raises:
        BrokerError: the topic cannot be created or its partitions never all appear.
    """
    admin = _admin(bootstrap, client_config)
    existing = _partition_count(admin, bootstrap, topic, timeout)
    if existing:
        return existing
    settings = dict(topic_config or {})
    spec = NewTopic(topic, partitions, config=settings)
    future = admin.create_topics([spec], request_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except KafkaException as exc:
        # Another client may have created it in between: that is as good as creating it.
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            wanted = ", ".join(
                [f"{partitions} partition(s)", *[f"{k}={v}" for k, v in settings.items()]]
            )
            raise BrokerError(
                f"cannot create topic {topic} on Kafka at {bootstrap} ({exc.args[0].str()}): "
                f"create it yourself ({wanted}) or grant this client the right to create topics"
            ) from exc
    # Creation is acknowledged before every partition has a leader in the metadata.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        count = _partition_count(admin, bootstrap, topic, timeout)
        if count >= partitions:
            return count
        time.sleep(0.05)
    raise BrokerError(f"topic {topic} on Kafka at {bootstrap} lacks partitions after {timeout:g}s")


def probe_transactions(
    bootstrap: str, timeout: float = 60.0, client_config: Mapping[str, str] | None = None
) -> None:
    """Wait until a transaction commits and a read_committed consumer in a group reads it.

    A broker that answers metadata may still be loading its transaction and group
    coordinators; this returns once both serve, so the first real producer and reader work.

    Raises:
        BrokerError: that did not happen within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    config = {**(client_config or {}), "bootstrap.servers": bootstrap}
    ensure_topic(bootstrap, READY_TOPIC, 1, client_config, timeout)
    producer = Producer(
        {**config, "transactional.id": READY_TOPIC, "enable.idempotence": True},
        logger=_quiet,
    )
    sent: list[Message] = []
    try:
        producer.init_transactions(max(1.0, deadline - time.monotonic()))
        producer.begin_transaction()
        producer.produce(READY_TOPIC, b"ready", on_delivery=lambda _err, msg: sent.append(msg))
        producer.commit_transaction(max(1.0, deadline - time.monotonic()))
    except KafkaException as exc:
        raise BrokerError(
            f"Kafka at {bootstrap} does not complete a transaction within {timeout:g}s "
            f"({exc.args[0].str()}): see the broker's server.log"
        ) from exc
    offset = sent[0].offset() if sent and sent[0].error() is None else None
    if offset is None:
        raise BrokerError(f"Kafka at {bootstrap} did not acknowledge a transactional record")
    consumer = Consumer(
        {**config, "group.id": READY_TOPIC, "isolation.level": "read_committed",
         "enable.auto.commit": False},
        logger=_quiet,
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(READY_TOPIC, 0, offset)])
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None and msg.offset() == offset:
                consumer.commit(message=msg, asynchronous=False)
                return
    except KafkaException as exc:
        raise BrokerError(
            f"Kafka at {bootstrap} does not serve consumer groups ({exc.args[0].str()}): "
            "see the broker's server.log"
        ) from exc
    finally:
        consumer.close()
    raise BrokerError(f"Kafka at {bootstrap} did not return a committed record in {timeout:g}s")


def matching_topics(client_config: Mapping[str, str], pattern: str, timeout: float) -> list[str]:
    """The topics whose whole name matches ``pattern``, sorted.

    Kafka's internal topics (``__*``) and the topics the product itself writes (window
    revisions ``*-agg-out`` and publisher positions ``*.position``) never match.

    Raises:
        BrokerError: Kafka is unreachable.
    """
    bootstrap = client_config.get("bootstrap.servers", "")
    metadata = topic_metadata(AdminClient(dict(client_config), logger=_quiet), bootstrap, timeout)
    regex = re.compile(pattern)
    return sorted(
        name
        for name in metadata.topics
        if regex.fullmatch(name) and not name.startswith("__") and not name.endswith(_OWN)
    )


def topic_metadata(
    client: AdminClient | Consumer, bootstrap: str, timeout: float, topic: str | None = None
) -> ClusterMetadata:
    """The broker's metadata of ``topic`` (every topic when None), as ``client`` asks for it.

    Raises:
        BrokerError: Kafka is unreachable.
    """
    try:
        return client.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        raise BrokerError(
            f"Kafka at {bootstrap} is unreachable ({exc.args[0].str()}): {_START_OR_FIX}"
        ) from exc


def _partition_count(admin: AdminClient, bootstrap: str, topic: str, timeout: float) -> int:
    # All topics, not list_topics(topic=...): a metadata request naming a missing topic can
    # auto-create it with the broker's default partition count.
    metadata = topic_metadata(admin, bootstrap, timeout)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return 0
    return sum(1 for p in found.partitions.values() if p.leader >= 0)


def _admin(bootstrap: str, client_config: Mapping[str, str] | None) -> AdminClient:
    return AdminClient({**(client_config or {}), "bootstrap.servers": bootstrap}, logger=_quiet)


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    addresses = []
    for item in bootstrap.split(","):
        hostport = item.strip().rsplit("://", 1)[-1]
        host, _, port = hostport.rpartition(":")
        if host and port.isdigit():
            addresses.append((host.strip("[]"), int(port)))
    return addresses


def _connects(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
