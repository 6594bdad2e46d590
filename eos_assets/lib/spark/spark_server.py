"""The local Spark Connect server: one warm Spark that every run of this machine connects to.

pyspark ships the server (``spark-connect_2.13`` in its jars) and ``spark-submit`` but no start
script, so the server is started as ``spark-submit --class SparkConnectServer spark-internal``
with the settings of every in-process session (``spark_env.spark_config``: Delta's jars and
settings, UTC, Arrow, the master's cores). It listens on 127.0.0.1 only, and its Python tasks
(``mapInArrow``) run this interpreter, so they see this environment's packages. Its address is
recorded under the state folder like the broker's.

Every run of the product joins one Spark Connect session of the server (``run_url``), named at
``up``. Spark 4.2 starts one Python daemon per session for its Python tasks and stops it only
with the server: with a session per run, each run left a ~48 MB ``pyspark.daemon`` behind
(eleven runs: 1.18 GB). One shared session keeps one daemon, and its forked workers, warm with
the modules the tasks import, serve the next run too. The session never expires
(``defaultSessionTimeout`` -1), and a client that releases it (pyspark's ``stop()``) does not
lock the others out: the server keeps no closed ids (``closedSessionsTombstonesSize`` 0), so
the next run starts the session afresh under the same id.
"""

import contextlib
import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

from eos_assets.lib import lake_store, local_process
from eos_assets.lib.errors import ConfigError, EosError, SparkServerError
from eos_assets.lib.ports import free_port, port_free, previous_port
from eos_assets.lib.service_wait import start_and_wait
from eos_assets.lib.spark.java import require_java
from eos_assets.lib.spark.spark_env import PARALLELISM, local_slots, spark_config

MAIN_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_OUT_NAME = "server.out"
_NAME = "Spark server"  # in the log line of a server that needs SIGKILL
# The driver of every run of the machine lives here: more than spark-submit's 1 GiB default.
DRIVER_MEMORY = "2g"
# At rest the server gives back the heap its runs grew: G1 collects after a minute without a
# collection and then keeps at most 30 % of the heap free (Java's defaults: no idle collection,
# 70 % free). After twelve runs its JVM held 1.44 GB at rest, and 0.91 GB once these were set.
IDLE_HEAP = "-XX:G1PeriodicGCInterval=60000 -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30"


@dataclass(frozen=True)
class ServerInfo:
    """A running Spark Connect server: its client URL, process id and log file, and the id of
    the Spark Connect session that every run of the product joins (empty: none, each client
    gets a session of its own)."""

    url: str
    pid: int
    log: str
    session: str = ""
    # The object store whose settings the server was started with (``lake_store.store_of``).
    store: str = ""

    def run_url(self) -> str:
        """The URL runs connect with: the server's, naming the shared session."""
        return f"{self.url}/;session_id={self.session}" if self.session else self.url


