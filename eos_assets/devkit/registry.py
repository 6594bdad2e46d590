"""A local schema registry: Apicurio Registry, from the installed distribution.

Apicurio Registry (``io.apicurio:apicurio-registry-app``, Apache-2.0, ``.jars/registry``)
answers the Confluent schema registry's REST API under ``/apis/ccompat/v7``, which
confluent-kafka's ``SchemaRegistryClient`` and serializers speak. ``eos-assets registry up``
starts it with both its ports on 127.0.0.1 (the distribution binds its management port to every
interface unless told otherwise), its schemas in an H2 file under the state folder, so they
survive ``down``/``up``, and its default compatibility set to BACKWARD, the Confluent
registry's default (Apicurio's own is NONE).
"""

import contextlib
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from eos_assets.lib import local_process
from eos_assets.lib.errors import EosError
from eos_assets.lib.ports import free_port, port_free, previous_port
from eos_assets.lib.service_wait import start_and_wait
from eos_assets.lib.spark import jars
from eos_assets.lib.spark.java import require_newer_java

# The distribution's launcher, started from its folder: the cmdline token that tells a pid
# runs the registry.
LAUNCHER = "quarkus-run.jar"
JAVA = 21  # Apicurio Registry 3.3 is built for Java 21
API = "/apis/ccompat/v7"
COMPATIBILITY = "BACKWARD"
HEAP = "-Xmx512m"
_NAME = "schema registry"  # in the log line of a registry that needs SIGKILL


@dataclass(frozen=True)
class RegistryInfo:
    """A running registry: the base URL of its Confluent-compatible API, its process, its
    data folder and its management port."""

    url: str
    pid: int
    data_dir: str
    management_port: int


def start_registry(data_dir: Path, port: int = 0, timeout: float = 90.0) -> RegistryInfo:
    """Start the registry with its schemas in ``data_dir/db``; return once its API answers and
    its default compatibility is BACKWARD.

    Raises:
        EosError: no Java 21, the registry is not installed, the port is busy, or it exits
            early or never answers (one line each).
    """
    java = require_newer_java("the schema registry", JAVA)
    home = jars.distribution("registry", LAUNCHER)
    data_dir = data_dir.resolve()
    for folder in ("db", "tmp"):
        (data_dir / folder).mkdir(parents=True, exist_ok=True)
    if port and not port_free(port):
        raise EosError(f"port {port} on 127.0.0.1 is busy: stop what uses it or choose another")
    port, management = port or free_port(), free_port()
    url = f"http://127.0.0.1:{port}{API}"
    command = [
        java, HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={port}",
        "-Dquarkus.management.host=127.0.0.1", f"-Dquarkus.management.port={management}",
        f"-Djava.io.tmpdir={data_dir / 'tmp'}",
        f"-Dapicurio.storage.snapshot.location={data_dir / 'tmp'}",
        f"-Dapicurio.import.work-dir={data_dir / 'tmp'}",
        "-Dapicurio.storage.kind=sql", "-Dapicurio.storage.sql.kind=h2",
        f"-Dapicurio.datasource.url=jdbc:h2:file:{data_dir / 'db' / 'registry'}",
        "-jar", LAUNCHER,
    ]  # fmt: skip
    pid = start_and_wait(
        command,
        data_dir / "registry.out",
        home,
        lambda: _answers(url),
        timeout,
        what="the schema registry",
        ready_verb="answer",
        name=_NAME,
    )
    _call(url, "/config", {"compatibility": COMPATIBILITY})
    return RegistryInfo(url=url, pid=pid, data_dir=str(data_dir), management_port=management)


def stop_registry(info: RegistryInfo, timeout: float = 30.0) -> None:
    """Stop the registry with SIGTERM (SIGKILL when it outlives ``timeout``)."""
    local_process.stop(info.pid, timeout, _NAME)


def registry_status(state_dir: Path) -> RegistryInfo | None:
    """Return the recorded registry of ``state_dir`` when it runs and answers, else None."""
    return local_process.running_record(
        _state_file(state_dir), RegistryInfo, LAUNCHER, lambda info: _answers(info.url)
    )


def up(state_dir: Path, port: int = 0) -> RegistryInfo:
    """Start the registry of ``state_dir`` unless it runs already; return it. Started again,
    it takes the port it had, when free."""
    running = registry_status(state_dir)
    if running is not None:
        return running
    saved = state_dir / "registry" / "port"
    info = start_registry(state_dir / "registry", port=port or previous_port(saved))
    saved.write_text(str(urllib.parse.urlsplit(info.url).port))
    local_process.write_record(_state_file(state_dir), info)
    return info


def down(state_dir: Path) -> bool:
    """Stop the registry of ``state_dir``; return False when none was running. Its schemas
    are kept for the next ``up``."""
    return local_process.stop_recorded(
        _state_file(state_dir), RegistryInfo, LAUNCHER, stop_registry
    )


def _state_file(state_dir: Path) -> Path:
    return Path(state_dir) / "registry" / "registry.json"


def _answers(url: str) -> bool:
    """True once the Confluent-compatible API lists the subjects."""
    with (
        contextlib.suppress(OSError, ValueError),
        urllib.request.urlopen(f"{url}/subjects", timeout=2.0) as response,
    ):
        return response.status == 200
    return False


def _call(url: str, path: str, body: dict[str, object]) -> None:
    """PUT ``body`` at ``url + path``.

    Raises:
        EosError: the registry refused it (one line with its answer).
    """
    request = urllib.request.Request(
        f"{url}{path}",
        data=json.dumps(body).encode(),
        method="PUT",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10.0):
            return
    except urllib.error.HTTPError as refused:
        answer = refused.read().decode(errors="replace")[:300]
        raise EosError(f"the schema registry at {url} refused PUT {path}: {answer}") from None
