"""The lag sensor through ``dg.build_sensor_context`` against the real broker and Delta tables."""

import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # the admin module's stub hides it
from dagster._daemon.sensor import MIN_INTERVAL_LOOP_TIME  # the daemon's loop period
from pyspark.sql import SparkSession

from eos_assets.defs import sensors
from eos_assets.defs.stream import ORDERS
from eos_assets.lib.errors import BrokerError
from eos_assets.lib.ingest.ingest import IngestOptions, ingest_bronze
from eos_assets.lib.kafka.burrow import LagHistory
from eos_assets.lib.spark.spark_env import QUICK_START_JIT
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.support.instance_runs import materialized_in, started_run
from eos_assets_tests.support.lag_ticker import Ticker, observed, skip_reason, stream_job_def
from eos_assets_tests.support.orders import (
    EVENT_ID_UNIQUE_KEY,
    EVENTS,
    KPI_DAILY,
    KPI_DAILY_DISTINCT,
    KPI_WINDOW,
    KPI_WINDOW_DISTINCT,
    OFFSETS_CONTIGUOUS_KEY,
    ORDER_STATE,
    RAW_EVENTS,
    SERVING_KPI,
    SERVING_RECONCILE_KEY,
    WINDOW_AGGREGATES,
    WINDOWS_RECONCILE_KEY,
    ingest_job,
    ingest_on_kafka_lag,
    stream_job,
)
from eos_assets_tests.support.records import batch
from eos_assets_tests.support.txn_producer import send_transaction


