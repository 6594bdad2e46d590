"""The embedded Kafka broker (noida-db) for the demo and the tests.

The product needs only "a Kafka broker at this address"; this module starts one locally when
none is configured and records its address under the state folder.
"""

import contextlib
import importlib.util
import json
import logging
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from eos_assets.lib.errors import BrokerError

# The probes work with any broker, so they live in kafka_admin; re-exported for one import.
from eos_assets.lib.kafka_admin import check_reachable as check_reachable
from eos_assets.lib.kafka_admin import ensure_topic as ensure_topic
from eos_assets.lib.kafka_admin import probe
from eos_assets.lib.kafka_admin import wait_ready as wait_ready

log = logging.getLogger(__name__)

_ADDRESS = re.compile(r"^\s*kafka\s+(\S+:\d+)\s*$", re.MULTILINE)
_LOG_NAME = "noida.log"
# Children started by this process: reaped with Popen.wait so no zombie or ResourceWarning remains.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class BrokerInfo:
    """A running embedded broker: its bootstrap address, process id and data folder."""

    bootstrap: str
    pid: int
    data_dir: str


def start_broker(data_dir: Path, port: int = 0, timeout: float = 30.0) -> BrokerInfo:
    """Start an embedded broker storing its data in ``data_dir`` and wait until it answers.

    Args:
        data_dir: folder of the broker's data and of its log file ``noida.log``.
        port: Kafka port on 127.0.0.1; 0 picks a free one.
        timeout: seconds to wait for the broker to answer a metadata request.

    Raises:
        BrokerError: the port is busy, the process exits early, or it never answers.
    """
    busy = BrokerError(
        f"port {port} on 127.0.0.1 is busy: stop what uses it or choose another port with --port"
    )
    if port and not _port_free(port):
        raise busy
    data_dir = data_dir.resolve()  # recorded in the state file: must not depend on the cwd
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / _LOG_NAME
    command = [str(_binary()), "start", "--data-dir", str(data_dir), "--host", "127.0.0.1"]
    command += ["--only", "kafka", "--kafka-port", str(port)]
    # A file, not a pipe: nobody drains a pipe after startup and a full pipe would block it.
    # Its own session, so SIGTERM to the group reaches every process it may spawn.
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    _CHILDREN[proc.pid] = proc
    deadline = time.monotonic() + timeout
    bootstrap = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _CHILDREN.pop(proc.pid, None)
            reason = _last_line(log_path)
            if port and "already in use" in reason:
                raise busy  # taken between our check and its bind
            raise BrokerError(f"embedded Kafka broker exited at start: {reason}")
        if bootstrap is None:
            match = _ADDRESS.search(log_path.read_text(errors="replace"))
            bootstrap = match.group(1) if match else None
        if bootstrap is not None and probe(bootstrap, {}, 1.0):
            return BrokerInfo(bootstrap=bootstrap, pid=proc.pid, data_dir=str(data_dir))
        time.sleep(0.05)
    stop_broker(BrokerInfo(bootstrap or "", proc.pid, str(data_dir)))
    raise BrokerError(f"embedded Kafka broker did not answer within {timeout:g}s: see {log_path}")


def stop_broker(info: BrokerInfo, timeout: float = 60.0) -> None:
    """Stop a broker with SIGTERM to its process group and wait until it has exited.

    SIGTERM lets it write its data file, which takes seconds for a large store (measured:
    4.5 s for 400k records); only when it is still alive after ``timeout`` seconds is it
    killed with SIGKILL (logged as a warning, since its last writes may be lost).
    """
    if not _alive(info.pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(info.pid, signal.SIGTERM)
    if _wait_exit(info.pid, timeout):
        return
    log.warning("broker pid %s ignored SIGTERM for %ss: sending SIGKILL", info.pid, timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(info.pid, signal.SIGKILL)
    _wait_exit(info.pid, 10.0)


def write_state(state_dir: Path, info: BrokerInfo) -> None:
    """Record the running embedded broker in ``state_dir/broker/broker.json``."""
    path = _state_file(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(info)))
    tmp.replace(path)  # atomic: a reader never sees half a file


def read_state(state_dir: Path) -> BrokerInfo | None:
    """Return the recorded embedded broker (running or not), or None without a record."""
    try:
        return BrokerInfo(**json.loads(_state_file(state_dir).read_text()))
    except (FileNotFoundError, ValueError, TypeError):
        return None


def broker_status(state_dir: Path) -> BrokerInfo | None:
    """Return the embedded broker when its process is alive and it answers, else None."""
    info = read_state(state_dir)
    if info is None or not _is_broker(info.pid):
        return None
    return info if probe(info.bootstrap, {}, 2.0) else None


def up(state_dir: Path, port: int = 0) -> BrokerInfo:
    """Start the embedded broker of ``state_dir`` unless it runs already; return it."""
    running = broker_status(state_dir)
    if running is not None:
        return running
    info = start_broker(state_dir / "broker" / "data", port=port)
    write_state(state_dir, info)
    return info


def down(state_dir: Path) -> bool:
    """Stop the embedded broker of ``state_dir``; return False when none was running."""
    info = read_state(state_dir)
    if info is None:
        return False
    # The pid of a stale record may belong to another program by now: never signal that.
    running = _is_broker(info.pid)
    if running:
        stop_broker(info)
    _state_file(state_dir).unlink(missing_ok=True)
    return running


def embedded_bootstrap(state_dir: Path) -> str:
    """Return the address of the running embedded broker of ``state_dir``.

    Raises:
        BrokerError: no embedded broker runs.
    """
    info = read_state(state_dir)
    if info is None or not _is_broker(info.pid):
        raise BrokerError(
            "no Kafka broker: run `eos-assets broker up` (or `make demo`), "
            "or set EOS_KAFKA_BOOTSTRAP"
        )
    return info.bootstrap


def _binary() -> Path:
    spec = importlib.util.find_spec("noida_db")
    if spec is None or spec.origin is None:
        raise BrokerError("noida-db is not installed: run `pip install noida-db==0.2.3`")
    # The binary itself, not the Python wrapper: SIGTERM to the wrapper orphans the broker.
    return Path(spec.origin).parent / "noida-db"


def _state_file(state_dir: Path) -> Path:
    return Path(state_dir) / "broker" / "broker.json"


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR as servers use it, so a port in TIME_WAIT does not count as busy.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _last_line(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    # The GLIBC_2.39 notice is noise on Debian 12; an `error:` line says what went wrong.
    useful = [line for line in lines if line and "GLIBC" not in line]
    errors = [line for line in useful if line.startswith("error:")]
    return (errors or useful or ["(no output)"])[-1]


def _alive(pid: int) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
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


def _is_broker(pid: int) -> bool:
    if not _alive(pid):
        return False
    try:
        return b"noida-db" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc").is_dir()  # no procfs (macOS): trust the live pid


def _wait_exit(pid: int, timeout: float) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        _CHILDREN.pop(pid, None)
        return True
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
