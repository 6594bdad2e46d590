"""Starting a local service and waiting for it: ready, exited at start, or never ready."""

import os
import sys
from pathlib import Path

import pytest

from eos_assets.lib import local_process
from eos_assets.lib.errors import EosError
from eos_assets.lib.service_wait import start_and_wait, wait_ready


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


def test_a_started_service_is_returned_once_ready_with_its_env(tmp_path: Path) -> None:
    out_path = tmp_path / "service.out"
    code = "import os, time; print(os.environ['GREETING'], flush=True); time.sleep(30)"
    pid = start_and_wait(
        [sys.executable, "-c", code], out_path, tmp_path, lambda: out_path.read_text() != "",
        5.0, what="the service", ready_verb="answer", name="service",
        env={**os.environ, "GREETING": "hello"},
    )  # fmt: skip
    try:
        assert local_process.alive(pid)
        assert out_path.read_text() == "hello\n"
    finally:
        local_process.stop(pid, 5.0, "service")


def test_a_started_service_never_ready_is_stopped(tmp_path: Path) -> None:
    out_path = tmp_path / "service.out"
    code = "import os, time; print(os.getpid(), flush=True); time.sleep(30)"
    with pytest.raises(EosError) as raised:
        start_and_wait(
            [sys.executable, "-c", code], out_path, tmp_path, lambda: False, 2.0,
            what="the service", ready_verb="listen", name="service",
        )  # fmt: skip
    assert str(raised.value) == f"the service did not listen within 2s: see {out_path}"
    assert not local_process.alive(int(out_path.read_text()))
