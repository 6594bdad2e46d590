"""The secured listener of the session's cluster (SASL_SSL, SCRAM-SHA-512, ACLs): an ingest and
``eos-assets produce`` run with exactly the ACLs the README lists, and each missing piece fails
with one line that names it, commits nothing and never shows the password."""

import logging
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit import broker, tls
from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets.lib.errors import BrokerError
from eos_assets.lib.ingest.ingest import ingest_bronze
from eos_assets.lib.kafka.lag import measure_lag
from eos_assets.lib.spark.java import require_java
from eos_assets_tests.faults.harness import Ledger, one_line, score
from eos_assets_tests.support.cluster import LiveCluster
from eos_assets_tests.support.committed import read_committed_records

Secured = tuple[str, list[dict]]  # a topic on the cluster and its manifest


@pytest.fixture(scope="module")
def secured_topic(kafka_cluster: LiveCluster, tmp_path_factory: pytest.TempPathFactory) -> Secured:
    """A topic of orders on the cluster (written through the plaintext listener) and its
    manifest, shared by the tests of this module."""
    name = f"orders-secured-{uuid.uuid4().hex[:8]}"
    broker.ensure_topic(kafka_cluster.bootstrap, name, 2)
    path = tmp_path_factory.mktemp("secured") / "manifest.jsonl"
    options = ProduceOptions(topic=name, count=400, seed=81, abort_ratio=0.2, transaction_size=50)
    produce(kafka_cluster.bootstrap, options, path)
    return name, read_manifest(path)


def _fails(spark: SparkSession, table: str, topic: str, config: dict[str, str]) -> str:
    with pytest.raises(BrokerError) as failed:
        ingest_bronze(spark, table, [topic], config, contract=ORDERS.contract)
    message = str(failed.value)
    assert one_line(message), message
    assert config["sasl.password"] not in message
    assert not Path(table, "_delta_log").exists() or DeltaTable(table).version() == 0
    return message


def test_ingest_needs_only_read_and_describe_on_the_topic(
    spark: SparkSession,
    kafka_cluster: LiveCluster,
    secured_topic: Secured,
    table: str,
    caplog: pytest.LogCaptureFixture,
    ledger: Ledger,
) -> None:
    """No ACL on any group: the lag sensor's reads and the ingest run; the readers' group is
    never needed (librdkafka looks it up and reports the denial, the readers never commit to
    it), and the advisory commit to group ``eos-assets`` is a warning naming the ACL."""
    topic, manifest = secured_topic
    kafka_cluster.grant("eos-ingest", "TOPIC", topic, "READ", "DESCRIBE")
    config = kafka_cluster.client("eos-ingest")
    committed = sum(r["status"] == "committed" for r in manifest)
    # The lag sensor's reads (bounds, high watermarks, the oldest pending record's time).
    before = measure_lag(config, [topic], table, with_age=True)
    assert sum(lg.lag for lg in before) >= committed and all(lg.measured for lg in before)
    with caplog.at_level(logging.WARNING):
        outcome = ingest_bronze(spark, table, [topic], config, contract=ORDERS.contract)
    assert outcome.version == 1 and not outcome.advisory_committed
    assert sum(lg.lag for lg in measure_lag(config, [topic], table)) == 0
    assert "grant READ on group eos-assets" in caplog.text, caplog.text
    assert config["sasl.password"] not in caplog.text
    verdict = score(ledger, "SASL_SSL ingest with topic ACLs only", table, manifest)
    assert verdict.exact, verdict


def test_wrong_password_is_an_authentication_failure(
    spark: SparkSession, kafka_cluster: LiveCluster, secured_topic: Secured, table: str
) -> None:
    topic, _ = secured_topic
    config = kafka_cluster.client("eos-ingest", password="not-" + uuid.uuid4().hex)
    message = _fails(spark, table, topic, config)
    assert message.startswith("authentication failed for user eos-ingest"), message


def test_missing_topic_acls_are_named(
    spark: SparkSession, kafka_cluster: LiveCluster, secured_topic: Secured, table: str
) -> None:
    topic, _ = secured_topic
    nothing = _fails(spark, table, topic, kafka_cluster.client("eos-nobody"))
    assert f"User:eos-nobody READ and DESCRIBE on topic {topic}" in nothing, nothing
    # DESCRIBE alone lets the plan read the offsets; the read itself is refused.
    kafka_cluster.grant("eos-describe", "TOPIC", topic, "DESCRIBE")
    no_read = _fails(spark, table, topic, kafka_cluster.client("eos-describe"))
    assert f"User:eos-describe READ on topic {topic}" in no_read, no_read


def test_a_ca_the_client_does_not_trust_is_named(
    spark: SparkSession,
    kafka_cluster: LiveCluster,
    secured_topic: Secured,
    table: str,
    tmp_path: Path,
) -> None:
    topic, _ = secured_topic
    other = tls.ensure_tls(tmp_path / "other-ca", require_java())
    config = {**kafka_cluster.client("eos-ingest"), "ssl.ca.location": other.ca_pem}
    message = _fails(spark, table, topic, config)
    assert "TLS handshake" in message and "EOS_KAFKA_SSL_CA_LOCATION" in message, message


def test_produce_needs_write_on_the_topic_and_its_transactional_id(
    kafka_cluster: LiveCluster, tmp_path: Path, ledger: Ledger
) -> None:
    """README's ACLs of ``eos-assets produce`` to an existing topic: WRITE on it and on its
    transactional id. Without the latter it fails with one line naming it, and commits
    nothing; with both, Kafka exposes exactly what its manifest says it committed."""
    topic = f"orders-produce-{uuid.uuid4().hex[:8]}"
    broker.ensure_topic(kafka_cluster.bootstrap, topic, 2)
    options = ProduceOptions(
        topic=topic, count=300, seed=82, partitions=2, abort_ratio=0.2, transaction_size=50
    )
    config = kafka_cluster.client("eos-producer")
    secure = config.pop("bootstrap.servers")
    kafka_cluster.grant("eos-producer", "TOPIC", topic, "WRITE")
    with pytest.raises(BrokerError) as failed:
        produce(secure, options, tmp_path / "denied.jsonl", config)
    message = str(failed.value)
    assert one_line(message) and config["sasl.password"] not in message, message
    named = f"User:eos-producer WRITE on transactional id {options.identity()} "
    assert named in message, message
    admin = {"bootstrap.servers": kafka_cluster.bootstrap}
    assert read_committed_records(admin, topic, timeout=20) == []
    kafka_cluster.grant("eos-producer", "TRANSACTIONAL_ID", options.identity(), "WRITE")
    produce(secure, options, tmp_path / "manifest.jsonl", config)
    manifest = read_manifest(tmp_path / "manifest.jsonl")
    committed = {(m["partition"], m["offset"]) for m in manifest if m["status"] == "committed"}
    exposed = {(p, o) for p, o, _, _ in read_committed_records(admin, topic, timeout=60)}
    lost, foreign = len(committed - exposed), len(exposed - committed)
    ledger.record("SASL_SSL produce with README's ACLs", 1, lost, 0)
    assert len(manifest) == options.count and committed and not lost and not foreign
