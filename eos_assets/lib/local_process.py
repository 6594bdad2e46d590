"""The processes of the local services (the embedded broker, the Spark server).

Each service runs as a process group of its own and records its running process (address,
pid...) as one JSON file under the state folder. A recorded pid is trusted only while it still
runs the service's Java main class: the pid of a stale record may belong to another program by
now. Stopping a service sends SIGTERM to its group, and SIGKILL only when it outlives a timeout.
"""

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)


class ProcessRecord(Protocol):
    """A service's record: it names the service's process."""

    @property
    def pid(self) -> int: ...


RecordT = TypeVar("RecordT")
ProcessRecordT = TypeVar("ProcessRecordT", bound=ProcessRecord)

# Children started by this process: reaped with Popen.poll/wait, so no zombie or
# ResourceWarning remains.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def start_service(
    command: Sequence[str], out_path: Path, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``command`` as a process group of its own, its output to ``out_path``.

    A file, not a pipe: nobody drains a pipe after start and a full pipe would block the
    service. Its own session, so a signal to the group reaches the service (and the processes
    it starts) and nothing else of ours.
    """
    with out_path.open("wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=cwd, env=env,
        )  # fmt: skip
    _CHILDREN[proc.pid] = proc
    return proc


def write_record(path: Path, record: "DataclassInstance") -> None:
    """Record ``record`` (a dataclass) at ``path`` as JSON, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(record)))
    tmp.replace(path)  # atomic: a reader never sees half a file


def read_record(path: Path, kind: Callable[..., RecordT]) -> RecordT | None:
    """The record at ``path`` made with ``kind``; None when there is none or it does not fit."""
    try:
        return kind(**json.loads(path.read_text()))
    except (FileNotFoundError, ValueError, TypeError):
        return None


def running_record(
    path: Path,
    kind: Callable[..., ProcessRecordT],
    main_class: str,
    answers: Callable[[ProcessRecordT], bool],
) -> ProcessRecordT | None:
    """The service recorded at ``path`` while its pid runs ``main_class`` and ``answers`` it;
    None otherwise (no record, a stale pid, or a service that does not answer)."""
    record = read_record(path, kind)
    if record is None or not runs_service(record.pid, main_class):
        return None
    return record if answers(record) else None


def runs_main_class(pid: int, main_class: str) -> bool:
    """True when process ``pid`` was started with the Java main class ``main_class``."""
    try:
        return main_class.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return not Path("/proc").is_dir()  # no procfs (macOS): trust the live pid


def runs_service(pid: int, main_class: str) -> bool:
    """True while process ``pid`` is alive and runs the Java main class ``main_class``."""
    return alive(pid) and runs_main_class(pid, main_class)


def alive(pid: int) -> bool:
    """True while process ``pid`` has not exited (a zombie has)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        _CHILDREN.pop(pid, None)  # collected: the pid may go to another program now
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        # A zombie has exited already; only its parent has not collected it yet.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def stop(pid: int, timeout: float, name: str) -> None:
    """Stop the process group ``pid`` with SIGTERM and wait until its leader has exited.

    Only when it is still alive after ``timeout`` seconds is it killed with SIGKILL (logged as
    a warning naming the service, ``name``).
    """
    if not alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    if wait_exit(pid, timeout):
        return
    log.warning("%s pid %s ignored SIGTERM for %ss: sending SIGKILL", name, pid, timeout)
    kill(pid)


def kill(pid: int) -> None:
    """Kill the process group ``pid`` with SIGKILL at once and wait until its leader has exited."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    wait_exit(pid, 10.0)


def wait_exit(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for process ``pid`` to exit; False when it still runs."""
    child = _CHILDREN.get(pid)
    if child is not None:
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        _CHILDREN.pop(pid, None)
        return True
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop_recorded(
    path: Path,
    kind: Callable[..., ProcessRecordT],
    main_class: str,
    stop_service: Callable[[ProcessRecordT], None],
) -> bool:
    """Stop the service recorded at ``path`` with ``stop_service`` and drop its record.

    Returns False when none was running: no record, or its pid no longer runs ``main_class``
    (never signalled: it may belong to another program by now).
    """
    record = read_record(path, kind)
    if record is None:
        return False
    running = runs_service(record.pid, main_class)
    if running:
        stop_service(record)
    path.unlink(missing_ok=True)
    return running
