"""A lake on S3 that cannot be used: bad variables and a store without conditional writes fail
bronze, the first step that needs the lake, with one line naming what to set, and write
nothing to the store."""

import os
from collections.abc import Callable

import dagster as dg
import pytest
from dagster_pyspark import LazyPySparkResource

from eos_assets.lib import lake_store
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.faults.harness import one_line
from eos_assets_tests.lake_s3.conftest import objects
from eos_assets_tests.lake_s3.no_conditional_put import refusing_proxy
from eos_assets_tests.support.orders import raw_events

NODE = "orders__bronze__raw_events"


def bronze_failure(bootstrap: str, topic: str, spark_url: str) -> str:
    """Materialize bronze with the lake of this environment; return the failure's one line."""
    root = os.environ["EOS_LAKE_ROOT"]
    resources = {
        "kafka": KafkaResource(bootstrap_servers=bootstrap, topics=[topic]),
        # As the definitions build it: the options derived from this environment.
        "lake": LakeResource(
            root=root, storage_options=lake_store.storage_options(root, os.environ)
        ),
        "pyspark": LazyPySparkResource(spark_config={"spark.remote": spark_url}),
    }
    result = dg.materialize([raw_events], resources=resources, raise_on_error=False)
    assert not result.success
    data = result.failure_data_for_node(NODE)
    assert data is not None and data.user_failure_data is not None, data
    return data.user_failure_data.description or ""


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None}, "AWS_ACCESS_KEY_ID"),
        ({"AWS_SECRET_ACCESS_KEY": "wrong"}, "AWS_SECRET_ACCESS_KEY"),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, "AWS_ENDPOINT_URL"),
        ({"EOS_LAKE_ROOT": "s3://no-such-bucket/lake"}, "EOS_LAKE_ROOT"),
        ({"AWS_ALLOW_HTTP": None}, "AWS_ALLOW_HTTP"),
    ],
    ids=["no-credentials", "wrong-secret", "wrong-endpoint", "no-bucket", "http-not-allowed"],
)
def test_bad_variables_fail_the_first_step_with_one_line_and_write_nothing(
    change: dict[str, str | None],
    named: str,
    s3_lake: str,
    s3_spark: str,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = make_topic(partitions=1)
    good = {name: os.environ[name] for name in change if name in os.environ}
    for name, value in change.items():
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)
    message = bronze_failure(kafka_bootstrap, topic, s3_spark)
    assert one_line(message) and named in message, message
    for name, value in good.items():  # the good variables again, to look at the store
        monkeypatch.setenv(name, value)
    assert objects(s3_lake) == [], "nothing may be written"


def test_a_store_without_conditional_writes_is_refused_at_the_first_commit(
    s3_lake: str,
    s3_spark: str,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = make_topic(partitions=1)
    real = os.environ["AWS_ENDPOINT_URL"]
    with refusing_proxy(real) as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        message = bronze_failure(kafka_bootstrap, topic, s3_spark)
    assert one_line(message) and "conditional writes" in message, message
    monkeypatch.setenv("AWS_ENDPOINT_URL", real)
    assert not [o for o in objects(s3_lake) if "_delta_log/" in o and "_eos_" not in o], (
        "no Delta commit may be made on such a store"
    )
