"""Waiting for a local service just started: ready, exited at start, or never ready."""

import sys
from pathlib import Path

import pytest

from eos_assets.lib import local_process
from eos_assets.lib.errors import EosError
from eos_assets.lib.service_wait import wait_ready


def start(tmp_path: Path, code: str) -> tuple[int, Path]:
    out_path = tmp_path / "service.out"
    proc = local_process.start_service([sys.executable, "-c", code], out_path, cwd=tmp_path)
    return proc.pid, out_path


def test_a_ready_service_returns_and_is_not_stopped(tmp_path: Path) -> None:
    pid, out_path = start(tmp_path, "import time; time.sleep(30)")
    stopped: list[int] = []
    try:
        wait_ready(
            pid, out_path, lambda: True, 5.0, what="the service", ready_verb="answer",
            stop=lambda: stopped.append(pid),
        )  # fmt: skip
        assert stopped == []
        assert local_process.alive(pid)
    finally:
        local_process.stop(pid, 5.0, "service")


def test_a_service_that_exits_at_start_says_its_error_line(tmp_path: Path) -> None:
    code = "print('starting'); print('ERROR the port is taken'); print('bye')"
    pid, out_path = start(tmp_path, code)
    with pytest.raises(EosError) as raised:
        wait_ready(
            pid, out_path, lambda: False, 10.0, what="the service", ready_verb="answer",
            stop=lambda: None,
        )  # fmt: skip
    assert str(raised.value) == "the service exited at start: ERROR the port is taken"


def test_a_service_never_ready_is_stopped_and_named_with_its_output(tmp_path: Path) -> None:
    pid, out_path = start(tmp_path, "import time; time.sleep(30)")
    try:
        with pytest.raises(EosError) as raised:
            wait_ready(
                pid, out_path, lambda: False, 0.5, what="the service", ready_verb="listen",
                stop=lambda: local_process.stop(pid, 5.0, "service"),
            )  # fmt: skip
        assert str(raised.value) == f"the service did not listen within 0.5s: see {out_path}"
        assert not local_process.alive(pid)
    finally:
        local_process.stop(pid, 5.0, "service")
