"""Run the ingest in processes of its own, arm fault points, kill it, and keep the score."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eos_assets.lib import faults
from eos_assets_tests.faults.ingest_once import FAILED as FAILED
from eos_assets_tests.faults.ingest_once import READY
from eos_assets_tests.faults.oracle import Verdict, judge
from eos_assets_tests.support.ledger import Ledger as Ledger

REPO = Path(__file__).resolve().parents[2]
RUNNER = "eos_assets_tests.faults.ingest_once"
_OUTCOME = "EOS_OUTCOME "
STARTED: list["Run"] = []  # every ingest process started, so a failed test leaves none behind


@dataclass
class Run:
    """One ingest process that was started, and how it ended."""

    proc: subprocess.Popen[str]
    returncode: int | None = None
    outcome: dict[str, Any] | None = None
    stdout: str = ""
    stderr: str = ""

    @property
    def killed(self) -> bool:
        """It died of SIGKILL (a crash point, or the test)."""
        return self.returncode == -signal.SIGKILL

    def tail(self, chars: int = 3000) -> str:
        """The end of its output, for assertion messages."""
        return (
            f"rc={self.returncode}\nstdout: {self.stdout[-chars:]}\nstderr: {self.stderr[-chars:]}"
        )


def fault_env(
    crash_at: str | None = None,
    pause_at: str | None = None,
    pause_dir: Path | str | None = None,
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    """``base`` (this environment by default) without any fault setting, plus the ones asked
    for."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("EOS_FAULT_")}
    if crash_at:
        env[faults.CRASH_ENV] = crash_at
    if pause_at:
        env[faults.PAUSE_ENV] = pause_at
        env[faults.PAUSE_DIR_ENV] = str(pause_dir)
    return env


def start_ingest(
    bootstrap: str,
    topic: str,
    table: str,
    *,
    crash_at: str | None = None,
    pause_at: str | None = None,
    pause_dir: Path | None = None,
    max_records: int | None = None,
    read_timeout: float = 60.0,
    remote: str | None = None,
) -> Run:
    """Start ``ingest_once`` in a process group of its own (its Spark JVM included, or a
    session of the Spark Connect server at ``remote``)."""
    cmd = [sys.executable, "-m", RUNNER, "--bootstrap", bootstrap, "--topic", topic]
    cmd += ["--table", table, "--read-timeout", str(read_timeout)]
    if remote is not None:
        cmd += ["--remote", remote]
    if max_records is not None:
        cmd += ["--max-records", str(max_records)]
    return spawn(cmd, fault_env(crash_at, pause_at, pause_dir))


def spawn(cmd: list[str], env: dict[str, str]) -> Run:
    """Start ``cmd`` from the repository's root in a process group of its own, its output
    piped; :func:`stop_stragglers` ends it if the test does not."""
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    run = Run(proc)
    STARTED.append(run)
    return run


def wait_ready(run: Run) -> bool:
    """Block until the runner says Spark is up (True), or until its output ends (False)."""
    assert run.proc.stdout is not None
    while line := run.proc.stdout.readline():
        run.stdout += line
        if line.strip() == READY:
            return True
    return False


def finish(run: Run, timeout: float = 240.0, grace: float = 15.0) -> Run:
    """Wait for the process, parse its outcome line, and make sure its group is gone (what
    outlives it by ``grace`` seconds is killed)."""
    try:
        out, run.stderr = run.proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(run)
        out, run.stderr = run.proc.communicate()
    run.stdout += out or ""  # None when the run's output went to a file
    run.returncode = run.proc.returncode
    for line in run.stdout.splitlines():
        if line.startswith(_OUTCOME):
            run.outcome = json.loads(line.removeprefix(_OUTCOME))
    reap_group(run.proc.pid, grace)
    return run


def run_ingest(bootstrap: str, topic: str, table: str, **kwargs: Any) -> Run:
    """Start one ingest and wait for it to end."""
    return finish(start_ingest(bootstrap, topic, table, **kwargs))


def kill_group(run: Run) -> None:
    """SIGKILL the ingest and everything it started: a machine losing power."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.proc.pid, signal.SIGKILL)


def stop_stragglers() -> None:
    """Kill every ingest a test started and left running (it failed before waiting for them)."""
    while STARTED:
        run = STARTED.pop()
        if run.proc.poll() is None:
            kill_group(run)
            run.proc.communicate()
        reap_group(run.proc.pid)


def reap_group(pgid: int, grace: float = 15.0) -> None:
    """Wait until no process of group ``pgid`` is left; SIGKILL what outlives ``grace``.

    A driver killed at a crash point leaves its Spark JVM to notice the closed pipe and exit;
    a test must not start the next run while the last one still writes files.
    """
    deadline = time.monotonic() + grace
    while _group_alive(pgid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            deadline = time.monotonic() + 10.0
        time.sleep(0.05)


def _group_alive(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def wait_for_files(folder: Path, pattern: str, count: int, timeout: float, *runs: Run) -> int:
    """Wait until ``count`` files match ``pattern`` in ``folder``; fail if a run ends first."""
    deadline = time.monotonic() + timeout
    while len(found := list(folder.glob(pattern))) < count:
        ended = [r for r in runs if r.proc.poll() is not None]
        if ended:
            finish(ended[0])
            raise AssertionError(f"an ingest ended before reaching {pattern}: {ended[0].tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(found)} of {count} {pattern} in {folder} after {timeout}s")
        time.sleep(0.05)
    return len(found)


def one_line(message: str) -> bool:
    """A user-facing error: a single non-empty line."""
    return bool(message.strip()) and "\n" not in message.strip()


def score(
    ledger: Ledger, fault: str, table: str, manifest: list[dict[str, Any]], note: str = ""
) -> Verdict:
    """Judge ``table`` against the ``manifest`` and record ``fault``, injected once, with what
    it lost and doubled; the verdict, for the test to assert on."""
    verdict = judge(table, manifest)
    ledger.record(fault, 1, verdict.lost, verdict.doubled, note)
    return verdict
