"""What differs between a classic and a Spark Connect session: the retry bound a Connect session
gets, and on the session's classic SparkSession the answers of each helper."""

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.connect.client.retries import DefaultPolicy

from eos_assets.lib.spark.spark_modes import (
    RETRY_POLICY,
    bound_retries,
    is_connect,
    job_description,
    run_server_lost,
    server_lost,
    task_slots,
)


def test_a_dead_connect_server_is_given_up_on_within_seconds() -> None:
    policy = DefaultPolicy(**RETRY_POLICY)  # pyspark takes every name
    waits = [
        min(policy.initial_backoff * policy.backoff_multiplier**i, policy.max_backoff or 0)
        for i in range(policy.max_retries or 0)
    ]
    jitter = sum(policy.jitter for w in waits if w >= policy.min_jitter_threshold)
    assert (sum(waits) / 1000, (sum(waits) + jitter) / 1000) == pytest.approx((11.1, 13.1))


def test_an_error_from_no_connect_session_is_not_a_lost_server() -> None:
    assert run_server_lost(RuntimeError("boom")) is None


def test_a_classic_session(spark: SparkSession) -> None:
    assert not is_connect(spark)
    assert bound_retries(spark) is spark
    assert server_lost(spark, RuntimeError("boom")) is None
    assert task_slots(spark) == 2  # local[2]
    sc = spark.sparkContext
    with job_description(spark, "ingest orders"):
        assert sc.getLocalProperty("spark.job.description") == "ingest orders"
    assert sc.getLocalProperty("spark.job.description") is None
