"""The processes of the local services (the embedded broker, the Spark server).

Each service records its running process (address, pid...) as one JSON file under the state
folder. A recorded pid is trusted only while it still runs the service's Java main class: the
pid of a stale record may belong to another program by now.
"""

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

RecordT = TypeVar("RecordT")


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


def runs_main_class(pid: int, main_class: str) -> bool:
    """True when process ``pid`` was started with the Java main class ``main_class``."""
    try:
        return main_class.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return not Path("/proc").is_dir()  # no procfs (macOS): trust the live pid
