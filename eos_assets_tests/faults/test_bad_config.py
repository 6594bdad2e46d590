"""Bad configuration: each fails fast with one line naming the cause and the fix, and leaves
the tables as they were (an existing table keeps its version and rows; none is created).
"""

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.ingest.ingest import ingest_bronze
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.faults.harness import Ledger, one_line
from eos_assets_tests.faults.oracle import bronze_keys
from eos_assets_tests.support.bronze_runs import bronze_resources, materialize_on_the_cli
from eos_assets_tests.support.fault_bench import Bench
from eos_assets_tests.support.orders import raw_events

NODE = "orders__bronze__raw_events"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def materialized(bootstrap: str, topics: list[str], lake_root: str) -> dg.ExecuteInProcessResult:
    """Materialize bronze with these settings."""
    resources = bronze_resources(bootstrap, topics, lake_root)
    return dg.materialize([raw_events], resources=resources, raise_on_error=False)


def failure(bootstrap: str, topics: list[str], lake_root: str) -> str:
    """Materialize bronze with these settings; return the one failure's description."""
    result = materialized(bootstrap, topics, lake_root)
    assert not result.success
    data = result.failure_data_for_node(NODE)
    assert data is not None and data.user_failure_data is not None, data
    return data.user_failure_data.description or ""


@dataclass(frozen=True)
class Lake:
    """A lake whose bronze table already holds data read from ``topic``."""

    root: str
    uri: str  # the bronze table
    topic: str
    before: tuple[int, object]  # the table's version and rows when the test began


@pytest.fixture
def lake(spark: SparkSession, bench: Bench, lake_root: str) -> Lake:
    """A lake with a bronze table that already holds data."""
    topic, _, _ = bench.topic_with(partitions=2, count=200, seed=71)
    uri = LakeResource(root=lake_root).table_uri("orders", "bronze", "raw_events")
    assert ingest_bronze(
        spark, uri, [topic], {"bootstrap.servers": bench.bootstrap}, contract=ORDERS.contract
    ).version
    return Lake(lake_root, uri, topic, snapshot(uri))


def path_without_java(shadow: Path) -> str:
    """This PATH with every ``java`` hidden: folders holding one are replaced by a copy made of
    links to everything else in them (dagster needs ``tail`` and friends from /usr/bin)."""
    folders = []
    for i, entry in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        folder = Path(entry)
        if not (folder / "java").exists():
            folders.append(entry)
            continue
        copy = shadow / str(i)
        copy.mkdir(parents=True)
        for item in folder.iterdir():
            if item.name != "java":
                (copy / item.name).symlink_to(item)
        folders.append(str(copy))
    return os.pathsep.join([str(Path(sys.executable).parent), *folders])


def snapshot(uri: str) -> tuple[int, object]:
    return DeltaTable(uri).version(), bronze_keys(uri)


def test_unreachable_bootstrap(lake: Lake, tmp_path: Path, ledger: Ledger) -> None:
    root, uri, topic, before = lake.root, lake.uri, lake.topic, lake.before
    nowhere = f"127.0.0.1:{free_port()}"
    began = time.monotonic()
    message = failure(nowhere, [topic], root)
    took = time.monotonic() - began
    assert one_line(message) and f"Kafka at {nowhere} is unreachable" in message, message
    assert "EOS_KAFKA_BOOTSTRAP" in message and took < 15, (message, took)
    assert snapshot(uri) == before
    fresh = tmp_path / "fresh"
    failure(nowhere, [topic], str(fresh))
    assert not fresh.exists(), "a failed run must not create tables"
    ledger.record("config: unreachable bootstrap servers", 2, note=message)


def test_missing_topic(lake: Lake, kafka_bootstrap: str, tmp_path: Path, ledger: Ledger) -> None:
    root, uri, topic, before = lake.root, lake.uri, lake.topic, lake.before
    missing = f"{topic}-missing"
    message = failure(kafka_bootstrap, [topic, missing], root)
    assert one_line(message) and f"topic {missing!r} does not exist" in message, message
    assert "EOS_TOPICS" in message
    assert snapshot(uri) == before, "the existing topic must not be ingested either"
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert missing not in topics, "a planner must not auto-create the topic"
    # None of the stream's topics exists yet (a new stream): skipped, nothing written.
    fresh = tmp_path / "fresh"
    skipped = materialized(kafka_bootstrap, [missing], str(fresh))
    assert skipped.success and not skipped.get_asset_materialization_events()
    assert not fresh.exists()
    # A bronze table that holds records lost every topic of its stream (another cluster, a
    # deleted topic): that fails, it is not a new stream to skip.
    gone = failure(kafka_bootstrap, [missing], root)
    assert one_line(gone) and f"topic {missing!r} does not exist" in gone, gone
    assert snapshot(uri) == before
    ledger.record("config: missing topic", 2, note=message)


def test_unwritable_lake_root(
    lake: Lake, kafka_bootstrap: str, tmp_path: Path, ledger: Ledger
) -> None:
    uri, topic, before = lake.uri, lake.topic, lake.before
    in_the_way = tmp_path / "not-a-folder"
    in_the_way.write_text("a file where the lake root should be")
    message = failure(kafka_bootstrap, [topic], str(in_the_way))
    assert one_line(message) and "cannot create the Delta table" in message, message
    assert "(Not a directory)" in message and "EOS_LAKE_ROOT" in message, message
    assert in_the_way.read_text() == "a file where the lake root should be"
    assert snapshot(uri) == before
    ledger.record("config: unwritable lake root", 1, note=message)


@pytest.mark.parametrize("java_home", [None, "/nonexistent-jvm"], ids=["no-java", "bad-home"])
def test_no_java(
    java_home: str | None,
    lake: Lake,
    kafka_bootstrap: str,
    tmp_path: Path,
    ledger: Ledger,
) -> None:
    """Through the Dagster command line, with no ``java`` on the PATH."""
    root, uri, topic, before = lake.root, lake.uri, lake.topic, lake.before
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_", "JAVA_HOME"))}
    env.update(
        PATH=path_without_java(tmp_path / "bin"),
        DAGSTER_HOME=str(tmp_path / "dagster_home"),
        EOS_KAFKA_BOOTSTRAP=kafka_bootstrap,
        EOS_TOPICS=topic,
        EOS_LAKE_ROOT=root,
        EOS_SPARK_MASTER="local[2]",
    )
    if java_home:
        env["JAVA_HOME"] = java_home
    (tmp_path / "dagster_home").mkdir()
    done = materialize_on_the_cli(env, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "No such file or directory" not in output, "only java may be missing"
    expected = (
        f"JAVA_HOME={java_home} has no bin/java: point JAVA_HOME at a Java 17 runtime or unset it"
        if java_home
        else "Java is not installed and Spark needs it: install a Java 17 runtime "
        "(Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
    )
    assert expected in output.splitlines() or any(
        line.strip().endswith(expected) for line in output.splitlines()
    ), output[-3000:]
    assert snapshot(uri) == before
    ledger.record(
        f"config: {'JAVA_HOME without java' if java_home else 'no Java'}", 1, note=expected
    )
