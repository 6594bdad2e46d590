"""The embedded broker's lifecycle through the state folder, and the broker probes."""

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from eos_assets.devkit import broker
from eos_assets.devkit.broker import BrokerInfo
from eos_assets.lib.errors import BrokerError
from eos_assets.resources.kafka import bootstrap_servers
from eos_assets.settings import Settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def topics(bootstrap: str) -> dict[str, int]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name: len(t.partitions) for name, t in metadata.topics.items()}


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A state folder whose embedded broker is stopped after the test, whatever happens."""
    yield tmp_path / "state"
    broker.down(tmp_path / "state")


def test_up_status_down_through_the_state_dir(state_dir: Path) -> None:
    assert broker.broker_status(state_dir) is None
    info = broker.up(state_dir)
    assert Path(info.data_dir) == state_dir / "broker" / "data"
    assert broker.read_state(state_dir) == info
    assert broker.broker_status(state_dir) == info
    assert broker.up(state_dir) == info  # idempotent: the running broker, not a second one
    assert broker.embedded_bootstrap(state_dir) == info.bootstrap
    assert bootstrap_servers(Settings(state_dir=str(state_dir))) == info.bootstrap
    assert bootstrap_servers(Settings(kafka_bootstrap="kafka:9092", state_dir=str(state_dir))) == (
        "kafka:9092"
    )
    broker.ensure_topic(info.bootstrap, "kept", 2)

    # A second broker on the same data folder is refused before it touches anything.
    with pytest.raises(BrokerError, match="already running"):
        broker.start_broker(Path(info.data_dir), timeout=10)

    assert broker.down(state_dir) is True
    assert not alive(info.pid)
    assert broker.broker_status(state_dir) is None
    assert broker.read_state(state_dir) is None
    with pytest.raises(BrokerError, match=r"run `eos-assets broker up`"):
        broker.embedded_bootstrap(state_dir)
    assert broker.down(state_dir) is False

    # Its data survives a controlled shutdown: the topic is still there after a restart.
    again = broker.up(state_dir)
    assert topics(again.bootstrap).get("kept") == 2


def test_start_returns_only_once_the_broker_answers(tmp_path: Path) -> None:
    info = broker.start_broker(tmp_path / "data")
    try:
        # No retry and a short timeout: it must already answer a metadata request.
        AdminClient({"bootstrap.servers": info.bootstrap}).list_topics(timeout=2)
        broker.wait_ready(info.bootstrap, timeout=2)
    finally:
        broker.stop_broker(info)
    assert not alive(info.pid)
    with pytest.raises(BrokerError, match="did not answer within 1s"):
        broker.wait_ready(info.bootstrap, timeout=1)


def test_stale_state_is_not_running_and_foreign_pids_are_left_alone(state_dir: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = BrokerInfo(f"127.0.0.1:{free_port()}", dead.pid, str(state_dir / "broker" / "data"))
    broker.write_state(state_dir, stale)
    assert broker.read_state(state_dir) == stale
    assert broker.broker_status(state_dir) is None
    with pytest.raises(BrokerError, match="no Kafka broker"):
        broker.embedded_bootstrap(state_dir)

    # A recycled pid now belongs to another program (here: this test): never signal it.
    broker.write_state(state_dir, BrokerInfo(stale.bootstrap, os.getpid(), stale.data_dir))
    assert broker.broker_status(state_dir) is None
    assert broker.down(state_dir) is False
    assert broker.read_state(state_dir) is None

    # `up` replaces a stale record with a running broker.
    broker.write_state(state_dir, stale)
    info = broker.up(state_dir)
    assert info.pid != stale.pid
    assert broker.broker_status(state_dir) == info


def test_unreachable_bootstrap_fails_fast_with_one_line() -> None:
    address = f"127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.raises(BrokerError) as caught:
        broker.check_reachable(address, {}, timeout=10)
    assert time.monotonic() - began < 3
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        f"Kafka at {address} is unreachable: "
        "start it (`eos-assets broker up`) or fix EOS_KAFKA_BOOTSTRAP"
    )


def test_reachable_bootstrap_passes(kafka_bootstrap: str) -> None:
    broker.check_reachable(kafka_bootstrap, {}, timeout=10)
    broker.wait_ready(kafka_bootstrap, timeout=5)


def test_busy_port_is_refused_with_the_fix(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(BrokerError) as caught:
            broker.start_broker(tmp_path / "data", port=port)
    assert str(caught.value) == (
        f"port {port} on 127.0.0.1 is busy: stop what uses it or choose another port with --port"
    )


def test_stop_escalates_to_sigkill_only_after_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", stubborn], start_new_session=True)
    try:
        time.sleep(0.3)  # let it install the handler
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="eos_assets.devkit.broker"):
            broker.stop_broker(BrokerInfo("127.0.0.1:1", proc.pid, ""), timeout=0.5)
        assert time.monotonic() - began >= 0.5
        assert proc.wait(5) == -9
        assert "sending SIGKILL" in caplog.text
    finally:
        proc.kill()


def test_ensure_topic_creates_once_and_leaves_an_existing_topic_alone(
    kafka_bootstrap: str, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=2)
    assert topics(kafka_bootstrap)[topic] == 2
    assert broker.ensure_topic(kafka_bootstrap, topic, 5) == 2
    assert topics(kafka_bootstrap)[topic] == 2
    fresh = f"{topic}-fresh"
    assert broker.ensure_topic(kafka_bootstrap, fresh, 4) == 4
    assert topics(kafka_bootstrap)[fresh] == 4
