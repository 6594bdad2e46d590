"""`make demo|test|ui` stop with one line when Java or the Delta jars are missing or a port is
busy."""

import os
import socket
import subprocess
import sys
from pathlib import Path


def run_preflight(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eos_assets.preflight", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_passes_on_this_machine() -> None:
    done = run_preflight()
    assert (done.returncode, done.stderr) == (0, "")


def test_no_java_is_one_line_with_the_fix(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # an empty folder: no java on the PATH
    done = run_preflight(env=env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Java" in lines[0] and "apt-get install" in lines[0]


def test_bad_java_home_is_one_line(tmp_path: Path) -> None:
    done = run_preflight(env={**os.environ, "JAVA_HOME": str(tmp_path)})
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1 and "JAVA_HOME" in done.stderr


def test_busy_port_is_one_line_with_the_fix() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        done = run_preflight("--port", str(port))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {port} is busy" in lines[0]


def test_no_delta_jars_is_one_line_with_the_fix(tmp_path: Path) -> None:
    done = run_preflight(env={**os.environ, "EOS_JARS_DIR": str(tmp_path)})
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "delta jars are missing" in lines[0]
    assert "`eos-assets jars`" in lines[0]
