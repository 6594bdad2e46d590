"""The driver's class archive: written once per install, mapped by every later driver JVM."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eos_assets.lib.spark import jars, spark_cds
from eos_assets.lib.spark.spark_env import spark_config

# A fresh driver JVM, its class loading logged to a file: which classes came from the archive.
_DRIVER = """
import sys
from pyspark.sql import SparkSession
from dagster_pyspark import LazyPySparkResource
from eos_assets.lib.spark.spark_env import spark_config, use_this_python
from eos_assets.resources.spark import quick_start_run_config
use_this_python()
on = sys.argv[2] == "on"
config = spark_config("local[1]", app_name="eos_cds_test", class_archive=on)
if on:  # the settings the lag sensor gives a short run
    run_config = quick_start_run_config(LazyPySparkResource(spark_config=config))
    config = run_config["resources"]["pyspark"]["config"]["spark_config"]
config["spark.ui.enabled"] = "false"
config["spark.driver.extraJavaOptions"] += f" -Xlog:class+load=info:file={sys.argv[1]}"
builder = SparkSession.builder
for key, value in config.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
assert spark.range(10).count() == 10
jvm = spark.sparkContext._jvm
bean = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
option = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean)
with open(sys.argv[1] + ".jit", "w") as out:
    out.write(option.getVMOption("TieredStopAtLevel").getValue())
spark.stop()
"""


def _sources(tmp_path: Path, archive: str) -> dict[str, str]:
    """Where a fresh driver loaded each Spark class from, by class name."""
    log = tmp_path / f"classes-{archive}.log"
    subprocess.run([sys.executable, "-c", _DRIVER, str(log), archive], check=True, timeout=300)
    found = {}
    for line in log.read_text().splitlines():
        # e.g. "[0.2s][info][class,load] org.apache.spark.SparkContext source: shared objects
        # file (top)"
        parts = line.split("] ", 3)[-1].split(" source: ", 1)
        if len(parts) == 2 and parts[0].startswith("org.apache.spark."):
            found[parts[0]] = parts[1]
    return found


def test_a_fresh_driver_maps_spark_classes_from_the_archive_and_without_it_loads_them(
    tmp_path: Path,
) -> None:
    archive = spark_cds.build()  # nothing to do when `make` wrote it already
    assert archive.is_file() and archive == spark_cds.archive_path()
    option = f"-XX:SharedArchiveFile={archive}"
    assert option in spark_config("local[2]")["spark.driver.extraJavaOptions"]
    assert (
        option not in spark_config("local[2]", class_archive=False)["spark.driver.extraJavaOptions"]
    )

    mapped = _sources(tmp_path, "on")
    assert mapped["org.apache.spark.SparkContext"] == "shared objects file (top)"
    # Classes generated at run time (lambdas, compiled queries) are never in an archive.
    from_files = [s for s in mapped.values() if s.startswith(("shared objects", "file:"))]
    from_archive = from_files.count("shared objects file (top)")
    assert from_archive > 0.95 * len(from_files), f"{from_archive} of {len(from_files)}"

    # A driver started with a short run's config compiles with C1 only
    # (spark_env.QUICK_START_JIT); any other keeps the default tiered JIT (level 4, C2).
    assert (tmp_path / "classes-on.log.jit").read_text() == "1"

    loaded = _sources(tmp_path, "off")
    assert (tmp_path / "classes-off.log.jit").read_text() == "4"
    assert "shared objects file" not in loaded["org.apache.spark.SparkContext"]
    assert not any("(top)" in source for source in loaded.values())


def test_the_archive_key_covers_the_delta_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every driver loads Delta's classes from .jars/delta, and the archive holds them: a new
    # Delta jar must be a new archive, as a new Spark jar is.
    shutil.copytree(jars.jar_dir("delta"), tmp_path / "delta")
    monkeypatch.setenv("EOS_JARS_DIR", str(tmp_path))
    before = spark_cds.archive_path()
    jar = next((tmp_path / "delta").glob("delta-spark_*.jar"))
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    assert before is not None and spark_cds.archive_path() not in (None, before)
