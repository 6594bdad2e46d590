"""A throwaway PostgreSQL cluster of its own: initdb in a temporary folder, a free port on
127.0.0.1, password authentication over TCP, stopped with ``pg_ctl stop`` at the end.

PostgreSQL refuses to run as root: as root, the server runs as the ``postgres`` user that
Debian's package creates (``make postgres`` installs it).
"""

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg2

from eos_assets_tests.deploy.processes import free_port, tail

SERVER_USER = "postgres"


@dataclass(frozen=True)
class Postgres:
    """Where a running server listens and who may log in (the superuser, by password)."""

    host: str
    port: int
    user: str
    password: str

    def dsn(self, db: str) -> str:
        """libpq connection string for database ``db``."""
        return (
            f"host={self.host} port={self.port} dbname={db} user={self.user} "
            f"password={self.password}"
        )


def create_database(pg: Postgres, name: str) -> None:
    """``CREATE DATABASE name`` (outside a transaction, as PostgreSQL requires)."""
    conn = psycopg2.connect(pg.dsn("postgres"))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
    finally:
        conn.close()


def bin_dir() -> Path:
    """The newest installed ``/usr/lib/postgresql/<version>/bin``.

    Raises:
        AssertionError: no PostgreSQL server is installed (says how to install it).
    """
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    assert found, (
        "PostgreSQL server binaries are missing (/usr/lib/postgresql/<version>/bin/initdb): "
        "run `make postgres` (apt-get install -y postgresql)"
    )
    return found[-1].parent


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    runuser = shutil.which("runuser")
    assert runuser, "runuser (util-linux) is needed to start PostgreSQL as a non-root user"
    return [runuser, "-u", SERVER_USER, "--", *command]


def _run(command: list[str]) -> None:
    done = subprocess.run(
        _as_server_user(command), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{command[0]} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}"


@contextmanager
def postgres_server(
    user: str = "dagster", password: str = "eos-test-password"
) -> Iterator[Postgres]:
    """Initialise and start a server; it is stopped and its folder removed on exit."""
    bins = bin_dir()
    # Not under pytest's tmp_path: its parents are private to root, the server user must enter.
    root = Path(tempfile.mkdtemp(prefix="eos-pg-"))
    try:
        root.chmod(0o755)
        (root / "pwfile").write_text(password + "\n")
        if os.geteuid() == 0:
            shutil.chown(root, SERVER_USER, SERVER_USER)
            shutil.chown(root / "pwfile", SERVER_USER, SERVER_USER)
        data, log, port = root / "data", root / "server.log", free_port()
        initdb = [str(bins / "initdb"), "-D", str(data), "-U", user, "-E", "UTF8"]
        initdb += [f"--pwfile={root / 'pwfile'}", "--auth-local=scram-sha-256"]
        _run([*initdb, "--auth-host=scram-sha-256"])
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1"
        try:
            pg_ctl = [str(bins / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options]
            _run([*pg_ctl, "-w", "-t", "60", "start"])
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{tail(log)}") from None
        try:
            yield Postgres("127.0.0.1", port, user, password)
        finally:
            _run([str(bins / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
