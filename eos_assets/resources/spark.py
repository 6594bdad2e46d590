"""Spark through dagster-pyspark: one lazily created session per process.

The session is in-process (classic) by default; with ``EOS_SPARK_CONNECT`` set it is a Spark
Connect session of the local server (``eos-assets spark up``) or of a remote one.
"""

from typing import Any

from dagster_pyspark import LazyPySparkResource
from pyspark.sql import SparkSession

from eos_assets.lib.java import require_java
from eos_assets.lib.spark_env import QUICK_START_JIT, spark_config, use_this_python
from eos_assets.lib.spark_modes import bound_retries
from eos_assets.settings import Settings

REMOTE = "spark.remote"


def spark_resource(settings: Settings) -> LazyPySparkResource:
    """A lazily started session: a Spark Connect one when the settings name a server, else an
    in-process one with the master from the settings, UTC and Arrow on.

    Raises:
        ConfigError: ``EOS_SPARK_CONNECT=local`` and the local server is not running.
    """
    remote = settings.spark_remote()
    if remote is not None:
        # Every other setting is the server's: Delta, UTC, Arrow and cores are set there.
        return LazyPySparkResource(spark_config={REMOTE: remote})
    return LazyPySparkResource(spark_config=spark_config(settings.spark_master))


def spark_session(resource: LazyPySparkResource) -> SparkSession:
    """The resource's session; an in-process one only after checking that Java is there
    (one-line error otherwise), a Spark Connect one that gives up on a dead server within
    seconds (``spark_modes.bound_retries``)."""
    if REMOTE in resource.spark_config:
        return bound_retries(resource.spark_session)
    require_java()
    use_this_python()
    return resource.spark_session


def quick_start_run_config(resource: LazyPySparkResource) -> dict[str, Any]:
    """Run config for a short run: the resource's settings, with a driver JVM that compiles
    with C1 only (``spark_env.QUICK_START_JIT``). Shown with the run in the UI. A Spark Connect
    session starts no driver: nothing to change."""
    if REMOTE in resource.spark_config:
        return {}
    config = dict(resource.spark_config)
    key = "spark.driver.extraJavaOptions"
    config[key] = f"{config.get(key, '')} {QUICK_START_JIT}".strip()
    return {"resources": {"pyspark": {"config": {"spark_config": config}}}}
