"""The serving database file: readers never block the writer and always see a whole version.

DuckDB lets one process write a database file only when no other process holds it, read-only
connections included, so writing the file in place would fail whenever anyone reads the KPIs.
Instead each new version is built in a copy next to it (``<file>.next``: the current file
copied, then changed in one DuckDB transaction and checkpointed on close) and published by
``os.replace`` onto the stable path, atomically:

- a reader that opens the stable path gets either the old file or the new one, whole;
- a reader with an open connection keeps its old file (an unlinked file stays readable on
  POSIX for as long as it is open) and sees the new version when it reconnects;
- a writer killed at any point leaves the stable file as it was; the next writer discards
  the leftover copy and starts again from the stable file.

Writers take turns on an advisory lock (``<file>.lock``, released by the kernel when its holder
dies); readers never take it. Linux and macOS only: Windows refuses to replace an open file.
"""

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import duckdb

from eos_assets.lib import faults
from eos_assets.lib.errors import EosError

BEFORE_SWAP = "serving_before_swap"
ATTACHED = "served"
# A writer waits this long for another writer (a serving run takes seconds) before giving up.
LOCK_WAIT_S = 600.0

T = TypeVar("T")


def next_path(path: str | Path) -> Path:
    """Where the next version is built."""
    return Path(f"{path}.next")


def _wal(path: Path) -> Path:
    return Path(f"{path}.wal")


def publish(
    path: str | Path,
    build: Callable[[duckdb.DuckDBPyConnection], T],
    changed: Callable[[T], bool],
) -> T:
    """Run ``build`` on a copy of the database at ``path`` and swap the copy in if ``changed``.

    Args:
        path: the stable path readers open (created on the first publish).
        build: changes the database through the connection it is given, in transactions it
            commits itself; its result is returned.
        changed: whether the result means the copy differs from the current file (if not, the
            copy is discarded and readers keep the same file).

    Raises:
        EosError: another writer held the lock for ``LOCK_WAIT_S``.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = next_path(target)
    with _writer_lock(target):
        for leftover in (staged, _wal(staged)):  # what a killed writer left
            leftover.unlink(missing_ok=True)
        if target.exists():
            shutil.copyfile(target, staged)
            if _wal(target).exists():  # a file once written in place: its last commits
                shutil.copyfile(_wal(target), _wal(staged))
        with duckdb.connect(str(staged)) as conn:
            result = build(conn)
        # Closing checkpointed the copy: it is one self-contained file from here on.
        if not changed(result) and target.exists():
            staged.unlink()
            return result
        _fsync(staged)
        faults.crash_point(BEFORE_SWAP)
        _wal(target).unlink(missing_ok=True)
        os.replace(staged, target)
        _fsync(target.parent)
    return result


def connect_reader(path: str | Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the current version at ``path``.

    ``duckdb.connect(path)`` hands out the database instance the process already has open for
    that path, an old version after a swap; attaching to a fresh in-memory instance reads the
    file that is at the path now.

    Raises:
        EosError: there is no serving database at ``path`` yet.
    """
    if not Path(path).exists():
        raise EosError(f"{path} does not exist yet: materialize a stream's serving/kpis first")
    conn = duckdb.connect()
    quoted = str(path).replace("'", "''")
    conn.execute(f"ATTACH '{quoted}' AS {ATTACHED} (READ_ONLY)")
    conn.execute(f"USE {ATTACHED}")
    return conn


@contextlib.contextmanager
def _writer_lock(target: Path) -> Iterator[None]:
    lock = Path(f"{target}.lock")
    with lock.open("a") as handle:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EosError(
                        f"another serving run has been writing {target} for over "
                        f"{LOCK_WAIT_S:.0f} s: wait for it to end or stop it"
                    ) from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
