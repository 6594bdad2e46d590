"""Starting a local service (``local_process.start_service``) and waiting until it is ready."""

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from eos_assets.lib import local_process
from eos_assets.lib.errors import EosError


def start_and_wait(
    command: Sequence[str],
    out_path: Path,
    cwd: Path,
    ready: Callable[[], bool],
    timeout: float,
    *,
    what: str,
    ready_verb: str,
    name: str,
    env: Mapping[str, str] | None = None,
) -> int:
    """Start ``command`` as a service (``local_process.start_service``); return its pid once
    ``ready()``.

    Raises:
        EosError: as ``wait_ready``; a service not ready in time is stopped first
            (``local_process.stop``, which names it ``name`` should it need SIGKILL).
    """
    proc = local_process.start_service(command, out_path, cwd=cwd, env=env)
    wait_ready(
        proc.pid,
        out_path,
        ready,
        timeout,
        what=what,
        ready_verb=ready_verb,
        stop=lambda: local_process.stop(proc.pid, 10.0, name),
    )
    return proc.pid


def wait_ready(
    pid: int,
    out_path: Path,
    ready: Callable[[], bool],
    timeout: float,
    *,
    what: str,
    ready_verb: str,
    stop: Callable[[], None],
) -> None:
    """Return once ``ready()``; the service ``what`` of process ``pid`` writes ``out_path``.

    Raises:
        EosError: the process exited first (its most telling output line), or it was not
            ready within ``timeout`` seconds (``stop()`` has stopped it; ``ready_verb`` says
            what it did not do in time).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not local_process.alive(pid):
            raise EosError(f"{what} exited at start: {exit_cause(out_path)}")
        if ready():
            return
        time.sleep(0.2)
    stop()
    raise EosError(f"{what} did not {ready_verb} within {timeout:g}s: see {out_path}")


def exit_cause(out_path: Path) -> str:
    """The most telling line the service wrote to ``out_path`` before it exited."""
    lines = out_path.read_text(errors="replace").splitlines() if out_path.exists() else []
    errors = [line.strip() for line in lines if "ERROR" in line or "Exception" in line]
    useful = errors or [line.strip() for line in lines if line.strip()] or ["(no output)"]
    return useful[-1][:500]
