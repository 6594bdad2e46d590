import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster_pyspark import LazyPySparkResource

from eos_assets.lib.errors import ConfigError, SparkServerError
from eos_assets.lib.outbound.alert_notify import DeliveryPolicy
from eos_assets.resources import build_resources
from eos_assets.resources.alerts import AlertsResource
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.spark import LocalSparkResource, quick_start_run_config, spark_session
from eos_assets.settings import (
    Settings,
    kafka_client_properties,
    read_agg_out_max_behind,
    read_alert_policy,
)


def test_defaults_follow_the_contract() -> None:
    s = Settings.from_env({})
    assert (s.kafka_bootstrap, s.topics, s.lake_root, s.warehouse, s.spark_master) == (
        None,
        ("orders",),
        ".eos/lake",
        ".eos/warehouse.duckdb",
        "local[*]",
    )


def test_values_from_the_environment() -> None:
    s = Settings.from_env(
        {
            "EOS_KAFKA_BOOTSTRAP": "k1:9092,k2:9092",
            "EOS_TOPICS": " orders , refunds ,",
            "EOS_LAKE_ROOT": "s3://bucket/lake/",
            "EOS_SPARK_MASTER": "spark://m:7077",
        }
    )
    assert s.kafka_bootstrap == "k1:9092,k2:9092"
    assert s.topics == ("orders", "refunds")
    assert (
        s.table_uri("orders", "bronze", "raw_events") == "s3://bucket/lake/orders/bronze/raw_events"
    )
    assert s.spark_master == "spark://m:7077"


def test_empty_topic_list_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="EOS_TOPICS"):
        Settings.from_env({"EOS_TOPICS": " , "})


def test_kafka_security_properties_pass_through() -> None:
    props = kafka_client_properties(
        {
            "EOS_KAFKA_BOOTSTRAP": "ignored-here",
            "EOS_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "EOS_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "EOS_KAFKA_SASL_USERNAME": "svc",
            "OTHER": "x",
        }
    )
    assert props == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "svc",
    }


def test_sasl_password_reaches_the_client_from_an_env_var_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EOS_KAFKA_SASL_PASSWORD", "s3cret")
    monkeypatch.setenv("EOS_KAFKA_BOOTSTRAP", "k1:9092")
    resources = build_resources(Settings.from_env())
    kafka = resources["kafka"]
    assert isinstance(kafka, KafkaResource)
    # The config the UI shows holds the EnvVar, not the secret.
    assert isinstance(kafka.sasl_password, dg.EnvVar)
    config = KafkaResource(bootstrap_servers="k1:9092", sasl_password="s3cret").client_config()
    assert config["sasl.password"] == "s3cret" and config["bootstrap.servers"] == "k1:9092"


def test_outbound_settings_reach_the_assets_through_their_resources() -> None:
    env = {"EOS_AGG_OUT_TOPIC": "lake.{stream}.windows", "EOS_ALERT_URL": "http://alerts:8080"}
    resources = build_resources(Settings.from_env(env))
    kafka, alerts = resources["kafka"], resources["alerts"]
    assert isinstance(kafka, KafkaResource) and isinstance(alerts, AlertsResource)
    assert kafka.agg_out_topic_of("orders") == "lake.orders.windows"
    assert alerts.url == "http://alerts:8080"
    defaults = build_resources(Settings.from_env({}))
    assert defaults["kafka"].agg_out_topic_of("page_views") == "page_views-agg-out"
    assert defaults["alerts"].url is None


def test_spark_connect_chooses_the_session() -> None:
    assert Settings.from_env({}).spark_connect is None  # classic, in-process
    remote = Settings.from_env({"EOS_SPARK_CONNECT": "sc://spark.example:15002"})
    assert remote.spark_connect == "sc://spark.example:15002"
    assert Settings.from_env({"EOS_SPARK_CONNECT": "local"}).spark_connect == "local"
    with pytest.raises(ConfigError, match="EOS_SPARK_CONNECT"):
        Settings.from_env({"EOS_SPARK_CONNECT": "spark://m:7077"})


