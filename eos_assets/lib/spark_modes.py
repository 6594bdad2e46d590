"""What differs between an in-process (classic) SparkSession and a Spark Connect one.

Spark Connect has no SparkContext, no RDDs and no py4j gateway; the few things the product
needs from them go through these functions, so the same code runs under both.
"""

import contextlib
from collections.abc import Iterator

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session (``pyspark.sql.connect``), False for a classic one."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def task_slots(spark: SparkSession) -> int:
    """How many tasks the session's cluster runs at once (its default parallelism).

    A Spark Connect client cannot ask the SparkContext: it counts the partitions Spark gives a
    range without a partition count, which follow the same default (one small job).
    """
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
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
