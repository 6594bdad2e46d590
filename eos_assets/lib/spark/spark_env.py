"""What Spark needs from the machine, checked before a JVM is started."""

import os
import re
import sys
from pathlib import Path

from eos_assets.lib import lake_store
from eos_assets.lib.spark import jars, spark_cds

_LOG4J = Path(__file__).with_name("log4j2.properties")
# A driver for a short run compiles with C1 only. Such a driver lives for one small Dagster
# run, and on 2 cores the C2 compiler's threads competed with the run's own work for code that
# had little time left to pay off: in the freshness stage of the bench (one run each, idle
# machine) runs took 16-24 s instead of 24-36 s and p95 went from 48.5 s to 36.4 s. Large work
# needs C2: with C1 only in every session, a full bench built the derived assets at 5M events
# in 197 s, against 118 s with the default JIT on the same day (BENCHMARKS.md). So it is a
# per-run choice.
QUICK_START_JIT = "-XX:TieredStopAtLevel=1"

# Delta Lake on Spark: the session extension (Delta's SQL: MERGE, DESCRIBE HISTORY, ...) and the
# catalog that makes `format("delta")` tables first-class.
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# Table properties every table Spark creates starts with. Deletion vectors (off in open-source
# Delta today, on in some distributions) raise a table to reader features that delta-rs cannot
# read (its `to_pyarrow_table` refuses the table, and a reader of the Parquet file list would
# return deleted rows): every table must stay readable by both engines.
DELTA_TABLE_DEFAULTS = {
    "spark.databricks.delta.properties.defaults.enableDeletionVectors": "false",
}

_LOCAL_MASTER = re.compile(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?")
PARALLELISM = "spark.default.parallelism"
LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
# A task result above 1 MiB goes to the driver through the block manager, unless this says
# otherwise. In local mode the executor is the driver: a full bench's 5M-event graph stage failed
# twice in ``toArrow`` with "TaskResultLost (result lost from block manager)", and passing the
# result directly (up to Spark's RPC message limit, 128 MiB) does not store it anywhere.
DIRECT_RESULT = "spark.task.maxDirectResultSize"
# delta-spark rebuilds a table's snapshot (the log replayed into its file list) in this many
# tasks, 50 by default: on local[2] that is 1.5-3.5 s per snapshot of a table of 2-4 versions,
# and each new version needs a new one. One task per slot took the snapshot reads of the
# interop lake's tables from 10-28 s to 1.4-6.3 s.
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"


def local_slots(master: str) -> int | None:
    """Task slots of a ``local``, ``local[N]`` or ``local[*]`` master on this machine (None for
    any other master)."""
    match = _LOCAL_MASTER.fullmatch(master.strip())
    if match is None:
        return None
    slots = match.group(1) or "1"
    return len(os.sched_getaffinity(0)) if slots == "*" else int(slots)


def delta_jars() -> str:
    """The installed Delta jars as a ``spark.jars`` value (comma-separated paths).

    Raises:
        ConfigError: the jars were never installed (one line: run ``eos-assets jars``).
    """
    return ",".join(str(path) for path in jars.jar_files("delta"))


def use_this_python() -> None:
    """Make Spark tasks run this interpreter (and so see this environment's packages).

    PySpark picks the worker Python for RDD functions from ``PYSPARK_PYTHON`` when the
    context starts, not from the session config, and falls back to ``python3`` on the PATH.
    On a cluster the executors then start the same path, so the same environment must be
    installed there at that path; a different one is chosen by setting ``PYSPARK_PYTHON``.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def spark_config(
    master: str,
    app_name: str = "eos_assets",
    class_archive: bool = True,
    lake_root: str | None = None,
) -> dict[str, str]:
    """Spark settings shared by every session of the product.

    Executors run ``PYSPARK_PYTHON`` when set, else the Python of this process (on a cluster:
    the same path on every executor, with the same packages). With ``class_archive`` the driver
    JVM maps this install's class archive when it has one (``spark_cds``). A short run adds
    ``QUICK_START_JIT`` through its run config (``resources.spark.quick_start_run_config``).

    Every session has Delta: its jars from ``.jars/delta`` go in ``spark.jars``, so Spark ships
    them to a cluster's executors as well as the driver (nothing is fetched at run time).

    A lake on S3 (``lake_root``, default ``EOS_LAKE_ROOT``) adds the s3a jars on the driver's
    and executors' class path (in ``spark.jars`` the 686 MB SDK bundle took a session 36 s to
    start; on a cluster the executors need them at the same path) and the s3a settings of
    ``lake_store.spark_settings``.

    Raises:
        ConfigError: the Delta jars, or the s3a jars of a lake on S3, are not installed (one
            line with the fix).
    """
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    driver_options = f"-Duser.timezone=UTC -Dlog4j2.configurationFile={_LOG4J}"
    if class_archive and (archive := spark_cds.driver_java_options()):
        driver_options += f" {archive}"
    config = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.driver.extraJavaOptions": driver_options,
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.jars": delta_jars(),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        **DELTA_TABLE_DEFAULTS,
    }
    config["spark.pyspark.python"] = python
    root = os.environ.get("EOS_LAKE_ROOT", "") if lake_root is None else lake_root
    if not lake_store.is_s3(root):
        # Given more than 32 files to read, Spark lists them in a job of one task per file:
        # 0.6-0.9 s for the 57 silver files of a window recompute on a loaded local[2], where
        # the driver lists local files in milliseconds. On S3 the job's parallel requests pay.
        config[LISTING_THRESHOLD] = "10000"
    if (slots := local_slots(master)) is not None:
        config[DIRECT_RESULT] = "128m"
        config[SNAPSHOT_PARTITIONS] = str(slots)
    if lake_store.is_s3(root):
        s3_jars = jars.classpath("s3")
        config["spark.driver.extraClassPath"] = s3_jars
        config["spark.executor.extraClassPath"] = s3_jars
        config |= lake_store.spark_settings(root, os.environ)
    return config
