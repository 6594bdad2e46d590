"""With ``EOS_KAFKA_BOOTSTRAP`` set, the product uses that Kafka and never starts the embedded
broker; ``EOS_KAFKA_*`` client settings (the README's managed-Kafka example) reach librdkafka."""

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from eos_assets.devkit import broker
from eos_assets.resources.kafka import KafkaResource
from eos_assets.settings import Settings
from eos_assets_tests.conftest import ReadRecord
from eos_assets_tests.deploy.compose_files import REPO

EOS_ASSETS = str(Path(sys.executable).parent / "eos-assets")


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that contain ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in line:
                found.append(line)
    return found


def test_demo_with_a_bootstrap_uses_it_and_starts_no_embedded_broker(
    kafka_bootstrap: str, read_committed: Callable[..., list[ReadRecord]], tmp_path: Path
) -> None:
    topic = f"demo-{uuid.uuid4().hex[:8]}"
    state, home = tmp_path / "state", tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.local.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_", "DAGSTER_"))}
    env.update(
        DAGSTER_HOME=str(home), EOS_KAFKA_BOOTSTRAP=kafka_bootstrap, EOS_TOPICS=topic,
        EOS_STATE_DIR=str(state), EOS_LAKE_ROOT=str(tmp_path / "lake"),
        EOS_WAREHOUSE=str(tmp_path / "warehouse.duckdb"), EOS_SPARK_MASTER="local[2]",
    )  # fmt: skip
    command = [EOS_ASSETS, "demo", "--count", "300", "--partitions", "2", "--seed", "5"]
    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Kafka at {kafka_bootstrap}, topic {topic!r}" in done.stdout, done.stdout
    assert "embedded broker" not in done.stdout
    # It ends with a read-only query of the served KPIs, which works as printed, and `make ui`.
    *_, query, next_step = done.stdout.strip().splitlines()
    assert next_step.startswith("Next: `make ui`") and "read_only=True" in query
    shown = subprocess.run(
        query, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert shown.returncode == 0 and "orders_paid" in shown.stdout, shown.stderr[-2000:]
    # No embedded broker was recorded, created or left running for this state folder.
    assert broker.read_state(state) is None
    assert not (state / "broker").exists()
    assert not _processes_mentioning(str(state))
    # The demo's records are on the configured broker, as many as its manifest committed.
    (summary,) = (state / "manifests").glob("demo-*.summary.json")
    committed = json.loads(summary.read_text())["committed"]
    assert committed > 0 and len(read_committed(topic)) == committed


def _readme_kafka_example() -> dict[str, str]:
    """The ``EOS_KAFKA_*=...`` lines of the README's managed-Kafka example."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Deploying", 1)[1].split("\n## ", 1)[0]
    example = section.split("<!-- managed-kafka -->", 1)[1].split("```", 2)[1]
    pairs = re.findall(r"^(?:export )?(EOS_KAFKA_[A-Z_]+)=(\S+)", example, re.MULTILINE)
    return dict(pairs)


def test_the_readme_managed_kafka_example_is_valid_librdkafka_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    example = _readme_kafka_example()
    assert {"EOS_KAFKA_BOOTSTRAP", "EOS_KAFKA_SECURITY_PROTOCOL", "EOS_KAFKA_SASL_PASSWORD"} <= (
        example.keys()
    )
    env = {k: v.strip("'\"") for k, v in example.items()}
    # Secrets come from the environment in real life; any value checks the mapping.
    env = {k: ("secret" if v.startswith("$") else v) for k, v in env.items()}
    settings = Settings.from_env(env)
    assert settings.kafka_bootstrap == env["EOS_KAFKA_BOOTSTRAP"]
    assert settings.kafka_client["security.protocol"] == "SASL_SSL"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    config = KafkaResource(bootstrap_servers=settings.kafka_bootstrap).client_config()
    assert config["bootstrap.servers"] == env["EOS_KAFKA_BOOTSTRAP"]
    assert config["sasl.password"] == "secret"
    # librdkafka itself rejects an unknown property or value when a client is created.
    consumer = Consumer({**config, "group.id": "eos-readme-example"})
    consumer.close()
