"""A replicated Kafka cluster from the installed jars: three KRaft nodes on 127.0.0.1.

Each node is a combined broker and controller (``kafka.Kafka``) with a data folder of its own
(``node-1`` ...) under one cluster folder; the controllers form one static quorum. The
settings are those a production cluster needs for exactly-once: every partition, the internal
topics included, on three replicas, writes acknowledged by two in sync, and no unclean leader
election (a replica that missed acknowledged records never becomes leader).
"""

import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from eos_assets.devkit import broker
from eos_assets.devkit import cluster_security as security
from eos_assets.lib import local_process
from eos_assets.lib.errors import BrokerError
from eos_assets.lib.kafka.kafka_admin import probe_transactions

# Seconds the last running node of a stopped cluster gets before SIGKILL (see stop_cluster).
LAST_NODE_GRACE_S = 5.0
# A small heap per node: three of them share a laptop with Spark.
NODE_HEAP = "-Xmx384m"
REPLICATED = {
    **broker.ONE_NODE,
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "unclean.leader.election.enable": "false",
    # A killed node's partitions move to a live one this long after its last heartbeat
    # (Kafka's default is 9 s).
    "broker.session.timeout.ms": "6000",
    "broker.heartbeat.interval.ms": "1000",
}


@dataclass(frozen=True)
class ClusterInfo:
    """A running cluster: the bootstrap list of every node, and each node as a broker."""

    bootstrap: str
    nodes: tuple[broker.BrokerInfo, ...]
    heap: str = NODE_HEAP
    secure_bootstrap: str = ""
    ca_pem: str = ""

    def node(self, node_id: int) -> broker.BrokerInfo:
        """The node with Kafka ``node.id`` ``node_id`` (1-based)."""
        return self.nodes[node_id - 1]


