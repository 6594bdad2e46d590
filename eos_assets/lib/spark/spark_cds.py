"""A class-data-sharing archive of the driver JVM's classes, so that each run starts Spark sooner.

Every Dagster run is a process of its own and so starts a driver JVM of its own, which loads
and verifies thousands of Spark classes before its first job. Java 17 can write the classes a
JVM loaded into an archive when it exits (``-XX:ArchiveClassesAtExit``) and map that archive
into later JVMs (``-XX:SharedArchiveFile``). ``build`` writes the archive once per install from
a JVM that ran the kinds of Spark work the assets run; ``driver_java_options`` points every
later driver at it.

The archive only holds for the Java runtime and Spark jars it was written with (pyspark's and
Delta's, which every session loads), so its file name carries a key of all of them: after an
upgrade the old file is simply not found, and ``build`` writes a new one. A JVM that cannot
use an archive says so in one warning line and starts without it; it never fails because of it.
With no archive, nothing changes but the start time.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyspark

from eos_assets.lib.errors import EosError
from eos_assets.lib.spark import jars

_BUILD_TIMEOUT_S = 600
# The module whose process runs the Spark work and writes the archive as its JVM exits.
RECORDER = "eos_assets.lib.spark.spark_cds_record"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where this install's archive is (or would be written); None without a Java runtime.

    Raises:
        ConfigError: the Delta jars are not installed.
    """
    java = _java()
    if java is None:
        return None
    spark_jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    key = hashlib.sha256()
    for part in (java, *spark_jars, *jars.jar_files("delta")):
        stat = part.stat()
        key.update(f"{part}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    key.update(pyspark.__version__.encode())
    return Path(sys.prefix) / "share" / "eos_assets" / f"spark-cds-{key.hexdigest()[:16]}.jsa"


def driver_java_options() -> str:
    """``-XX:SharedArchiveFile=...`` when this install's archive exists, else nothing."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path}" if path is not None and path.is_file() else ""


def build() -> Path:
    """Write this install's archive unless it exists; returns its path.

    Raises:
        EosError: no Java runtime, or the JVM that was to write the archive failed.
    """
    path = archive_path()
    if path is None:
        raise EosError("no Java runtime: install a Java 17 runtime or set JAVA_HOME")
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        partial = Path(scratch) / path.name
        command = [sys.executable, "-m", RECORDER, str(partial)]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S, check=False
        )
        if done.returncode != 0 or not partial.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise EosError(f"writing the Spark class archive failed: {last}")
        # A damaged archive crashes the JVM that maps it (SIGBUS): check it before use.
        check = [str(_java()), "-XX:+VerifySharedSpaces", f"-XX:SharedArchiveFile={partial}"]
        verified = subprocess.run([*check, "-version"], capture_output=True, timeout=60)
        if verified.returncode != 0:
            raise EosError("the Spark class archive just written does not load: not used")
        os.replace(partial, path)
    for old in path.parent.glob("spark-cds-*.jsa"):
        if old != path:
            old.unlink(missing_ok=True)
    return path
