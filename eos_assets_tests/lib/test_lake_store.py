"""What a lake on S3 derives from the settings: delta-rs options, s3a settings, one-liners
(also of a store's error in a Spark task)."""

import pytest

from eos_assets.lib import lake_store, store_errors
from eos_assets.lib.errors import EosError, raised_in
from eos_assets.lib.spark.spark_env import spark_config
from eos_assets.settings import Settings

STORE = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
    "AWS_REGION": "eu-west-3",
    "AWS_ACCESS_KEY_ID": "key",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AWS_ALLOW_HTTP": "true",
}


def test_a_local_lake_derives_nothing() -> None:
    assert lake_store.storage_options(".eos/lake", STORE) == {}
    assert lake_store.spark_settings("/data/lake", STORE) == {}
    assert lake_store.problem("/data/lake", {}) is None
    assert "spark.driver.extraClassPath" not in spark_config("local[1]", lake_root="/data/lake")


def test_delta_rs_gets_the_store_but_no_secret() -> None:
    options = lake_store.storage_options("s3://bucket/lake", STORE)
    assert options == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": "eu-west-3",
        "AWS_ALLOW_HTTP": "true",
    }


@pytest.mark.parametrize("root", ["s3://bucket/lake", "s3a://bucket/lake/"])
def test_both_schemes_give_s3_table_uris(root: str) -> None:
    assert Settings(lake_root=root).table_uri("bronze", "raw") == "s3://bucket/lake/bronze/raw"


def test_spark_reads_s3_uris_through_s3a_from_the_same_variables() -> None:
    local = lake_store.spark_settings("s3a://bucket/lake", STORE)
    assert local["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert local["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert local["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-3"
    assert local["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert local["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    # The store's address reaches the executors; no credential is ever in the settings (the
    # UI shows the Spark resource's config).
    assert local["spark.executorEnv.AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000"
    assert not any("secret" in v or "SECRET" in k or "ACCESS_KEY" in k for k, v in local.items())


def test_a_session_of_a_lake_on_s3_has_the_s3a_jars_on_its_class_paths() -> None:
    config = spark_config("local[1]", lake_root="s3://bucket/lake")
    assert config["spark.driver.extraClassPath"].endswith("/s3/*")
    assert config["spark.executor.extraClassPath"] == config["spark.driver.extraClassPath"]
    assert "s3/" not in config["spark.jars"], "the SDK bundle in spark.jars slows every start"


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"AWS_ALLOW_HTTP": ""}, "AWS_ALLOW_HTTP=true"),
        ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "AWS_ACCESS_KEY_ID"),
        ({"AWS_ENDPOINT_URL": "", "AWS_ENDPOINT": "http://x:1"}, "AWS_ENDPOINT_URL"),
        ({"AWS_ENDPOINT_URL": "127.0.0.1:9000"}, "AWS_ENDPOINT_URL"),
    ],
)
def test_a_configuration_that_cannot_work_is_one_line_naming_the_variable(
    change: dict[str, str], names: str
) -> None:
    env = {k: v for k, v in {**STORE, **change}.items() if v}
    message = lake_store.problem("s3://bucket/lake", env)
    assert message is not None and names in message and "\n" not in message
    assert lake_store.problem("s3://bucket/lake", STORE) is None


def test_on_aws_itself_no_key_is_needed_up_front() -> None:
    # A profile or instance credentials may hold them: only the store can say.
    assert lake_store.problem("s3://bucket/lake", {"AWS_REGION": "eu-west-3"}) is None


# pyarrow's text of an upload to an endpoint where nothing listens (pyarrow 26.0.1).
PYARROW_REFUSED = (
    "When initiating multiple part upload for key 'x/t/f.parquet' in bucket 'lake': AWS Error "
    "NETWORK_CONNECTION during CreateMultipartUpload operation: curlCode: 7, Could not connect "
    "to server; Details: Failed to connect to 127.0.0.1:9000 after 0 ms: Could not connect to "
    "server"
)


def test_a_store_error_in_a_spark_task_becomes_its_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in STORE.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(EosError) as raised, store_errors.task_errors("s3://lake/x/t"):
        raise OSError(PYARROW_REFUSED)
    message = str(raised.value)
    assert "127.0.0.1:9000" in message and "AWS_ENDPOINT_URL" in message and "\n" not in message
    # The driver finds the line in the task's failure, whatever wraps it.
    wrapped = f"Traceback ...\neos_assets.lib.errors.EosError: {message}\n\tat org.apache..."
    assert str(raised_in(wrapped)) == message
    # An error that is not the store's stays what it is.
    with pytest.raises(OSError), store_errors.task_errors("s3://lake/x/t"):
        raise OSError("disk full")
