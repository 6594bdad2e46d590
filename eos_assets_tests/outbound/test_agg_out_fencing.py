"""Zombie publishers on a real Kafka broker: every run of a publisher has the same
``transactional.id``, so the next run's ``init_transactions`` fences an earlier one that was
paused or left open inside a transaction. Its commit fails, its open transaction is aborted,
each window revision is published once and the committed position matches the table."""

import json
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from deltalake import DeltaTable

from eos_assets.defs.stream import ORDERS
from eos_assets.lib import faults
from eos_assets.lib.delta.delta_io import read_rows
from eos_assets.lib.derived.window_aggregates import window_schema
from eos_assets.lib.outbound import outbound_position, outbound_publish
from eos_assets_tests.faults.harness import finish, wait_for_files
from eos_assets_tests.outbound.conftest import (
    GoldLakes,
    Publishing,
    history,
    run_outbound,
    windows_uri,
)
from eos_assets_tests.support.agg_out import publish_args, published, score
from eos_assets_tests.support.committed import open_records

# Zombies' transactions outlive any test (the broker's limit is 15 min): only fencing ends them.
ZOMBIE_TIMEOUT_MS = 600_000


def committed_position(bootstrap: str, topic: str, table: str) -> int | None:
    """The position of the table's publisher that a read_committed reader sees."""
    config = {"bootstrap.servers": bootstrap}
    log = outbound_position.read_log(config, outbound_position.position_topic(topic), True)
    return outbound_position.scan(log, outbound_publish.publisher_id(topic, table)).version


def test_a_paused_zombie_publisher_is_fenced_by_the_next_run_and_its_commit_fails(
    publishing: Publishing, tmp_path: Path
) -> None:
    table, kafka_bootstrap = publishing.table, publishing.bootstrap
    topic = publishing.topic("zombie")
    args = publish_args(table, kafka_bootstrap, topic)
    args += ["--transaction-timeout-ms", str(ZOMBIE_TIMEOUT_MS)]
    point = outbound_publish.AFTER_SEND
    zombie = run_outbound(*args, pause_at=point, pause_dir=tmp_path, wait=False)
    wait_for_files(tmp_path, f"{point}-*.ready", 1, 90, zombie)  # its first transaction open
    assert open_records(kafka_bootstrap, topic) > 0
    config = {"bootstrap.servers": kafka_bootstrap}
    successor = outbound_publish.publish_windows(ORDERS.windows, table, config, topic, 3, 25)
    (tmp_path / faults.RELEASE).touch()
    finish(zombie)
    assert zombie.outcome and not zombie.outcome["ok"], zombie.tail()
    assert "fenced" in zombie.outcome["error"]
    assert successor.transactional_id == outbound_publish.publisher_id(topic, table)
    want = history(table)
    doubled, skipped, invented = score(published(publishing.read_committed, topic), want)
    publishing.ledger.record("agg-out: paused zombie publisher", 1, skipped, doubled, "fenced")
    assert (doubled, skipped, invented) == (0, 0, 0)
    assert successor.records == len(want)
    assert open_records(kafka_bootstrap, topic) == 0
    assert committed_position(kafka_bootstrap, topic, table) == DeltaTable(table).version()


def test_a_producer_left_open_by_an_earlier_run_is_fenced_and_nothing_of_it_shows(
    publishing: Publishing,
) -> None:
    table, kafka_bootstrap = publishing.table, publishing.bootstrap
    topic = publishing.topic("open")
    config = {"bootstrap.servers": kafka_bootstrap}
    current = DeltaTable(table).version()
    outbound_position.ensure_topics(config, topic, 3)
    # An earlier run, still alive, sends a revision and claims the whole table as published,
    # but has not committed yet.
    publisher = outbound_publish.publisher_id(topic, table)
    zombie_config = {**config, "transaction.timeout.ms": str(ZOMBIE_TIMEOUT_MS)}
    zombie = outbound_position.start(zombie_config, topic, publisher)
    row = read_rows(DeltaTable(table), window_schema(ORDERS.windows, ORDERS.contract)).to_pylist()[
        0
    ]
    value = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
    zombie.producer.begin_transaction()
    zombie.producer.produce(topic, key=b"zombie", value=json.dumps(value).encode())
    position = outbound_position.position_record(outbound_position.Position(current))
    key = zombie.transactional_id.encode()
    zombie.producer.produce(outbound_position.position_topic(topic), key=key, value=position)
    assert zombie.producer.flush(30) == 0
    assert open_records(kafka_bootstrap, topic) == 1
    successor = outbound_publish.publish_windows(ORDERS.windows, table, config, topic, 3, 25)
    with pytest.raises(KafkaException) as refused:
        zombie.producer.commit_transaction(30)
    assert refused.value.args[0].fatal()
    assert successor.transactional_id == zombie.transactional_id
    want = history(table)
    records = published(publishing.read_committed, topic)
    doubled, skipped, invented = score(records, want)
    publishing.ledger.record("agg-out: producer left open", 1, skipped, doubled, "fenced")
    assert (doubled, skipped, invented) == (0, 0, 0)
    assert successor.records == len(records) == len(want)
    assert open_records(kafka_bootstrap, topic) == 0
    assert committed_position(kafka_bootstrap, topic, table) == current


def test_an_open_transaction_of_another_publisher_does_not_hide_this_ones_position(
    gold_lakes: GoldLakes,
    kafka_bootstrap: str,
    read_committed: Callable,
    tmp_path: Path,
) -> None:
    lake = gold_lakes.copy("early", tmp_path / "lake")
    table = windows_uri(lake)
    topic = f"agg-out-shared-{uuid.uuid4().hex[:6]}"
    config = {"bootstrap.servers": kafka_bootstrap}
    first = outbound_publish.publish_windows(ORDERS.windows, table, config, topic, 3, 10_000)
    gold_lakes.copy("final", lake)
    point = outbound_publish.BEFORE_SEND  # position read, nothing sent yet
    args = publish_args(table, kafka_bootstrap, topic, 10_000)
    late = run_outbound(*args, pause_at=point, pause_dir=tmp_path, wait=False)
    wait_for_files(tmp_path, f"{point}-*.ready", 1, 90, late)
    # Another table's publisher into the same topic opens a transaction on the position topic,
    # so this publisher's next position lands past the last stable offset.
    other = Producer(
        {
            **config,
            "transactional.id": f"eos-out.{topic}.other-{uuid.uuid4().hex[:6]}",
            "transaction.timeout.ms": 20_000,
        }
    )
    other.init_transactions(30)
    other.begin_transaction()
    other.produce(outbound_position.position_topic(topic), key=b"other", value=b'{"version":0}')
    assert other.flush(30) == 0
    (tmp_path / faults.RELEASE).touch()
    finish(late)
    assert late.outcome and late.outcome["ok"] and late.outcome["records"] > 0, late.tail()
    assert open_records(kafka_bootstrap, outbound_position.position_topic(topic)) > 0
    # A run now must find the position committed behind that open transaction (it waits for
    # the broker to expire it) instead of publishing the late run's versions again.
    again = outbound_publish.publish_windows(ORDERS.windows, table, config, topic, 3, 10_000)
    assert again.records == 0
    want = history(table)
    assert score(published(read_committed, topic), want) == (0, 0, 0)
    assert first.records + late.outcome["records"] == len(want)