def test_launches_once_skips_when_idle_and_launches_again_on_age(
    spark: SparkSession,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    lake_root: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EOS_LAG_MAX_RECORDS", "20")
    monkeypatch.setenv("EOS_LAG_MAX_AGE_S", "3600")
    topic = make_topic(partitions=3)
    lake = LakeResource(root=lake_root)
    ticker = Ticker(KafkaResource(bootstrap_servers=kafka_bootstrap, topics=[topic]), lake)

    assert skip_reason(ticker.tick()).startswith("nothing to do")
    send_transaction(kafka_bootstrap, topic, batch(30, 3))
    first = ticker.tick()
    (request,) = first.run_requests or []
    assert request.run_key and request.run_key.startswith("ingest-")
    # The run names the job's assets and checks (see test_automation.py for why).
    assert {SERVING_KPI, RAW_EVENTS} <= set(request.asset_selection or [])
    assert EVENT_ID_UNIQUE_KEY in (request.asset_check_keys or [])
    # A small backlog: the run's driver JVM starts for a short run, in a config the job takes.
    assert request.tags["eos/driver_jit"] == "c1"
    assert dg.validate_run_config(stream_job_def(), request.run_config)
    java = request.run_config["resources"]["pyspark"]["config"]["spark_config"]
    assert QUICK_START_JIT in java["spark.driver.extraJavaOptions"].split()
    m = observed(first)
    assert m["lag_total"] == 33  # 30 records and one commit marker per partition
    assert m[f"lag {topic}[0]"] == 11 and m["decision"].startswith("lag 33 offsets reached")

    again = ticker.tick()  # same offsets: never a second run for them
    assert skip_reason(again) == (
        f"an ingest up to these offsets was already requested (run key {request.run_key})"
    )

    bronze_uri, client = lake.table_uri(*RAW_EVENTS.path), {"bootstrap.servers": kafka_bootstrap}
    ingest_bronze(
        spark, bronze_uri, [topic], client, IngestOptions(max_records=12), contract=ORDERS.contract
    )
    monkeypatch.setattr(sensors, "QUICK_START_MAX_OFFSETS", 20)
    rest = ticker.tick()  # a capped run left a backlog: the same ends, new starts, a new run
    (capped,) = rest.run_requests or []
    assert capped.run_key != request.run_key and observed(rest)["lag_total"] == 21
    # Past the quick-start size the run keeps the resource's settings and the default JIT.
    assert capped.tags["eos/driver_jit"] == "default" and not capped.run_config

    ingest_bronze(spark, bronze_uri, [topic], client, contract=ORDERS.contract)
    idle = ticker.tick()
    assert (
        skip_reason(idle) == "nothing to do: bronze is at the last stable offset of every partition"
    )
    assert (observed(idle)["lag_total"], observed(idle)["status"]) == (0, "OK")

    send_transaction(kafka_bootstrap, topic, batch(3, 3, first=30))
    waiting = ticker.tick()
    assert skip_reason(waiting).startswith("waiting: lag 6 offsets < EOS_LAG_MAX_RECORDS=20")
    assert 0 <= observed(waiting)["oldest_pending_age_s"] < 60

    monkeypatch.setenv("EOS_LAG_MAX_AGE_S", "0.5")
    time.sleep(0.6)
    late = ticker.tick()
    (second,) = late.run_requests or []
    assert second.run_key != request.run_key
    assert "oldest pending record is" in observed(late)["decision"]
    history = LagHistory.from_json(ticker.cursor)
    assert len(history.windows[f"{topic}:0"]) == 7 and history.requested == second.run_key


@pytest.fixture
def one_partition(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    lake_root: str,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Ticker, str]:
    """A ticker over a new topic of one partition, launching at 5 pending offsets."""
    monkeypatch.setenv("EOS_LAG_MAX_RECORDS", "5")
    topic = make_topic(partitions=1)
    kafka = KafkaResource(bootstrap_servers=kafka_bootstrap, topics=[topic])
    return Ticker(kafka, LakeResource(root=lake_root)), topic


def test_an_ingest_run_holds_the_next_one_until_it_has_committed_silver(
    kafka_bootstrap: str, one_partition: tuple[Ticker, str]
) -> None:
    ticker, topic = one_partition
    send_transaction(kafka_bootstrap, topic, batch(10, 1))
    running = started_run(ticker.instance, stream_job.name)
    held = ticker.tick()
    assert skip_reason(held) == f"ingest run {running.run_id[:8]} is STARTED; waiting"

    # Its bronze commit does not free the way...
    materialized_in(ticker.instance, running, RAW_EVENTS)
    assert skip_reason(ticker.tick()) == f"ingest run {running.run_id[:8]} is STARTED; waiting"
    # ... its silver/events commit does: the next run starts while this one computes the KPIs.
    materialized_in(ticker.instance, running, EVENTS)
    (request,) = ticker.tick().run_requests or []
    assert request.run_key and request.run_key.startswith("ingest-")

    # Past that commit a run never holds the way again, whatever later runs commit.
    later = started_run(ticker.instance, stream_job.name)
    materialized_in(ticker.instance, later, EVENTS)
    send_transaction(kafka_bootstrap, topic, batch(10, 1, first=10))
    assert ticker.tick().run_requests

    # A plain ingest run holds the way until it ends.
    send_transaction(kafka_bootstrap, topic, batch(10, 1, first=20))
    ingesting = started_run(ticker.instance, ingest_job.name)
    assert skip_reason(ticker.tick()) == f"ingest run {ingesting.run_id[:8]} is STARTED; waiting"


def test_a_small_backlog_soon_after_a_full_run_takes_only_the_kpi_path(
    kafka_bootstrap: str, one_partition: tuple[Ticker, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ticker, topic = one_partition
    kpi_path = {RAW_EVENTS, EVENTS, KPI_WINDOW, KPI_DAILY, SERVING_KPI}
    kpi_path |= {KPI_WINDOW_DISTINCT, KPI_DAILY_DISTINCT}

    def launch(first: int) -> dg.RunRequest:
        send_transaction(kafka_bootstrap, topic, batch(10, 1, first=first))
        (request,) = ticker.tick().run_requests or []
        return request

    full = launch(0)
    assert full.tags["eos/path"] == "all"
    assert kpi_path | {WINDOW_AGGREGATES, ORDER_STATE} <= set(full.asset_selection or [])
    assert WINDOWS_RECONCILE_KEY in (full.asset_check_keys or [])

    lean = launch(10)  # seconds later: only the path to the served KPIs
    assert lean.tags["eos/path"] == "kpis"
    assert set(lean.asset_selection or []) == kpi_path
    checks = set(lean.asset_check_keys or [])
    assert {OFFSETS_CONTIGUOUS_KEY, EVENT_ID_UNIQUE_KEY, SERVING_RECONCILE_KEY} <= checks
    assert WINDOWS_RECONCILE_KEY not in checks
    # The job runs that subset: the KPI step computes the distinct values with the tables.
    subset = stream_job_def().get_subset(
        asset_selection=set(lean.asset_selection or []), asset_check_selection=checks
    )
    assert subset.asset_layer.executable_asset_keys == kpi_path

    monkeypatch.setattr(sensors, "REST_EVERY_S", 0)
    assert launch(20).tags["eos/path"] == "all"  # the rest is due again


def test_the_lag_sensor_is_due_on_every_pass_of_the_daemon() -> None:
    # The daemon evaluates a sensor whose last tick began at least its minimum interval ago; at
    # the loop's own period the loop's jitter skips every other pass (ticks 10 s apart).
    interval = ingest_on_kafka_lag.minimum_interval_seconds
    assert interval is not None and interval < MIN_INTERVAL_LOOP_TIME


def test_only_markers_pending_launches_to_move_past_them(
    spark: SparkSession, kafka_bootstrap: str, make_topic: Callable[..., str], lake_root: str
) -> None:
    topic = make_topic(partitions=1)
    lake = LakeResource(root=lake_root)
    send_transaction(kafka_bootstrap, topic, batch(4, 1))
    ingest_bronze(
        spark,
        lake.table_uri(*RAW_EVENTS.path),
        [topic],
        {"bootstrap.servers": kafka_bootstrap},
        contract=ORDERS.contract,
    )
    send_transaction(kafka_bootstrap, topic, batch(4, 1, first=4), commit=False)
    ticker = Ticker(KafkaResource(bootstrap_servers=kafka_bootstrap, topics=[topic]), lake)
    result = ticker.tick()
    assert result.run_requests
    assert (
        observed(result)["decision"]
        == "only transaction markers or aborted records pending (5 offsets)"
    )


def test_an_unreachable_broker_fails_the_tick_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the tick: nothing listens there
    kafka = KafkaResource(bootstrap_servers=f"127.0.0.1:{port}", topics=["orders"])
    ticker = Ticker(kafka, LakeResource(root=str(tmp_path / "lake")))
    with pytest.raises(BrokerError) as raised:
        ticker.tick()
    message = str(raised.value)
    assert "\n" not in message and f"127.0.0.1:{port}" in message
    assert "eos-assets broker up" in message or "EOS_KAFKA_BOOTSTRAP" in message


def test_a_topic_not_created_yet_is_a_wait_and_its_first_records_launch_a_run(
    kafka_bootstrap: str,
    kafka_client_config: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EOS_LAG_MAX_RECORDS", "1")
    topic = f"not-yet-{uuid.uuid4().hex[:8]}"
    # A new deployment: no topic, and no lake root either.
    lake = LakeResource(root=str(tmp_path / "new" / "lake"))
    ticker = Ticker(KafkaResource(bootstrap_servers=kafka_bootstrap, topics=[topic]), lake)

    for _ in range(2):
        waiting = ticker.tick()
        assert skip_reason(waiting) == (
            f"waiting for topic {topic!r} to be created on {kafka_bootstrap} (the first "
            "`eos-assets produce` creates it; EOS_TOPICS names the topics)"
        )
        assert not waiting.asset_events
    assert not Path(lake.root).exists()

    admin = AdminClient({**kafka_client_config, "bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(timeout=30)
    _wait_for_leaders(admin, topic, 2)
    # The same sensor, not restarted: an empty topic is nothing to do...
    assert skip_reason(ticker.tick()).startswith("nothing to do")
    # ... and its first records launch the ingest.
    send_transaction(kafka_bootstrap, topic, batch(4, 2))
    launched = ticker.tick()
    (request,) = launched.run_requests or []
    assert request.run_key and observed(launched)["lag_total"] == 6


def _wait_for_leaders(admin: AdminClient, topic: str, partitions: int) -> None:
    """Until the broker's metadata gives every partition of a new topic a leader (bounded)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = admin.list_topics(topic, timeout=10).topics.get(topic)
        if info is not None and info.error is None and len(info.partitions) == partitions:
            leaders = [p.leader for p in info.partitions.values()]
            if min(leaders) >= 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic} has no leader for every partition after 60 s")
