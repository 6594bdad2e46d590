"""Spark through dagster-pyspark: one lazily created session per process."""

from typing import Any

from dagster_pyspark import LazyPySparkResource
from pyspark.sql import SparkSession

from eos_assets.lib.java import require_java
from eos_assets.lib.spark_env import QUICK_START_JIT, spark_config, use_this_python
from eos_assets.settings import Settings


def spark_resource(settings: Settings) -> LazyPySparkResource:
    """A lazily started SparkSession with the master from the settings, UTC and Arrow on."""
    return LazyPySparkResource(spark_config=spark_config(settings.spark_master))


def spark_session(resource: LazyPySparkResource) -> SparkSession:
    """The resource's session, after checking that Java is there (one-line error otherwise)."""
    require_java()
    use_this_python()
    return resource.spark_session


def quick_start_run_config(resource: LazyPySparkResource) -> dict[str, Any]:
    """Run config for a short run: the resource's settings, with a driver JVM that compiles
    with C1 only (``spark_env.QUICK_START_JIT``). Shown with the run in the UI."""
    config = dict(resource.spark_config)
    key = "spark.driver.extraJavaOptions"
    config[key] = f"{config.get(key, '')} {QUICK_START_JIT}".strip()
    return {"resources": {"pyspark": {"config": {"spark_config": config}}}}