def test_the_spark_resource_follows_spark_connect(tmp_path: Path) -> None:
    url = "sc://spark.example:15002"
    remote = build_resources(Settings.from_env({"EOS_SPARK_CONNECT": url}))["pyspark"]
    assert isinstance(remote, LazyPySparkResource)
    assert remote.spark_config == {"spark.remote": url}
    assert quick_start_run_config(remote) == {}  # no driver JVM of the run's own
    classic = build_resources(Settings.from_env({}))["pyspark"]
    assert isinstance(classic, LazyPySparkResource)
    assert "spark.remote" not in classic.spark_config
    assert classic.spark_config["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"


def test_a_local_spark_server_is_looked_up_when_a_run_needs_it(tmp_path: Path) -> None:
    # No server runs for this state folder: the resource builds, and only asking it for a
    # session says so, in one line.
    env = {"EOS_SPARK_CONNECT": "local", "EOS_STATE_DIR": str(tmp_path)}
    local = build_resources(Settings.from_env(env))["pyspark"]
    assert isinstance(local, LocalSparkResource)
    assert local.state_dir == str(tmp_path.resolve())
    assert quick_start_run_config(local) == {}
    with pytest.raises(SparkServerError) as raised:
        spark_session(local)
    assert str(raised.value) == (
        "EOS_SPARK_CONNECT=local but no Spark server runs: start it with `eos-assets spark up`, "
        "or unset EOS_SPARK_CONNECT for an in-process session"
    )


@pytest.mark.slow  # the definitions loaded in a process of its own
def test_the_definitions_load_with_a_local_spark_server_that_is_not_running(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "EOS_SPARK_CONNECT": "local", "EOS_STATE_DIR": str(tmp_path)}
    code = (
        "from eos_assets.definitions import defs; print(type(defs.resources['pyspark']).__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "LocalSparkResource"


def test_alert_policy_and_publisher_lag_come_from_the_settings() -> None:
    policy = read_alert_policy({"EOS_ALERT_BACKOFF_S": "0.5", "EOS_ALERT_MAX_ATTEMPTS": "3"})
    assert (policy.backoff_s, policy.max_attempts, policy.timeout_s) == (0.5, 3, 10.0)
    assert read_alert_policy({}) == DeliveryPolicy()
    with pytest.raises(ConfigError, match=r"^EOS_ALERT_MAX_ATTEMPTS='0' is not a positive whole"):
        read_alert_policy({"EOS_ALERT_MAX_ATTEMPTS": "0"})
    with pytest.raises(ConfigError, match=r"^EOS_ALERT_TIMEOUT_S='soon' is not a number"):
        read_alert_policy({"EOS_ALERT_TIMEOUT_S": "soon"})
    assert (
        read_agg_out_max_behind({}),
        read_agg_out_max_behind({"EOS_AGG_OUT_MAX_BEHIND": "0"}),
    ) == (5, 0)
    with pytest.raises(ConfigError, match="EOS_AGG_OUT_MAX_BEHIND='-1'"):
        read_agg_out_max_behind({"EOS_AGG_OUT_MAX_BEHIND": "-1"})


@pytest.mark.slow  # the definitions loaded and a run in a process of its own
def test_missing_delta_jars_load_the_definitions_and_fail_a_run_with_one_line(
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "EOS_JARS_DIR": str(tmp_path / "jars"),  # empty: nothing was installed there
        "EOS_KAFKA_BOOTSTRAP": "127.0.0.1:9",  # not reached: Spark is asked for first
        "EOS_LAKE_ROOT": str(tmp_path / "lake"),
    }
    env.pop("EOS_SPARK_CONNECT", None)
    code = "\n".join(
        [
            "import dagster as dg",
            "from eos_assets.definitions import defs",
            "print(type(defs.resources['pyspark']).__name__)",
            "job = defs.resolve_implicit_global_asset_job_def()",
            "result = job.execute_in_process(",
            "    asset_selection=[dg.AssetKey(['orders', 'bronze', 'raw_events'])],",
            "    instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)",
            "failure = result.failure_data_for_node('orders__bronze__raw_events')",
            "print(failure.user_failure_data.description)",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    kind, line = done.stdout.strip().splitlines()[-2:]
    assert kind == "MissingPartsResource"
    assert line.startswith("the delta jars are missing in ") and "run `eos-assets jars`" in line
    assert not (tmp_path / "lake").exists()
