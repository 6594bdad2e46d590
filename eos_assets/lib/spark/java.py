"""The Java runtime that Spark and the embedded Kafka broker run on, checked before use."""

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

from eos_assets.lib.errors import EosError, JavaMissingError

MIN_VERSION = 17
# Where Debian and the JDK packages of Adoptium install their runtimes, one folder each.
JVM_ROOT = Path("/usr/lib/jvm")
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


def require_newer_java(user: str, minimum: int) -> str:
    """Return a ``java`` of version ``minimum`` or newer for a service this package starts
    itself: the one ``require_java`` finds when it is recent enough, else the newest under
    ``JVM_ROOT``.

    Raises:
        JavaMissingError: none is recent enough (one line with the fix).
    """
    try:
        found: str | None = require_java(user)
    except JavaMissingError:
        found = None
    if found is not None and (java_version(found) or 0) >= minimum:
        return found
    versions = {str(java): java_version(str(java)) or 0 for java in JVM_ROOT.glob("*/bin/java")}
    newest = max(versions, key=versions.__getitem__, default=None)
    if newest is not None and versions[newest] >= minimum:
        return newest
    seen = f"Java {java_version(found)} ({found})" if found else "no Java"
    raise JavaMissingError(
        f"{user} needs Java {minimum} or newer; found {seen} and none newer under {JVM_ROOT}: "
        "install one and set JAVA_HOME"
    )


def compile_java(source: Path, classpath: str, out: Path, user: str) -> Path:
    """Compile the Java program ``source`` against ``classpath`` into ``out``; return ``out``.

    Args:
        user: the program, named in the errors (``the Kafka Streams peer``).

    Raises:
        JavaMissingError: no ``javac`` (a JDK, not only a runtime, is needed).
        EosError: the program did not compile (javac's first line).
    """
    javac = Path(require_java(user)).with_name("javac")
    if not javac.exists():
        found = shutil.which("javac")
        if found is None:
            raise JavaMissingError(
                f"javac is missing: {user} needs a JDK "
                "(Debian: apt-get install openjdk-17-jdk-headless)"
            )
        javac = Path(found)
    out.mkdir(parents=True, exist_ok=True)
    command = [str(javac), "-nowarn", "-cp", classpath, "-d", str(out), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = (done.stderr.strip() or "(no output)").splitlines()
        raise EosError(f"{user} did not compile: {lines[0]}")
    return out
