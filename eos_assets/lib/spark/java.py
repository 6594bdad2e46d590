"""The Java runtime that Spark and the embedded Kafka broker run on, checked before use."""

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

from eos_assets.lib.errors import JavaMissingError

MIN_VERSION = 17
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')
_INSTALL = "install a Java 17 runtime (Debian: apt-get install openjdk-17-jre-headless)"


def require_java(user: str = "Spark") -> str:
    """Return the ``java`` executable to start, after checking it is Java 17 or newer.

    Args:
        user: what needs Java, named in the error (``Spark``, ``the embedded Kafka broker``).

    Raises:
        JavaMissingError: no Java runtime is found, or it is too old (one line with the fix).
    """
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not java.exists():
            raise JavaMissingError(
                f"JAVA_HOME={home} has no bin/java: point JAVA_HOME at a Java 17 runtime "
                "or unset it"
            )
        found = str(java)
    else:
        which = shutil.which("java")
        if which is None:
            raise JavaMissingError(
                f"Java is not installed and {user} needs it: {_INSTALL} or set JAVA_HOME"
            )
        found = which
    version = java_version(found)
    if version is not None and version < MIN_VERSION:
        raise JavaMissingError(
            f"{found} is Java {version} and {user} needs Java {MIN_VERSION} or newer: "
            f"{_INSTALL} or set JAVA_HOME"
        )
    return found


@cache
def java_version(java: str) -> int | None:
    """Return the major version of ``java`` (8 for 1.8), or None when it does not say."""
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    match = _VERSION.search(done.stderr + done.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major
