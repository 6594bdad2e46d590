"""Background services for the deployment tests: free ports, process groups, JSON over HTTP."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (the caller binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session (process group) of its own, its output going to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )  # fmt: skip


def stop(proc: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """SIGTERM the process group of ``proc`` (its children too), SIGKILL what outlives the grace."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        proc.wait()
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.3)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def get_json(url: str, timeout: float = 10.0) -> Any:
    """GET ``url`` and decode its JSON body."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def tail(path: Path, chars: int = 3000) -> str:
    """The end of a log file, for failure messages."""
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"
