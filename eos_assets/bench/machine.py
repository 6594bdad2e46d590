"""The machine a bench runs on, and the memory of a process tree sampled from ``/proc``."""

import os
import platform
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE")


def machine_info() -> dict[str, object]:
    """Cores, RAM, CPU model, Python and the load average now."""
    model = "?"
    with Path("/proc/cpuinfo").open() as lines:
        for line in lines:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "ram_gib": os.sysconf("SC_PHYS_PAGES") * _PAGE / 2**30,
        "cpu_model": model,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "load_start": list(os.getloadavg()),
    }


def _rss(pid: int) -> int:
    """Resident set size of ``pid`` in bytes (0 when it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return found


def descendants(pid: int) -> Iterator[int]:
    """Every process below ``pid``."""
    todo = _children(pid)
    while todo:
        child = todo.pop()
        yield child
        todo += _children(child)


def _kind(pid: int) -> str:
    try:
        exe = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
    except OSError:
        return "other"
    name = Path(exe).name
    if name == "java":
        return "jvm"
    if name.startswith("python"):
        return "python_workers"
    return "other"


@dataclass
class RssPeaks:
    """Peak resident memory (bytes) of a process tree, by part, over the sampled time."""

    driver: int = 0
    jvm: int = 0
    python_workers: int = 0
    total: int = 0
    samples: int = 0
    timeline: list[tuple[float, int]] = field(default_factory=list)

    def mib(self) -> dict[str, float]:
        """The peaks in MiB."""
        parts = ("driver", "jvm", "python_workers", "total")
        return {p: round(getattr(self, p) / 2**20, 1) for p in parts}


class RssSampler:
    """Samples the RSS of ``pid`` and its descendants every ``interval`` seconds in a thread.

    Python workers of a local Spark are children of the JVM; they are summed, as they run at
    the same time. ``driver`` is ``pid`` itself.
    """

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.pid = pid
        self.interval = interval
        self.peaks = RssPeaks()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._began = 0.0

    def __enter__(self) -> "RssSampler":
        self._began = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        """Take one sample now."""
        parts = {"driver": _rss(self.pid), "jvm": 0, "python_workers": 0, "other": 0}
        for child in descendants(self.pid):
            parts[_kind(child)] += _rss(child)
        p = self.peaks
        total = parts["driver"] + parts["jvm"] + parts["python_workers"]
        p.driver = max(p.driver, parts["driver"])
        p.jvm = max(p.jvm, parts["jvm"])
        p.python_workers = max(p.python_workers, parts["python_workers"])
        p.total = max(p.total, total)
        p.samples += 1
        if p.samples % 5 == 1:
            p.timeline.append((round(time.monotonic() - self._began, 1), total // 2**20))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
