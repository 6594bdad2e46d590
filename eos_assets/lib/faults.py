"""Named fault points for the fault-injection tests.

When ``EOS_FAULT_CRASH_AT`` names a point, the process dies there with SIGKILL: no cleanup,
no ``finally``, exactly like a machine losing power. When ``EOS_FAULT_PAUSE_AT`` names a point,
the process announces it reached the point (a file ``<point>-<pid>.ready`` in
``EOS_FAULT_PAUSE_DIR``) and waits there until a file ``go`` (everyone) or ``go-<pid>`` (this
process only) appears in that folder, so a test can line up two writers and choose who goes
first, or stop the broker while a run is in flight. Unset (always, outside the tests), every
point is a no-op that costs two dictionary lookups.
"""

import os
import signal
import time
from pathlib import Path

CRASH_ENV = "EOS_FAULT_CRASH_AT"
PAUSE_ENV = "EOS_FAULT_PAUSE_AT"
PAUSE_DIR_ENV = "EOS_FAULT_PAUSE_DIR"
RELEASE = "go"

AFTER_PLAN = "after_plan"
MID_READ = "mid_read"
AFTER_FILES = "after_files"
BEFORE_COMMIT = "before_commit"
AFTER_COMMIT = "after_commit"
POINTS = (AFTER_PLAN, MID_READ, AFTER_FILES, BEFORE_COMMIT, AFTER_COMMIT)

_PAUSE_LIMIT_S = 120.0  # a test that never releases must not hang the run for good


def settings() -> dict[str, str]:
    """The fault variables of this process, for a Spark task to ``adopt``."""
    return {k: os.environ[k] for k in (CRASH_ENV, PAUSE_ENV, PAUSE_DIR_ENV) if k in os.environ}


def adopt(values: dict[str, str]) -> None:
    """Arm this process exactly as the driver whose ``settings()`` these are.

    A Spark Connect server's Python workers do not inherit the environment of the run, and
    they are reused by later tasks: a task takes the run's fault variables, and drops any a
    previous run left.
    """
    for name in (CRASH_ENV, PAUSE_ENV, PAUSE_DIR_ENV):
        if name in values:
            os.environ[name] = values[name]
        else:
            os.environ.pop(name, None)


def armed(point: str) -> bool:
    """True when the process is told to die at ``point``."""
    return os.environ.get(CRASH_ENV) == point


def crash_point(point: str, pid: int | None = None) -> None:
    """Pause at ``point`` and/or kill process ``pid`` (default: this one) there, if armed.

    Spark tasks pass the driver's pid so that a crash "in the middle of reading" takes the
    whole ingest down, not just one Python worker that Spark would replace.
    """
    if os.environ.get(PAUSE_ENV) == point:
        _pause(point)
    if armed(point):
        os.kill(pid or os.getpid(), signal.SIGKILL)


def _pause(point: str) -> None:
    folder = Path(os.environ.get(PAUSE_DIR_ENV) or ".")
    pid = os.getpid()
    (folder / f"{point}-{pid}.ready").touch()
    releases = (folder / RELEASE, folder / f"{RELEASE}-{pid}")
    deadline = time.monotonic() + _PAUSE_LIMIT_S
    while not any(r.exists() for r in releases) and time.monotonic() < deadline:
        time.sleep(0.05)
