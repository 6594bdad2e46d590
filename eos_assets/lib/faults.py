"""Named crash points for the fault-injection tests.

When ``EOS_FAULT_CRASH_AT`` names a point, the process dies there with SIGKILL: no cleanup,
no ``finally``, exactly like a machine losing power. Unset (always, outside the tests), every
point is a no-op that costs one dictionary lookup.
"""

import os
import signal

CRASH_ENV = "EOS_FAULT_CRASH_AT"

AFTER_PLAN = "after_plan"
MID_READ = "mid_read"
AFTER_FILES = "after_files"
AFTER_COMMIT = "after_commit"
POINTS = (AFTER_PLAN, MID_READ, AFTER_FILES, AFTER_COMMIT)


def armed(point: str) -> bool:
    """True when the process is told to die at ``point``."""
    return os.environ.get(CRASH_ENV) == point


def crash_point(point: str, pid: int | None = None) -> None:
    """Kill process ``pid`` (default: this one) with SIGKILL if ``point`` is armed.

    Spark tasks pass the driver's pid so that a crash "in the middle of reading" takes the
    whole ingest down, not just one Python worker that Spark would replace.
    """
    if armed(point):
        os.kill(pid or os.getpid(), signal.SIGKILL)
