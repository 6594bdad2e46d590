"""The ``eos-assets`` command through ``main``, against the real broker."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from eos_assets.cli import main
from eos_assets.devkit import broker
from eos_assets.devkit.producer import read_manifest, summary_path


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty state folder as EOS_STATE_DIR, with no Kafka configured."""
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("EOS_KAFKA_BOOTSTRAP", raising=False)
    return tmp_path / "state"


def test_produce_prints_one_line_and_writes_the_manifest(
    state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    read_committed: Callable[..., list],
) -> None:
    monkeypatch.setenv("EOS_KAFKA_BOOTSTRAP", kafka_bootstrap)
    topic = make_topic(partitions=2)
    argv = ["produce", "--topic", topic, "--count", "120", "--seed", "3"]
    argv += ["--transaction-size", "40", "--abort-ratio", "0.3", "--malformed-ratio", "0.1"]
    argv += ["--late-ratio", "0.1", "--late-by", "90m", "--start-time", "2026-11-21T10:00:00"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith(f"120 records to {topic} (2 partitions)")
    manifests = list((state_dir / "manifests").glob(f"{topic}-*.jsonl"))
    assert len(manifests) == 1 and f"manifest {manifests[0]}" in out
    lines = read_manifest(manifests[0])
    summary = json.loads(summary_path(manifests[0]).read_text())
    assert len(lines) == summary["records"] == 120
    assert summary["start_time"] == "2026-11-21T10:00:00+00:00" and summary["seed"] == 3
    assert len(read_committed(topic)) == summary["committed"]

    explicit = state_dir / "elsewhere" / "run.jsonl"
    assert main([*argv, "--manifest", str(explicit)]) == 0
    assert [line["value_b64"] for line in read_manifest(explicit)] == [
        line["value_b64"] for line in lines
    ]


def test_produce_to_the_broker_a_stream_declares(
    state_dir: Path,
    capsys: pytest.CaptureFixture[str],
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    read_committed: Callable[..., list],
) -> None:
    topic = make_topic(partitions=1)  # EOS_KAFKA_BOOTSTRAP is unset, no embedded broker
    argv = ["produce", "--topic", topic, "--count", "20", "--bootstrap", kafka_bootstrap]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith(f"20 records to {topic} (1 partitions)")
    # A committed transaction's markers reach the partition just after the commit returns:
    # until then its last stable offset (what a read_committed reader reads up to) is behind.
    deadline, records = time.monotonic() + 30, read_committed(topic)
    while len(records) < 20 and time.monotonic() < deadline:
        time.sleep(0.2)
        records = read_committed(topic)
    assert len(records) == 20


def test_broker_up_status_down(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        assert main(["broker", "up"]) == 0
        bootstrap = capsys.readouterr().out.strip()
        assert broker.broker_status(state_dir) is not None
        assert bootstrap == broker.embedded_bootstrap(state_dir)
        assert main(["broker", "status"]) == 0
        assert capsys.readouterr().out.startswith(f"running at {bootstrap} (pid ")
    finally:
        assert main(["broker", "down"]) == 0
    assert capsys.readouterr().out == "stopped\n"
    assert main(["broker", "status"]) == 1


def test_broker_status_exits_1_when_not_running(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["broker", "status"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "not running (start it with `eos-assets broker up`)\n"
    assert captured.err == ""


def test_produce_without_a_broker_is_one_line_on_stderr(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["produce", "--count", "5"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        "eos-assets: no Kafka broker: run `eos-assets broker up` (or `make demo`), "
        "or set EOS_KAFKA_BOOTSTRAP\n"
    )
    assert captured.out == ""


def test_produce_to_an_unreachable_bootstrap_is_one_line_on_stderr(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("EOS_KAFKA_BOOTSTRAP", address)
    assert main(["produce", "--count", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"eos-assets: Kafka at {address} is unreachable: ")
    assert err.count("\n") == 1


def test_invalid_options_exit_2_before_any_network(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["produce", "--abort-ratio", "1.5"]) == 2
    assert capsys.readouterr().err == "eos-assets: abort_ratio must be between 0 and 1: got 1.5\n"
    with pytest.raises(SystemExit) as exited:  # argparse's own usage error
        main(["produce", "--late-by", "soon"])
    assert exited.value.code == 2


def test_sigterm_mid_transaction_aborts_it_and_exits_130(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    read_committed: Callable[..., list],
    tmp_path: Path,
) -> None:
    topic = make_topic(partitions=1)
    argv = ["produce", "--topic", topic, "--count", "1000", "--rate", "100"]
    argv += ["--transaction-size", "1000", "--manifest", str(tmp_path / "m.jsonl")]
    env = {**os.environ, "EOS_KAFKA_BOOTSTRAP": kafka_bootstrap}
    code = "import sys; from eos_assets.cli import main; sys.exit(main())"
    proc = subprocess.Popen([sys.executable, "-c", code, *argv], env=env, stderr=subprocess.PIPE)
    # librdkafka reads committed by default; this one sees the open transaction's records.
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": "watermarks",
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        # Wait until the first (and only) transaction holds records, then stop the producer.
        deadline = time.monotonic() + 30
        while consumer.get_watermark_offsets(TopicPartition(topic, 0), 5, cached=False)[1] < 5:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130
        assert err.decode() == "eos-assets: interrupted\n"
        # Aborted, not left open: the last stable offset caught up with the log's end.
        committed = Consumer(
            {
                "bootstrap.servers": kafka_bootstrap,
                "group.id": "lso",
                "isolation.level": "read_committed",
            }
        )
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), 5, cached=False)[1]
        assert committed.get_watermark_offsets(TopicPartition(topic, 0), 5, cached=False)[1] == end
        committed.close()
        assert read_committed(topic) == []
        assert not (tmp_path / "m.jsonl").read_text()  # no transaction finished
    finally:
        proc.kill()
        consumer.close()
