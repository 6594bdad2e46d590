"""A local S3 server for a lake on object storage: S3Proxy over a folder, from the installed jars.

S3Proxy (``org.gaul:s3proxy``, Apache-2.0, ``.jars/s3proxy``) serves the S3 API with its
filesystem backend: a bucket is a folder of ``data``. It checks AWS signatures (v2 or v4)
against one key pair and honours conditional writes (``If-None-Match: *``), which Delta
commits on S3 rely on. ``eos-assets s3 up`` starts it, creates the bucket ``lake`` and prints
the variables that point the product at it; its data survives ``down``/``up``.
"""

import contextlib
import socket
from dataclasses import dataclass
from pathlib import Path

from eos_assets.lib import local_process
from eos_assets.lib.errors import EosError
from eos_assets.lib.ports import free_port, port_free
from eos_assets.lib.service_wait import start_and_wait
from eos_assets.lib.spark import jars
from eos_assets.lib.spark.java import require_java

MAIN_CLASS = "org.gaul.s3proxy.Main"
BUCKET = "lake"
REGION = "us-east-1"
# A development server's key pair, printed by `eos-assets s3 up`: nothing to keep secret.
ACCESS_KEY = "eos-assets"
SECRET_KEY = "eos-assets-secret"
HEAP = "-Xmx256m"
_OUT_NAME = "s3proxy.out"
_NAME = "S3 server"  # in the log line of a server that needs SIGKILL
# Without a configuration S3Proxy's logback logs every request at DEBUG (about 10 MB a minute).
_LOGBACK = """<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
"""


@dataclass(frozen=True)
class S3Info:
    """A running S3 server: its endpoint URL, process id and data folder."""

    endpoint: str
    pid: int
    data_dir: str

    def env(self, bucket: str = BUCKET, prefix: str = "lake") -> dict[str, str]:
        """The variables that put the product's lake on this server, under ``prefix``."""
        return {
            "EOS_LAKE_ROOT": f"s3://{bucket}/{prefix}",
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }


def start_server(
    data_dir: Path, port: int = 0, timeout: float = 60.0, *, anonymous: bool = False
) -> S3Info:
    """Start S3Proxy with its buckets in ``data_dir/data``; return once it answers.

    With ``anonymous`` it checks no signature (any key pair, or none, is let in): a store that
    a proxy may change requests to, as the tests of stores without conditional writes do.

    Raises:
        EosError: Java or the jars are missing, the port is busy, the server exits early or
            never answers (one line each).
    """
    java = require_java("the local S3 server")
    classpath = jars.classpath("s3proxy")
    data_dir = data_dir.resolve()
    (data_dir / "data" / BUCKET).mkdir(parents=True, exist_ok=True)
    if port and not port_free(port):
        raise EosError(f"port {port} on 127.0.0.1 is busy: stop what uses it or choose another")
    port = port or free_port()
    endpoint = f"http://127.0.0.1:{port}"
    properties = data_dir / "s3proxy.properties"
    properties.write_text(
        f"s3proxy.endpoint={endpoint}\n"
        f"s3proxy.authorization={'none' if anonymous else 'aws-v2-or-v4'}\n"
        f"s3proxy.identity={ACCESS_KEY}\n"
        f"s3proxy.credential={SECRET_KEY}\n"
        "jclouds.provider=filesystem-nio2\n"
        f"jclouds.filesystem.basedir={data_dir / 'data'}\n"
    )
    logback = data_dir / "logback.xml"
    logback.write_text(_LOGBACK)
    command = [
        java, HEAP, f"-Dlogback.configurationFile={logback}", "-cp", classpath, MAIN_CLASS,
        "--properties", str(properties),
    ]  # fmt: skip
    pid = start_and_wait(
        command,
        data_dir / _OUT_NAME,
        data_dir,
        lambda: _answers(port),
        timeout,
        what="the S3 server",
        ready_verb="answer",
        name=_NAME,
    )
    return S3Info(endpoint=endpoint, pid=pid, data_dir=str(data_dir))


def stop_server(info: S3Info, timeout: float = 30.0) -> None:
    """Stop the server with SIGTERM (SIGKILL when it outlives ``timeout``)."""
    local_process.stop(info.pid, timeout, _NAME)


def server_status(state_dir: Path) -> S3Info | None:
    """Return the recorded server of ``state_dir`` when it runs and answers, else None."""
    return local_process.running_record(
        _state_file(state_dir),
        S3Info,
        MAIN_CLASS,
        lambda info: _answers(int(info.endpoint.rsplit(":", 1)[1])),
    )


def up(state_dir: Path, port: int = 0) -> S3Info:
    """Start the S3 server of ``state_dir`` unless it runs already; return it."""
    running = server_status(state_dir)
    if running is not None:
        return running
    info = start_server(state_dir / "s3", port=port)
    local_process.write_record(_state_file(state_dir), info)
    return info


def down(state_dir: Path) -> bool:
    """Stop the S3 server of ``state_dir``; return False when none was running."""
    return local_process.stop_recorded(_state_file(state_dir), S3Info, MAIN_CLASS, stop_server)


def _state_file(state_dir: Path) -> Path:
    return Path(state_dir) / "s3" / "server.json"


def _answers(port: int) -> bool:
    """True once the server answers HTTP (S3Proxy listens only when it is ready)."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1.0) as s:
        s.sendall(b"HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        return s.recv(12).startswith(b"HTTP/1.1")
    return False
