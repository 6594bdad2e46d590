"""Real-service fixtures: one Kafka broker per test session, fresh topics, a committed reader.

``EOS_KAFKA_BOOTSTRAP`` points the tests at a Kafka of your own; otherwise one embedded broker
is started for the session in a temporary folder and stopped with SIGTERM at the end.
"""

import atexit
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest
from _pytest.nodeid import NodeId

from eos_assets.devkit import broker
from eos_assets.settings import Settings
from eos_assets_tests.support import released
from eos_assets_tests.support.committed import ReadRecord as ReadRecord
from eos_assets_tests.support.committed import read_committed_records

# The other real-service fixtures (a SparkSession, a lake root, an S3 server) live next to
# this file.
pytest_plugins = [
    "eos_assets_tests.support.plugins",
    "eos_assets_tests.support.cluster",
    "eos_assets_tests.support.s3",
    "eos_assets_tests.support.durations",
    "eos_assets_tests.support.ledger",
    "eos_assets_tests.support.registry",
]


# Fixtures that start or reach a real service: a test using one (directly or through another
# fixture) is marked ``services``, and ``make test-fast`` leaves it out.
SERVICE_FIXTURES = frozenset(
    {
        "kafka_bootstrap",
        "kafka_cluster",
        "spark",
        "spark_server_state",
        "dagster_dev",
        "chromium",
        "postgres",
        "s3_server",
        "schema_registry",
    }
)
# Modules whose tests start a broker, a JVM or a Spark server of their own, without a fixture.
SERVICE_MODULES = frozenset(
    {
        "test_broker",
        "test_cli",
        "test_spark_cds",
        "test_spark_connect",
        "test_bronze_asset",
        "test_registry",
    }
)


# Worker groups of ``pytest -n N --dist loadgroup`` (``make test``): the tests of each service
# the session shares run in one worker, so it starts once (the 3-node cluster, the Spark server,
# the S3 server, the schema registry); every other test in the worker of its module, which starts
# its fixtures once. The cluster's and the Spark server's groups were one: together they held
# 1,900 of a loaded suite's 4,980 test-seconds in one worker, the run's longest path.
SHARED_SERVICES = {
    "kafka_cluster": "cluster",
    "spark_server_state": "spark-server",
    "s3_server": "s3",
    "schema_registry": "registry",
}
# Services a worker stops after the last test of the group that uses them
# (``support/released.py``): those only one group uses, and the Spark server, which the next test
# that needs it starts again (``spark_server_state``).
RELEASED = ("kafka_cluster", "schema_registry", "s3_spark", "_session_spark_server")
RESTARTED = frozenset({"_session_spark_server"})
_GROUP = pytest.StashKey[str]()
_RELEASES = pytest.StashKey[tuple[str, ...]]()


def worker_group(item: pytest.Item, fixtures: set[str]) -> str:
    """The worker group of a test."""
    groups = [group for name, group in SHARED_SERVICES.items() if name in fixtures]
    return groups[0] if groups else item.nodeid.split("::")[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs a service (``make test-fast`` runs the others), and name the
    worker group of each (used only when the tests run in parallel workers)."""
    grouped = config.getoption("loadgroup", False)  # True in a worker of ``--dist loadgroup``
    users: dict[str, set[str]] = {name: set() for name in RELEASED}
    for item in items:
        module = getattr(item, "module", None)
        own = module is not None and module.__name__.rpartition(".")[2] in SERVICE_MODULES
        fixtures: set[str] = set(getattr(item, "fixturenames", ()))
        if own or SERVICE_FIXTURES & fixtures:
            item.add_marker(pytest.mark.services)
        group = worker_group(item, fixtures)
        item.stash[_GROUP] = group
        for name in RELEASED:
            if name in fixtures:
                users[name].add(group)
        if grouped:
            # The scheduler groups the tests whose ids end in the same "@group". pytest-xdist
            # 3.8 writes that suffix where pytest 9 no longer reads the id from: without this,
            # every test was scheduled alone and each worker started every shared service.
            item._id = NodeId.parse(f"{item.nodeid}@{group}")  # pyright: ignore[reportPrivateUsage]
    if not grouped:
        return
    items.sort(key=_schedule_rank(items).__getitem__)
    for item in items:
        group = item.stash[_GROUP]
        item.stash[_RELEASES] = tuple(
            name
            for name in RELEASED
            if group in users[name] and (name in RESTARTED or len(users[name]) == 1)
        )


def _schedule_rank(items: list[pytest.Item]) -> dict[pytest.Item, int]:
    """The order the workers take the groups in: the shared services' groups first (the longest,
    and their services stop once done), then the groups with a test marked ``slow``, then the
    rest in collection order. A long group taken last ran alone while the other worker idled;
    the scheduler's own order (most tests first) took single slow tests last."""
    slow = {item.stash[_GROUP] for item in items if item.get_closest_marker("slow")}
    services = list(SHARED_SERVICES.values())

    def rank(group: str) -> int:
        return services.index(group) if group in services else len(services) + (group not in slow)

    return {item: rank(item.stash[_GROUP]) for item in items}


