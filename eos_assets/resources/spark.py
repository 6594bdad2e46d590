"""Spark through dagster-pyspark: one lazily created session per process."""

from dagster_pyspark import LazyPySparkResource
from pyspark.sql import SparkSession

from eos_assets.lib.spark_env import require_java, spark_config, use_this_python
from eos_assets.settings import Settings


def spark_resource(settings: Settings) -> LazyPySparkResource:
    """A lazily started SparkSession with the master from the settings, UTC and Arrow on."""
    return LazyPySparkResource(spark_config=spark_config(settings.spark_master))


def spark_session(resource: LazyPySparkResource) -> SparkSession:
    """The resource's session, after checking that Java is there (one-line error otherwise)."""
    require_java()
    use_this_python()
    return resource.spark_session
