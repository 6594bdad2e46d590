"""Quiet by default: the commands print no warning of Dagster's about the project's own use of
its component loader, and no instance warning when ``DAGSTER_HOME`` holds no ``dagster.yaml``.

Each command runs in a process of its own, with Python's default warning filters, as a user
runs it.
"""

import logging
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from eos_assets.instance import LOCAL_CONFIG, ensure_instance_config

BIN = Path(sys.executable).parent
WARNING = ("Warning:", "warnings.warn", "No dagster instance configuration")


def _run(command: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_", "DAGSTER_"))}
    env.update(DAGSTER_HOME=str(home), PYTHONWARNINGS="default")
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(w in line for w in WARNING)]


@pytest.mark.slow
def test_the_demo_help_and_a_definitions_load_print_no_warning(tmp_path: Path) -> None:
    home = tmp_path / "home"  # no dagster.yaml in it
    home.mkdir()
    help_ = _run([str(BIN / "eos-assets"), "demo", "--help"], home)
    assert help_.returncode == 0, help_.stderr
    assert _warnings(help_.stdout + help_.stderr) == []
    load = _run(
        [sys.executable, "-c", "import eos_assets.definitions as d; print(len(d.streams))"], home
    )
    assert load.returncode == 0, load.stderr
    assert _warnings(load.stdout + load.stderr) == [], load.stderr


def test_an_instance_the_commands_open_finds_its_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with caplog.at_level(logging.WARNING, logger="dagster"):
        dg.DagsterInstance.get().dispose()  # no dagster.yaml: Dagster warns
        assert "No dagster instance configuration" in caplog.text
        caplog.clear()
        assert ensure_instance_config() == home / "dagster.yaml"
        assert ensure_instance_config() is None  # written once
        dg.DagsterInstance.get().dispose()
    assert "No dagster instance configuration" not in caplog.text
    assert (home / "dagster.yaml").read_text() == LOCAL_CONFIG.read_text()
