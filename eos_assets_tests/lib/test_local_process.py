"""The record of a local service's process, and whether a pid still runs its main class."""

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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