def start_server(
    state_dir: Path, master: str = "local[*]", port: int = 0, timeout: float = 120.0
) -> ServerInfo:
    """Start a Spark Connect server on 127.0.0.1; return once it accepts connections.

    Args:
        state_dir: folder of the server's log (``server.out``) and its ``spark-warehouse``.
        master: Spark master of the server's own SparkContext (``local[*]``: every core).
        port: port on 127.0.0.1; 0 picks a free one.
        timeout: seconds to wait until the port accepts connections.

    Raises:
        EosError: Java or the Delta jars are missing, the port is busy, the server exits early
            or never listens (one line each).
    """
    require_java()
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    if port and not port_free(port):
        raise EosError(f"port {port} on 127.0.0.1 is busy: stop what uses it or choose another")
    port = port or free_port()
    # The server runs once per machine: the class archive of short-lived drivers is not for it.
    config = spark_config(master, app_name="eos_assets_connect", class_archive=False)
    config["spark.driver.extraJavaOptions"] += f" {IDLE_HEAP}"
    config |= {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.memory": DRIVER_MEMORY,
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.warehouse.dir": str(state_dir / "spark-warehouse"),
        # The runs' shared session outlives a quiet night (the default drops a session after
        # 60 idle minutes), and its id stays usable after a client released it (by default a
        # closed id is refused for good: every later run would fail).
        "spark.connect.session.manager.defaultSessionTimeout": "-1",
        "spark.connect.session.manager.closedSessionsTombstonesSize": "0",
    }
    slots = local_slots(master)
    if slots is not None:
        # What a local master uses anyway; said aloud, a run reads it instead of running a job.
        config[PARALLELISM] = str(slots)
    import pyspark  # here: reading the settings must not import Spark

    home = Path(pyspark.__file__).parent
    command = [str(home / "bin" / "spark-submit"), "--class", MAIN_CLASS]
    for key, value in config.items():
        command += ["--conf", f"{key}={value}"]
    command.append("spark-internal")
    python = config["spark.pyspark.python"]
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": python}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"  # the driver's other ports (UI, RPC) too
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.pop("SPARK_REMOTE", None)
    out_path = state_dir / _OUT_NAME
    # Its own process group: a signal to it reaches spark-submit's JVM and its Python workers.
    pid = start_and_wait(
        command,
        out_path,
        state_dir,
        lambda: _listening(port),
        timeout,
        what="the Spark Connect server",
        ready_verb="listen",
        name=_NAME,
        env=env,
    )
    return ServerInfo(
        url=f"sc://127.0.0.1:{port}",
        pid=pid,
        log=str(out_path),
        session=str(uuid.uuid4()),
        store=lake_store.store_of(os.environ.get("EOS_LAKE_ROOT", ""), os.environ),
    )


def stop_server(info: ServerInfo, timeout: float = 30.0) -> None:
    """Stop the server with SIGTERM, and with SIGKILL when it is still alive after ``timeout``."""
    local_process.stop(info.pid, timeout, _NAME)


def server_status(state_dir: Path) -> ServerInfo | None:
    """Return the recorded server when its process is alive and listens, else None."""
    return local_process.running_record(
        _state_file(state_dir),
        ServerInfo,
        MAIN_CLASS,
        lambda info: _listening(int(info.url.rsplit(":", 1)[1])),
    )


def up(state_dir: Path, master: str = "local[*]", port: int = 0) -> ServerInfo:
    """Start the server of ``state_dir`` unless it runs already; return it."""
    running = server_status(state_dir)
    if running is not None:
        return running
    folder = state_dir / "spark"
    saved = folder / "port"
    info = start_server(folder, master=master, port=port or previous_port(saved))
    saved.write_text(info.url.rsplit(":", 1)[1])
    local_process.write_record(_state_file(state_dir), info)
    return info


def down(state_dir: Path) -> bool:
    """Stop the server of ``state_dir``; return False when none was running."""
    return local_process.stop_recorded(_state_file(state_dir), ServerInfo, MAIN_CLASS, stop_server)


def local_url(state_dir: Path, lake_root: str | None = None) -> str:
    """Return the URL runs use for the running local server of ``state_dir``: its address and
    the shared session (``ServerInfo.run_url``).

    With ``lake_root`` (a run's lake), the server must have been started with the settings of
    that lake's object store: a server started without them cannot read its tables.

    Raises:
        SparkServerError: no local server runs (one line: start it with `eos-assets spark up`).
        ConfigError: the server was not started for the lake's store (one line: restart it).
    """
    info = server_status(state_dir)
    if info is None:
        raise SparkServerError(
            "EOS_SPARK_CONNECT=local but no Spark server runs: start it with "
            "`eos-assets spark up`, or unset EOS_SPARK_CONNECT for an in-process session"
        )
    wanted = lake_store.store_of(lake_root or "", os.environ)
    if wanted and wanted != info.store:
        started = f"for {info.store}" if info.store else "without the settings of a lake on S3"
        raise ConfigError(
            f"the local Spark server was started {started}, not for the lake at {lake_root} "
            f"({wanted}): restart the Spark server with the lake's variables: "
            "eos-assets spark down && eos-assets spark up"
        )
    return info.run_url()


def _state_file(state_dir: Path) -> Path:
    return Path(state_dir) / "spark" / "server.json"


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1.0):
        return True
    return False