def pytest_configure(config: pytest.Config) -> None:
    """Workers of ``--dist loadgroup`` take the groups in the order of ``_schedule_rank``."""
    if config.getoption("dist", "no") == "loadgroup":
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last test of a worker group, stop the services no later test of this worker
    needs (a worker runs a group's tests one after another)."""
    releases = item.stash.get(_RELEASES, ())
    if releases and (nextitem is None or nextitem.stash.get(_GROUP, "") != item.stash[_GROUP]):
        for name in releases:
            released.release(name)


@pytest.fixture(scope="session")
def kafka_client_config() -> dict[str, str]:
    """Extra client properties (security) from ``EOS_KAFKA_*``; empty for the embedded broker."""
    return dict(Settings.from_env().kafka_client)


@pytest.fixture(scope="session")
def kafka_bootstrap(
    tmp_path_factory: pytest.TempPathFactory, kafka_client_config: dict[str, str]
) -> Iterator[str]:
    """Bootstrap servers of the session's broker: ``EOS_KAFKA_BOOTSTRAP`` or an embedded one."""
    external = os.environ.get("EOS_KAFKA_BOOTSTRAP")
    if external:
        broker.check_reachable(external, kafka_client_config)
        yield external
        return
    info = broker.start_broker(tmp_path_factory.mktemp("kafka"))
    try:
        yield info.bootstrap
    finally:
        broker.stop_broker(info)


@pytest.fixture
def make_topic(
    kafka_bootstrap: str, kafka_client_config: dict[str, str], request: pytest.FixtureRequest
) -> Callable[..., str]:
    """Factory: ``make_topic(partitions=3)`` creates a topic of its own; returns its name."""

    def make(partitions: int = 3) -> str:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80]
        name = f"{stem}-{uuid.uuid4().hex[:8]}"
        broker.ensure_topic(kafka_bootstrap, name, partitions, kafka_client_config)
        return name

    return make


@pytest.fixture
def read_committed(
    kafka_bootstrap: str, kafka_client_config: dict[str, str]
) -> Callable[..., list[ReadRecord]]:
    """Factory: ``read_committed(topic, starts=None)`` reads to the end as read_committed.

    ``starts`` maps partitions to first offsets (default: every partition from its beginning);
    partitions not in a given ``starts`` are not read.
    """
    config = {**kafka_client_config, "bootstrap.servers": kafka_bootstrap}

    def read(topic: str, starts: dict[int, int] | None = None, timeout: float = 30.0):
        return read_committed_records(config, topic, starts, timeout)

    return read


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the process once pytest has reported everything and the exit handlers have run,
    without the rest of the interpreter's shutdown: there, DuckDB's bindings (nanobind) list
    every object the shutdown did not free, hundreds of lines that push pytest's summary of
    failures out of a log's tail."""
    if _EXIT_STATUS and not hasattr(config, "workerinput"):  # a parallel worker ends as usual
        atexit._run_exitfuncs()  # what the shutdown would run first
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
