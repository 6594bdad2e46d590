"""The embedded Kafka broker: Apache Kafka in KRaft mode, one node, from the installed jars.

The product needs only "a Kafka broker at this address"; this module starts one locally when
none is configured (``EOS_KAFKA_BOOTSTRAP`` unset) and records its address under the state
folder. It is a real Apache Kafka (``kafka.Kafka``, combined broker and controller) with the
one-node settings below; its data folder survives ``down``/``up``.
"""

import contextlib
import fcntl
import json
import subprocess
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from eos_assets.lib import local_process
from eos_assets.lib.errors import BrokerError, EosError

# The probes work with any broker, so they live in kafka_admin; re-exported for one import.
from eos_assets.lib.kafka.kafka_admin import check_reachable as check_reachable
from eos_assets.lib.kafka.kafka_admin import ensure_topic as ensure_topic
from eos_assets.lib.kafka.kafka_admin import probe_transactions
from eos_assets.lib.kafka.kafka_admin import wait_ready as wait_ready
from eos_assets.lib.ports import free_port, port_free
from eos_assets.lib.spark import jars
from eos_assets.lib.spark.java import require_java

MAIN_CLASS = "kafka.Kafka"
_LOG_NAME = "server.log"
_OUT_NAME = "broker.out"
_STARTED = "Kafka Server started"
# A small heap: one node serving one laptop's streams. Kafka's own start script uses 1 GiB.
HEAP = "-Xmx512m"
# Settings of a one-node cluster: nothing can be replicated, so every internal topic has one
# replica and accepts writes with one in sync. Fewer partitions for the internal topics than
# Kafka's 50: a laptop has a few groups and producers, and each partition costs start time.
ONE_NODE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "min.insync.replicas": "1",
    "default.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    # Expired transactions (a producer that died inside one) are aborted within seconds of
    # their timeout instead of up to 10 s later (Kafka's default interval).
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
    # No no-op record in the metadata log every 500 ms while nothing changes (Kafka's default,
    # a liveness signal for monitoring): written, replicated and applied by every node, they
    # cost an idle node 14.6 s of CPU a minute here, 8-10 s without, and an idle 3-node
    # cluster 35.4 s against 22.2 s.
    "metadata.max.idle.interval.ms": "0",
}


@dataclass(frozen=True)
class BrokerInfo:
    """A running embedded broker: its bootstrap address, process id and data folder."""

    bootstrap: str
    pid: int
    data_dir: str


def start_broker(
    data_dir: Path,
    port: int = 0,
    timeout: float = 90.0,
    overrides: Mapping[str, str] | None = None,
) -> BrokerInfo:
    """Start Apache Kafka with its data in ``data_dir``; return once transactions work.

    The first start formats the storage with a new cluster id (kept in ``data_dir``); a later
    start reuses the data, the cluster id and the ports of the previous one.

    Args:
        data_dir: folder of the broker's log segments, settings, cluster id and log files.
        port: Kafka port on 127.0.0.1; 0 reuses the previous start's port or picks a free one.
        timeout: seconds to wait until a transactional producer and a read_committed consumer
            both work.
        overrides: extra broker properties (``server.properties`` names), e.g. shorter
            timeouts in tests.

    Raises:
        BrokerError: Java or the jars are missing, the port is busy, the process exits early,
            or it never becomes ready.
    """
    java = _java()
    classpath = _classpath()
    data_dir = data_dir.resolve()  # recorded in the state file: must not depend on the cwd
    data_dir.mkdir(parents=True, exist_ok=True)
    refuse_if_locked(data_dir)
    kafka_port, controller_port = ports(data_dir, port)
    properties = data_dir / "server.properties"
    _write_properties(properties, data_dir, kafka_port, controller_port, overrides or {})
    if not (data_dir / "logs" / "meta.properties").exists():
        format_storage(java, classpath, data_dir, properties, ["--standalone"])
    proc = launch(java, classpath, data_dir, properties)
    info = BrokerInfo(bootstrap=f"127.0.0.1:{kafka_port}", pid=proc.pid, data_dir=str(data_dir))
    try:
        wait_started(proc, data_dir, kafka_port, timeout)
        probe_transactions(info.bootstrap, timeout)
    except BaseException:
        stop_broker(info, timeout=10.0)
        raise
    return info


