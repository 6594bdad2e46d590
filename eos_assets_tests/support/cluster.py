"""The session's replicated Kafka: three KRaft nodes, started once, that tests kill and restart.

A test that kills a node restarts it before it ends (``LiveCluster.revive``), so the next test
finds three nodes again.
"""

import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import pytest
from confluent_kafka.admin import AdminClient

from eos_assets.devkit import cluster, cluster_security
from eos_assets.lib import local_process
from eos_assets_tests.support import released

T = TypeVar("T")

# Heaps of the session's nodes: three JVMs next to Spark on a 2-core machine.
TEST_HEAP = "-Xmx320m"
# SCRAM users of the secured listener; each test grants its user what it needs.
USERS = (
    "eos-ingest",
    "eos-describe",
    "eos-nobody",
    "eos-agg-out",
    "eos-agg-out-no-txn",
    "eos-agg-out-no-write",
    "eos-agg-out-no-position",
    "eos-producer",
)


@dataclass
class LiveCluster:
    """The running cluster of the session; ``info`` follows the restarts."""

    info: cluster.ClusterInfo
    passwords: dict[str, str] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        """Every node's address, as a client's ``bootstrap.servers``."""
        return self.info.bootstrap

    def leader(self, topic: str, partition: int, timeout: float = 60.0) -> int:
        """The node id leading ``topic[partition]`` (waits while it has none)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + timeout
        while True:
            found = admin.list_topics(topic, timeout=10).topics[topic].partitions[partition]
            if found.leader > 0 or time.monotonic() > deadline:
                return found.leader
            time.sleep(0.2)

    def coordinator(self, group: str) -> int:
        """The node id of the coordinator of consumer group ``group``."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        (future,) = admin.describe_consumer_groups([group], request_timeout=30).values()
        return future.result(30).coordinator.id

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The node id leading the ``__transaction_state`` partition of ``transactional_id``:
        Kafka places an id by its Java ``String.hashCode``, made positive, modulo the
        partitions."""
        h = 0
        for ch in transactional_id:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        state = self.replicas("__transaction_state")
        return self.leader("__transaction_state", (h & 0x7FFFFFFF) % len(state))

    def replicas(self, topic: str) -> dict[int, list[int]]:
        """The replicas of each partition of ``topic``."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: list(info.replicas) for p, info in partitions.items()}

    def client(self, user: str, password: str | None = None) -> dict[str, str]:
        """Client properties of ``user`` on the secured listener (its password by default)."""
        secret = self.passwords[user] if password is None else password
        config = cluster_security.client_config(user, secret, self.info.ca_pem)
        return {"bootstrap.servers": self.info.secure_bootstrap, **config}

    def grant(self, user: str, kind: str, name: str, *operations: str) -> None:
        """Allow ``user`` the ``operations`` (READ, WRITE...) on the resource ``kind`` (TOPIC,
        GROUP, TRANSACTIONAL_ID) named ``name``."""
        cluster_security.grant(self.bootstrap, user, kind, name, *operations)

    def kill(self, node_id: int) -> None:
        """SIGKILL node ``node_id``."""
        cluster.kill_node(self.info, node_id)

    def restart(self, node_id: int, timeout: float = 120.0) -> None:
        """Stop node ``node_id`` with SIGTERM, start it again, and wait until every partition
        has all three replicas in sync: one step of a rolling restart.

        Raises:
            AssertionError: the node outlives its SIGTERM by three minutes, or the replicas are not
                back in sync within ``timeout`` seconds.
        """
        pid = self.info.node(node_id).pid
        os.killpg(pid, signal.SIGTERM)
        # A controlled shutdown first moves the leadership of the node's partitions: on a loaded
        # 2-core machine that once took over a minute.
        assert local_process.wait_exit(pid, 180), f"node {node_id} ignored SIGTERM for 180s"
        self.info = cluster.restart_node(self.info, node_id)
        assert self._wait_in_sync(timeout), f"node {node_id}: replicas not in sync in {timeout}s"

    def revive(self) -> None:
        """Restart every node that is not running, and wait until all three are in sync."""
        for i, node in enumerate(self.info.nodes, 1):
            if not local_process.alive(node.pid):
                self.info = cluster.restart_node(self.info, i)
        self._wait_in_sync()

    def _wait_in_sync(self, timeout: float = 90.0) -> bool:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            topics = admin.list_topics(timeout=10).topics.values()
            parts = [p for t in topics for p in t.partitions.values()]
            if parts and all(len(p.isrs) == len(self.info.nodes) for p in parts):
                return True
            time.sleep(0.5)
        return False


class Background(Generic[T]):
    """``call()`` run in a thread of its own while the test kills brokers under it."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._done: list[T | BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(call,))
        self._thread.start()

    def _run(self, call: Callable[[], T]) -> None:
        try:
            self._done.append(call())
        except BaseException as exc:  # handed to the test thread
            self._done.append(exc)

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the call to end."""
        self._thread.join(timeout)

    def result(self) -> T:
        """What the call returned; what it raised is raised here."""
        assert self._done, "the call did not end in time"
        (outcome,) = self._done
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    """Three KRaft nodes (RF 3, min ISR 2, no unclean election) for the whole session, with
    a plaintext listener (super user) and a SASL_SSL one for the ``USERS``."""
    passwords = {user: secrets.token_urlsafe(12) for user in USERS}
    folder = tmp_path_factory.mktemp("cluster")
    info = cluster.start_cluster(folder, heap=TEST_HEAP, users=passwords)
    live = LiveCluster(info, passwords)
    stop = released.on_release("kafka_cluster", lambda: cluster.stop_cluster(live.info))
    try:
        yield live
    finally:
        stop()