def start_cluster(
    data_dir: Path,
    nodes: int = 3,
    timeout: float = 180.0,
    overrides: Mapping[str, str] | None = None,
    heap: str = NODE_HEAP,
    users: Mapping[str, str] | None = None,
) -> ClusterInfo:
    """Start ``nodes`` KRaft nodes with their data under ``data_dir``; return once a
    transaction commits and a read_committed reader reads it.

    The first start formats every node with one cluster id; a later start reuses the data and
    the ports. With ``users`` (name -> password) every node also gets a SASL_SSL listener
    (``cluster_security``): those SCRAM users are created at the first format, and a CA and
    the brokers' certificate are made in ``data_dir/tls`` at the first start.

    Raises:
        BrokerError: Java or the jars are missing, a node exits early, or the cluster never
            becomes ready.
    """
    java, classpath = broker.java_and_classpath()
    data_dir = data_dir.resolve()
    folders = [data_dir / f"node-{i}" for i in range(1, nodes + 1)]
    ports: list[tuple[int, int]] = []
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        broker.refuse_if_locked(folder)
        ports.append(_distinct(folder, ports))
    shared_id = broker.cluster_id(data_dir)
    voters = ",".join(f"{i}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports, 1))
    tls = security.ensure_tls(data_dir / "tls", java) if users is not None else None
    secure: list[int] = []
    procs = []
    try:
        for i, (folder, (port, controller)) in enumerate(zip(folders, ports, strict=True), 1):
            (folder / "cluster.id").write_text(shared_id)
            extra = dict(overrides or {})
            if tls is not None:
                taken = {p for pair in ports for p in pair} | set(secure)
                secure.append(security.secure_port(folder, taken))
                extra = {**security.listener_properties(port, secure[-1], controller, tls), **extra}
            properties = _write_node(folder, i, port, controller, voters, extra)
            if not (folder / "logs" / "meta.properties").exists():
                scram = security.scram_arguments(users or {})
                broker.format_storage(java, classpath, folder, properties, scram)
            procs.append(broker.launch(java, classpath, folder, properties, heap))
    except BaseException:
        # A node that failed to format or launch: the ones already started stop with it.
        for proc in procs:
            proc.kill()
        raise
    info = ClusterInfo(
        bootstrap=",".join(f"127.0.0.1:{p}" for p, _ in ports),
        nodes=tuple(
            broker.BrokerInfo(f"127.0.0.1:{p}", proc.pid, str(folder))
            for (p, _), proc, folder in zip(ports, procs, folders, strict=True)
        ),
        heap=heap,
        secure_bootstrap=",".join(f"127.0.0.1:{p}" for p in secure),
        ca_pem=tls.ca_pem if tls is not None else "",
    )
    try:
        deadline = time.monotonic() + timeout
        for proc, folder, (port, _) in zip(procs, folders, ports, strict=True):
            broker.wait_started(proc, folder, port, max(1.0, deadline - time.monotonic()))
        probe_transactions(info.bootstrap, max(1.0, deadline - time.monotonic()))
    except BaseException:
        stop_cluster(info, timeout=10.0)
        raise
    return info


def restart_node(info: ClusterInfo, node_id: int, timeout: float = 300.0) -> ClusterInfo:
    """Start node ``node_id`` again on its data and ports (after ``kill_node``); return the
    cluster with its new process once it has started (or fail after ``timeout`` seconds: on a
    2-core machine at a load average of 19, a node took 120 s to start again)."""
    java, classpath = broker.java_and_classpath()
    old = info.node(node_id)
    folder = Path(old.data_dir)
    port = int(old.bootstrap.rsplit(":", 1)[1])
    proc = broker.launch(java, classpath, folder, folder / "server.properties", info.heap)
    broker.wait_started(proc, folder, port, timeout)
    nodes = list(info.nodes)
    nodes[node_id - 1] = replace(old, pid=proc.pid)
    return replace(info, nodes=tuple(nodes))


def kill_node(info: ClusterInfo, node_id: int) -> None:
    """SIGKILL node ``node_id``, as a lost host would die, and wait until it has exited."""
    local_process.kill(info.node(node_id).pid)


def stop_cluster(info: ClusterInfo, timeout: float = 60.0) -> None:
    """Stop every node with SIGTERM at once, then wait for each.

    The node that outlives the others cannot end its controlled shutdown: its controller has
    lost the quorum that would record it (a three-node cluster stopped with SIGTERM took 62 s,
    the last node waiting until its SIGKILL). Once it is alone it gets ``LAST_NODE_GRACE_S``,
    then SIGKILL; its next start recovers its log.
    """
    running = [node.pid for node in info.nodes if local_process.alive(node.pid)]
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while len(running) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
        running = [pid for pid in running if local_process.alive(pid)]
    for pid in running:
        if not local_process.wait_exit(pid, LAST_NODE_GRACE_S):
            local_process.kill(pid)


def write_state(state_dir: Path, info: ClusterInfo) -> None:
    """Record the cluster in ``state_dir/broker``: as the embedded broker for the product
    (its bootstrap list, node 1's process) and with every node for ``down``."""
    broker.write_state(state_dir, replace(info.nodes[0], bootstrap=info.bootstrap))
    path = _state_file(state_dir)
    nodes = [asdict(n) for n in info.nodes]
    path.write_text(json.dumps({**asdict(info), "nodes": nodes}))


def read_state(state_dir: Path) -> ClusterInfo | None:
    """The recorded cluster of ``state_dir`` (running or not), or None without a record."""
    with contextlib.suppress(FileNotFoundError, ValueError, TypeError, KeyError):
        raw = json.loads(_state_file(state_dir).read_text())
        nodes = tuple(broker.BrokerInfo(**n) for n in raw["nodes"])
        return ClusterInfo(**{**raw, "nodes": nodes})
    return None


def up(state_dir: Path, nodes: int = 3, secure: bool = False) -> ClusterInfo:
    """Start the cluster of ``state_dir`` unless it runs already; return it.

    ``secure`` (or a cluster first made so) adds the SASL_SSL listener with the users of
    ``cluster_security.local_users``, the product's with README's ACLs.

    Raises:
        BrokerError: the one-node broker of ``state_dir`` runs (stop it first), or ``secure``
            is asked of a cluster made without it.
    """
    folder = state_dir / "broker" / "cluster"
    made = (folder / "node-1" / "logs" / "meta.properties").exists()
    if secure and made and not security.has_users(folder):
        raise BrokerError(
            f"the cluster in {folder} was made without --secure (its users are created when "
            "it is made): stop it and delete that folder, or start it without --secure"
        )
    running = read_state(state_dir)
    if running is not None and all(_is_node(n.pid) for n in running.nodes):
        if secure and not running.secure_bootstrap:
            raise BrokerError("the cluster runs without --secure: `eos-assets broker down` first")
        return running
    if broker.broker_status(state_dir) is not None:
        raise BrokerError(
            "the one-node broker runs: stop it (`eos-assets broker down`) before "
            "`eos-assets broker up --nodes 3`"
        )
    users = security.local_users(folder) if secure or security.has_users(folder) else None
    extra = security.super_users() if users is not None else None
    info = start_cluster(folder, nodes, overrides=extra, users=users)
    if users is not None:
        security.grant_product(info.bootstrap)
    write_state(state_dir, info)
    return info


def down(state_dir: Path) -> bool:
    """Stop the cluster of ``state_dir``; return False when none of its nodes was running."""
    info = read_state(state_dir)
    if info is None:
        return False
    running = [n for n in info.nodes if _is_node(n.pid)]
    stop_cluster(replace(info, nodes=tuple(running)))
    _state_file(state_dir).unlink(missing_ok=True)
    (Path(state_dir) / "broker" / "broker.json").unlink(missing_ok=True)
    return bool(running)


def _distinct(folder: Path, taken: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """This node's Kafka and controller ports, none shared with the nodes before it."""
    used = {p for pair in taken for p in pair}
    pair = broker.ports(folder, 0)
    while used & set(pair):
        (folder / "ports.json").unlink(missing_ok=True)
        pair = broker.ports(folder, 0)
    return pair


def _write_node(
    folder: Path,
    node_id: int,
    port: int,
    controller: int,
    voters: str,
    overrides: Mapping[str, str],
) -> Path:
    properties = {
        **REPLICATED,
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.quorum.voters": voters,
        "log.dirs": str(folder / "logs"),
        **overrides,
    }
    path = folder / "server.properties"
    lines = ["# Written by eos-assets at every start; edit REPLICATED in devkit/cluster.py."]
    path.write_text("\n".join([*lines, *(f"{k}={v}" for k, v in properties.items())]) + "\n")
    return path


def _state_file(state_dir: Path) -> Path:
    return Path(state_dir) / "broker" / "cluster.json"


def _is_node(pid: int) -> bool:
    return local_process.runs_service(pid, broker.MAIN_CLASS)