def stop_broker(info: BrokerInfo, timeout: float = 60.0) -> None:
    """Stop a broker with a controlled shutdown (SIGTERM) and wait until it has exited.

    Only when it is still alive after ``timeout`` seconds is it killed with SIGKILL (logged as
    a warning: its next start then recovers its logs, which takes longer).
    """
    local_process.stop(info.pid, timeout, "broker")


def kill_broker(info: BrokerInfo) -> None:
    """Kill a broker with SIGKILL at once, as a crash would, and wait until it has exited."""
    local_process.kill(info.pid)


def write_state(state_dir: Path, info: BrokerInfo) -> None:
    """Record the running embedded broker in ``state_dir/broker/broker.json``."""
    local_process.write_record(_state_file(state_dir), info)


def read_state(state_dir: Path) -> BrokerInfo | None:
    """Return the recorded embedded broker (running or not), or None without a record."""
    return local_process.read_record(_state_file(state_dir), BrokerInfo)


def broker_status(state_dir: Path) -> BrokerInfo | None:
    """Return the embedded broker when its process is alive and it answers, else None."""
    info = read_state(state_dir)
    if info is None or not _is_broker(info.pid):
        return None
    try:
        check_reachable(info.bootstrap, {}, timeout=5.0)
    except BrokerError:
        return None
    return info


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
    return local_process.stop_recorded(_state_file(state_dir), BrokerInfo, MAIN_CLASS, stop_broker)


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


