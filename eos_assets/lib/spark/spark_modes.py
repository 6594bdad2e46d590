"""What differs between an in-process (classic) SparkSession and a Spark Connect one.

Spark Connect has no SparkContext, no RDDs and no py4j gateway; the few things the product
needs from them go through these functions, so the same code runs under both. A Connect
session also has a server that can die under a run: ``bound_retries`` and ``server_lost``
turn that into a failure within seconds, in one line.
"""

import contextlib
from collections.abc import Iterator
from typing import Any, cast

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eos_assets.lib.errors import SparkServerError
from eos_assets.lib.spark.spark_env import PARALLELISM

# pyspark retries a call its server does not take (gRPC UNAVAILABLE: connection refused or
# reset) 15 times with a backoff growing x4 up to 60 s, about 10 minutes in which a run whose
# server died waits without a word. A dead server refuses at once, so these numbers alone say
# how long a run waits: 0.1 s doubling up to 2 s, 9 retries, 11-13 s in all, enough to ride
# out a blip. A long query on a live server is one call that gets no error: never cut off.
RETRY_POLICY: dict[str, Any] = {
    "max_retries": 9,
    "initial_backoff": 100,
    "backoff_multiplier": 2.0,
    "max_backoff": 2000,
}


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session (``pyspark.sql.connect``), False for a classic one."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


# Set on a Spark Connect session whose server ``server_lost`` found gone.
_GONE = "_eos_server_gone"


def bound_retries(spark: SparkSession) -> SparkSession:
    """Make a Spark Connect session give up on a server that is gone after ``RETRY_POLICY``
    (seconds, not pyspark's 10 minutes); return it. A classic session is returned as it is.

    A session whose server was already found gone keeps retrying nothing: every later step of
    the run fails at once with the one line instead of waiting its own ~12 s.
    """
    if is_connect(spark) and not getattr(spark, _GONE, False):
        from pyspark.sql.connect.client.retries import DefaultPolicy  # needs grpc: Connect only

        spark.client.set_retry_policies([DefaultPolicy(**RETRY_POLICY)])
    return spark


def server_lost(spark: SparkSession, exc: BaseException) -> SparkServerError | None:
    """The one-line error for a Spark Connect call that failed because its server is gone
    (gRPC UNAVAILABLE once the retries are spent), else None.

    The session then stops retrying: pyspark's cleanup calls (the release of the failed query
    in a thread, a cache cleanup at exit) would each spend the retries again and hold the
    process ~25 s after the run failed. A session does not outlive its server anyway: a new
    server does not know it.
    """
    if not is_connect(spark):
        return None
    import grpc
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    # The client turns every gRPC error into a SparkConnectGrpcException with its status.
    if not isinstance(exc, SparkConnectGrpcException):
        return None
    if exc.getGrpcStatusCode() != grpc.StatusCode.UNAVAILABLE:
        return None
    for policy in spark.client.get_retry_policies():
        policy.max_retries = 0  # shared with the retry loops under way: they end too
    setattr(spark, _GONE, True)
    # The client keeps its URL only in its channel builder (``host:port``).
    builder = spark.client._builder
    where = getattr(builder, "endpoint", spark.client.host)
    return SparkServerError(
        f"the Spark Connect server at sc://{where} stopped answering: run `eos-assets spark up` "
        "(or check EOS_SPARK_CONNECT) and rerun"
    )


def run_server_lost(exc: BaseException) -> SparkServerError | None:
    """``server_lost`` for an error raised where the session is not at hand (a step that calls
    Spark through code of its own): the process's active Spark Connect session is the one."""
    # Only a Spark Connect error can mean that: a classic run never imports the gRPC client.
    if not type(exc).__module__.startswith("pyspark.errors.exceptions.connect"):
        return None
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    spark = ConnectSession.getActiveSession()
    # pyspark types its Connect session apart from the classic one it stands in for.
    return None if spark is None else server_lost(cast(SparkSession, spark), exc)


def task_slots(spark: SparkSession) -> int:
    """How many tasks the session's cluster runs at once (its default parallelism).

    A Spark Connect client cannot ask the SparkContext. It reads ``spark.default.parallelism``
    when the server sets it (the local server does); otherwise it counts the partitions Spark
    gives a range without a partition count, which follow the same default (one small job,
    0.3-0.4 s on the local server).
    """
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    configured = spark.conf.get(PARALLELISM, None)
    if configured:
        return int(configured)
    numbers = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
    row = numbers.agg(F.max("p")).first()
    return 1 + int(row[0]) if row is not None and row[0] is not None else 1


@contextlib.contextmanager
def job_description(spark: SparkSession, text: str) -> Iterator[None]:
    """Name the jobs started inside the block in the Spark UI (classic sessions only).

    The description is a property of the thread: later jobs of the run must not carry it.
    """
    if is_connect(spark):
        yield
        return
    sc = spark.sparkContext
    sc.setJobDescription(text)
    try:
        yield
    finally:
        sc.setLocalProperty("spark.job.description", None)  # pyright: ignore[reportArgumentType]
