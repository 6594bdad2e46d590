"""The fault points themselves, and the one-line error rebuilt from a failed Spark task."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eos_assets.lib import faults
from eos_assets.lib.errors import BrokerError, EosError, raised_in


def test_unarmed_points_are_no_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (faults.CRASH_ENV, faults.PAUSE_ENV):
        monkeypatch.delenv(name, raising=False)
    for point in faults.POINTS:
        faults.crash_point(point)
    assert not faults.armed(faults.AFTER_COMMIT)


def test_an_armed_point_kills_its_process_with_sigkill() -> None:
    code = "from eos_assets.lib import faults; faults.crash_point('after_files'); print('alive')"
    env = {faults.CRASH_ENV: faults.AFTER_FILES, "PATH": ""}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == -9 and "alive" not in done.stdout


def test_a_paused_point_waits_for_its_own_release(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(faults.PAUSE_ENV, faults.BEFORE_COMMIT)
    monkeypatch.setenv(faults.PAUSE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(faults.CRASH_ENV, raising=False)
    ready = tmp_path / f"{faults.BEFORE_COMMIT}-{os.getpid()}.ready"

    def release() -> None:
        while not ready.exists():
            time.sleep(0.01)
        time.sleep(0.3)
        (tmp_path / f"{faults.RELEASE}-{os.getpid()}").touch()

    helper = threading.Thread(target=release)
    helper.start()
    began = time.monotonic()
    faults.crash_point(faults.AFTER_PLAN)  # not this point: passes at once
    assert time.monotonic() - began < 0.2
    faults.crash_point(faults.BEFORE_COMMIT)
    assert time.monotonic() - began >= 0.3
    helper.join()


def test_a_task_error_comes_back_as_its_one_line() -> None:
    text = (
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "reader.py", line 100, in fetch_range\n    raise BrokerError(\n'
        "eos_assets.lib.errors.BrokerError: reading t[0] offsets [0, 9) did not finish in 6s "
        "(got 0 records): check the broker or raise read_timeout_s\n SQLSTATE: 38000"
    )
    error = raised_in(text)
    assert isinstance(error, BrokerError)
    assert str(error) == (
        "reading t[0] offsets [0, 9) did not finish in 6s (got 0 records): check the broker or "
        "raise read_timeout_s"
    )
    assert raised_in("java.lang.OutOfMemoryError: Java heap space") is None
    assert type(raised_in("eos_assets.lib.errors.Unheard: x: y")) is EosError