def cluster_id(data_dir: Path) -> str:
    """Return the cluster id of the broker of ``data_dir``, made on first use and then kept."""
    path = data_dir / "cluster.id"
    with contextlib.suppress(FileNotFoundError):
        return path.read_text().strip()
    # Kafka's form: 16 random bytes, URL-safe base64 without padding (not starting with '-').
    while (made := urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    path.write_text(made)
    return made


def launch(
    java: str, classpath: str, data_dir: Path, properties: Path, heap: str = HEAP
) -> "subprocess.Popen[bytes]":
    """Start one Kafka node of ``properties`` (its log in ``data_dir``); return at once."""
    log4j = _write_log4j(data_dir)
    # A restart must not find the previous start's "started" line.
    with contextlib.suppress(FileNotFoundError):
        (data_dir / _LOG_NAME).replace(data_dir / f"{_LOG_NAME}.previous")
    command = [
        java, heap, "-Xms128m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log4j}",
        f"-Dkafka.logs.dir={data_dir}", "-cp", classpath, MAIN_CLASS, str(properties),
    ]  # fmt: skip
    return local_process.start_service(command, data_dir / _OUT_NAME, cwd=data_dir)


def java_and_classpath() -> tuple[str, str]:
    """The Java runtime and the Kafka classpath a node runs with.

    Raises:
        BrokerError: Java or the jars are missing.
    """
    return _java(), _classpath()


def _java() -> str:
    try:
        return require_java("the embedded Kafka broker")
    except EosError as exc:
        raise BrokerError(str(exc)) from exc


def _classpath() -> str:
    try:
        return jars.classpath("kafka")
    except EosError as exc:
        raise BrokerError(str(exc)) from exc


def refuse_if_locked(data_dir: Path) -> None:
    """Fail before touching anything when a running broker holds the data folder's lock."""
    lock = data_dir / "logs" / ".lock"
    if not lock.exists():
        return
    with lock.open("rb+") as handle:
        try:
            # The JVM locks with fcntl record locks (FileChannel.tryLock), as lockf does.
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise BrokerError(
                f"a Kafka broker is already running on {data_dir}: stop it "
                "(`eos-assets broker down`) or use another folder"
            ) from None
        fcntl.lockf(handle, fcntl.LOCK_UN)


def ports(data_dir: Path, port: int) -> tuple[int, int]:
    """The Kafka and controller ports: the given or previous ones when free, else new ones."""
    saved = data_dir / "ports.json"
    previous: dict[str, int] = {}
    with contextlib.suppress(FileNotFoundError, ValueError):
        previous = json.loads(saved.read_text())
    if port and not port_free(port):
        raise BrokerError(
            f"port {port} on 127.0.0.1 is busy: stop what uses it or choose another port "
            "with --port"
        )
    kafka = port or _reuse_or_pick(previous.get("kafka"))
    controller = _reuse_or_pick(previous.get("controller"), avoid=kafka)
    saved.write_text(json.dumps({"kafka": kafka, "controller": controller}))
    return kafka, controller


def _reuse_or_pick(port: int | None, avoid: int = 0) -> int:
    if port and port != avoid and port_free(port):
        return port
    while (picked := free_port()) == avoid:
        pass
    return picked


def _write_properties(
    path: Path, data_dir: Path, port: int, controller: int, overrides: Mapping[str, str]
) -> None:
    properties = {
        **ONE_NODE,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
        "log.dirs": str(data_dir / "logs"),
        **overrides,
    }
    lines = ["# Written by eos-assets at every start; edit ONE_NODE in devkit/broker.py instead."]
    lines += [f"{name}={value}" for name, value in properties.items()]
    path.write_text("\n".join(lines) + "\n")


def _write_log4j(data_dir: Path) -> Path:
    """Kafka's log to ``server.log`` in the data folder at INFO, the rest of the JVM at WARN."""
    path = data_dir / "log4j2.properties"
    path.write_text(
        "\n".join(
            [
                "status = warn",
                "appender.file.type = File",
                "appender.file.name = file",
                f"appender.file.fileName = {data_dir / _LOG_NAME}",
                "appender.file.layout.type = PatternLayout",
                "appender.file.layout.pattern = [%d] %p %m (%c)%n",
                "rootLogger.level = warn",
                "rootLogger.appenderRef.file.ref = file",
                "logger.kafka.name = kafka",
                "logger.kafka.level = info",
                "logger.server.name = org.apache.kafka.server",
                "logger.server.level = info",
            ]
        )
        + "\n"
    )
    return path


def format_storage(
    java: str, classpath: str, data_dir: Path, properties: Path, extra: Sequence[str] = ()
) -> None:
    """Format the storage of a new node (``extra``: ``--standalone`` for a one-node cluster,
    ``--add-scram ...`` for users); the cluster id is the one kept in ``data_dir``."""
    command = [
        java, "-Xmx256m", "-cp", classpath, "kafka.tools.StorageTool", "format",
        "-t", cluster_id(data_dir), "-c", str(properties), *extra,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        raise BrokerError(f"cannot format the broker's storage in {data_dir}: {lines[-1]}")


def wait_started(proc: subprocess.Popen[bytes], data_dir: Path, port: int, timeout: float) -> None:
    log_path = data_dir / _LOG_NAME
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not local_process.alive(proc.pid):
            reason = _failure(data_dir)
            if "Address already in use" in reason:
                raise BrokerError(
                    f"port {port} on 127.0.0.1 is busy: stop what uses it or choose another "
                    "port with --port"
                )
            raise BrokerError(f"embedded Kafka broker exited at start: {reason}")
        with contextlib.suppress(FileNotFoundError):
            if _STARTED in log_path.read_text(errors="replace"):
                return
        time.sleep(0.1)
    raise BrokerError(f"embedded Kafka broker did not start within {timeout:g}s: see {log_path}")


def _failure(data_dir: Path) -> str:
    """The most telling line the broker wrote before it exited."""
    lines: list[str] = []
    for name in (_LOG_NAME, _OUT_NAME):
        with contextlib.suppress(FileNotFoundError):
            lines += (data_dir / name).read_text(errors="replace").splitlines()
    errors = [line.strip() for line in lines if " ERROR " in line or "Exception" in line]
    useful = errors or [line.strip() for line in lines if line.strip()] or ["(no output)"]
    return useful[-1][:500]


def _state_file(state_dir: Path) -> Path:
    return Path(state_dir) / "broker" / "broker.json"


def _is_broker(pid: int) -> bool:
    return local_process.runs_service(pid, MAIN_CLASS)
