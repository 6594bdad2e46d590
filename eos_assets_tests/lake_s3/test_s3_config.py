"""A lake on S3 that cannot be used: bad variables and a store without conditional writes fail
bronze's ingest, the first step that needs the lake, with one line naming what to set, and
write nothing to the store. The ingest runs as ``faults.ingest_once`` on the session's Spark
Connect server, with this test's environment."""

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from eos_assets.devkit import s3server
from eos_assets.settings import Settings
from eos_assets_tests.faults.harness import FAILED, one_line, run_ingest
from eos_assets_tests.lake_s3.no_conditional_put import Answer, without_conditional_puts
from eos_assets_tests.support.s3 import objects


def bronze_failure(bootstrap: str, topic: str, spark_url: str) -> str:
    """Run bronze's ingest with the lake of this environment, in a process of its own (a
    classic session of this test process would refuse a Spark Connect one); return its error.
    """
    table = Settings.from_env().table_uri("orders", "bronze", "raw_events")
    run = run_ingest(bootstrap, topic, table, remote=spark_url, read_timeout=20.0)
    assert run.returncode == FAILED and run.outcome and not run.outcome["ok"], run.tail()
    return run.outcome["error"]


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


@pytest.mark.parametrize("answer", ["refuse", "ignore"])
def test_a_store_without_conditional_writes_is_refused_at_the_first_commit(
    answer: Answer,
    s3_lake: str,
    s3_server: s3server.S3Info,
    s3_spark: str,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A store that refuses the condition (501), and one that ignores it: answers 200 and
    overwrites the key (an S3Proxy checking no signature behind a proxy dropping the header)."""
    topic = make_topic(partitions=1)
    with contextlib.ExitStack() as stack:
        store = s3_server
        if answer == "ignore":
            store = s3server.start_server(tmp_path / "s3", anonymous=True)
            stack.callback(s3server.stop_server, store)
        endpoint = stack.enter_context(without_conditional_puts(store.endpoint, answer))
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        message = bronze_failure(kafka_bootstrap, topic, s3_spark)
        said = "ignores conditional writes" if answer == "ignore" else "conditional writes"
        assert one_line(message) and said in message, message
        for looked_at in {store.endpoint, s3_server.endpoint}:
            monkeypatch.setenv("AWS_ENDPOINT_URL", looked_at)
            assert not [o for o in objects(s3_lake) if "_delta_log/" in o], (
                "no Delta commit may be made on such a store"
            )
