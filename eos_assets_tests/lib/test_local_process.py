"""The record of a local service's process, whether a pid still runs its main class, and
stopping a recorded service."""

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from eos_assets.lib import local_process
from eos_assets.lib.local_process import read_record, runs_main_class, write_record


@dataclass(frozen=True)
class Record:
    url: str
    pid: int


def test_a_record_reads_back_as_written_and_a_missing_or_bad_one_is_none(tmp_path: Path) -> None:
    path = tmp_path / "service" / "state.json"
    assert read_record(path, Record) is None
    write_record(path, Record("sc://127.0.0.1:15002", 42))
    assert read_record(path, Record) == Record("sc://127.0.0.1:15002", 42)
    assert not path.with_suffix(".tmp").exists()
    path.write_text('{"url": "sc://127.0.0.1:15002"')
    assert read_record(path, Record) is None
    path.write_text('{"url": "sc://127.0.0.1:15002", "pid": 42, "other": 1}')
    assert read_record(path, Record) is None


def test_a_pid_runs_the_main_class_only_when_started_with_it() -> None:
    main_class = "org.example.ServiceMain"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)", main_class],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"up\n"  # started
        assert runs_main_class(child.pid, main_class)
        assert not runs_main_class(child.pid, "org.example.Other")
    finally:
        child.kill()
        child.communicate()


def test_a_recorded_service_is_stopped_once_and_its_record_dropped(tmp_path: Path) -> None:
    main_class = "org.example.ServiceMain"
    out = tmp_path / "service.out"
    script = "import time; print('up', flush=True); time.sleep(60)"
    proc = local_process.start_service([sys.executable, "-c", script, main_class], out, tmp_path)
    path = tmp_path / "service" / "state.json"
    write_record(path, Record("sc://127.0.0.1:15002", proc.pid))
    try:
        deadline = time.monotonic() + 10
        while out.read_text() != "up\n":  # started, its output in the file
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert local_process.runs_service(proc.pid, main_class)
        stopped: list[Record] = []

        def stop(record: Record) -> None:
            stopped.append(record)
            local_process.stop(record.pid, 5.0, "service")

        assert local_process.stop_recorded(path, Record, main_class, stop)
        assert stopped == [Record("sc://127.0.0.1:15002", proc.pid)]
        assert proc.returncode == -signal.SIGTERM  # collected: no zombie remains
        assert not local_process.alive(proc.pid)
        assert not path.exists()
        assert not local_process.stop_recorded(path, Record, main_class, stop)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_live_pid_without_the_main_class_is_never_stopped(tmp_path: Path) -> None:
    path = tmp_path / "service" / "state.json"
    write_record(path, Record("sc://127.0.0.1:15002", os.getpid()))  # a recycled pid: this test

    def never(record: Record) -> None:
        pytest.fail(f"signalled {record}")

    assert not local_process.stop_recorded(path, Record, "org.example.ServiceMain", never)
    assert not path.exists()


def test_a_recorded_service_runs_only_while_its_pid_runs_the_main_class_and_it_answers(
    tmp_path: Path,
) -> None:
    main_class = "org.example.ServiceMain"
    path = tmp_path / "service" / "state.json"
    asked: list[Record] = []

    def answers(record: Record) -> bool:
        asked.append(record)
        return len(asked) > 1  # not the first time it is asked

    assert local_process.running_record(path, Record, main_class, answers) is None  # no record
    write_record(path, Record("sc://127.0.0.1:15002", os.getpid()))  # a recycled pid: this test
    assert local_process.running_record(path, Record, main_class, answers) is None
    assert asked == []  # a pid that runs something else is never asked
    out = tmp_path / "service.out"
    script = "import time; print('up', flush=True); time.sleep(60)"
    proc = local_process.start_service([sys.executable, "-c", script, main_class], out, tmp_path)
    try:
        deadline = time.monotonic() + 10
        while out.read_text() != "up\n":  # started: its command line is the service's
            assert time.monotonic() < deadline
            time.sleep(0.05)
        record = Record("sc://127.0.0.1:15002", proc.pid)
        write_record(path, record)
        assert local_process.running_record(path, Record, main_class, answers) is None
        assert local_process.running_record(path, Record, main_class, answers) == record
        assert asked == [record, record]
    finally:
        local_process.stop(proc.pid, 5.0, "service")
