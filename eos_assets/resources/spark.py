"""Spark through dagster-pyspark: one lazily created session per process.

The session is in-process (classic) by default; with ``EOS_SPARK_CONNECT`` set it is a Spark
Connect session of the local server (``eos-assets spark up``) or of a remote one. The local
server is looked up when a run first uses Spark, never when the definitions load: a server
that is down fails that run with one line, and a server started later serves the next run.
"""

from pathlib import Path
from typing import Any

from dagster_pyspark import LazyPySparkResource
from pydantic import Field, PrivateAttr
from pyspark.sql import SparkSession

from eos_assets.lib.errors import ConfigError
from eos_assets.lib.spark import spark_server
from eos_assets.lib.spark.java import require_java
from eos_assets.lib.spark.spark_env import QUICK_START_JIT, spark_config, use_this_python
from eos_assets.lib.spark.spark_modes import bound_retries
from eos_assets.settings import LOCAL_SPARK, Settings

REMOTE = "spark.remote"


class LocalSparkResource(LazyPySparkResource):
    """A Spark Connect session of the local server (``eos-assets spark up``), found when a run
    first asks for it: the server's address and shared session come from its state folder."""

    state_dir: str = Field(
        description="State folder of the local Spark Connect server ($EOS_STATE_DIR); its "
        "address is read there when a run first uses Spark."
    )
    lake_root: str = Field(
        default="",
        description="The lake's root ($EOS_LAKE_ROOT): a lake on S3 needs a server started "
        "with its store's settings.",
    )
    _session: Any = PrivateAttr(default=None)

    @property
    def spark_session(self) -> Any:
        """The run's session of the local server.

        Raises:
            SparkServerError: the local server is not running (one line with the fix).
            ConfigError: it was not started with the settings of the lake's store (one line).
        """
        if self._session is None:
            url = spark_server.local_url(Path(self.state_dir), self.lake_root)
            self._session = SparkSession.builder.remote(url).getOrCreate()
        return self._session


class MissingPartsResource(LazyPySparkResource):
    """The in-process session when a part it needs (Delta's jars) is missing: the definitions
    load, and a run that asks for Spark fails with the one line saying what to do."""

    problem: str = Field(description="What is missing and how to install it.")

    @property
    def spark_session(self) -> Any:
        """Never a session.

        Raises:
            ConfigError: always, with the problem.
        """
        raise ConfigError(self.problem)


def spark_resource(settings: Settings) -> LazyPySparkResource:
    """A lazily started session: a Spark Connect one when the settings name a server, else an
    in-process one with the master from the settings, UTC and Arrow on."""
    if settings.spark_connect == LOCAL_SPARK:
        # Resolved now: a run launched from another working folder finds the same server.
        return LocalSparkResource(
            spark_config={},
            state_dir=str(Path(settings.state_dir).resolve()),
            lake_root=settings.lake_root,
        )
    if settings.spark_connect is not None:
        # Every other setting is the server's: Delta, UTC, Arrow and cores are set there.
        return LazyPySparkResource(spark_config={REMOTE: settings.spark_connect})
    try:
        return LazyPySparkResource(
            spark_config=spark_config(settings.spark_master, lake_root=settings.lake_root)
        )
    except ConfigError as exc:
        return MissingPartsResource(spark_config={}, problem=str(exc))


def is_connect_resource(resource: LazyPySparkResource) -> bool:
    """Whether the resource's sessions are Spark Connect ones (local server or remote)."""
    return isinstance(resource, LocalSparkResource) or REMOTE in resource.spark_config


def spark_session(resource: LazyPySparkResource) -> SparkSession:
    """The resource's session; an in-process one only after checking that Java is there
    (one-line error otherwise), a Spark Connect one that gives up on a dead server within
    seconds (``spark_modes.bound_retries``).

    Raises:
        SparkServerError: ``EOS_SPARK_CONNECT=local`` and the local server is not running.
    """
    if is_connect_resource(resource):
        return bound_retries(resource.spark_session)
    require_java()
    use_this_python()
    return resource.spark_session


def quick_start_run_config(resource: LazyPySparkResource) -> dict[str, Any]:
    """Run config for a short run: the resource's settings, with a driver JVM that compiles
    with C1 only (``spark_env.QUICK_START_JIT``). Shown with the run in the UI. A Spark Connect
    session starts no driver: nothing to change."""
    if is_connect_resource(resource):
        return {}
    config = dict(resource.spark_config)
    key = "spark.driver.extraJavaOptions"
    config[key] = f"{config.get(key, '')} {QUICK_START_JIT}".strip()
    return {"resources": {"pyspark": {"config": {"spark_config": config}}}}
