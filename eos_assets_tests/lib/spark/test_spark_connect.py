"""The local Spark Connect server: started once, the bronze ingest over it equals the in-process
one (aborted records never), a server started without a lake's S3 settings is refused for a
lake on S3 in one line, a task's error comes back as its one line, a crash mid-read then a
rerun is exact, a server killed mid-run fails the run in one line within seconds and after
``spark up`` a rerun is exact, runs share one session of the server (one Python daemon, not
one each), and ``spark down`` stops it.

Derived steps that find the server gone are test_spark_server_faults's: the server killed in
the KPI step fails every later step in one line, and the rerun after ``spark up`` is exact."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from eos_assets import cli
from eos_assets.defs.stream import ORDERS
from eos_assets.devkit import s3server
from eos_assets.lib import faults
from eos_assets.lib.delta import delta_io
from eos_assets.lib.ingest.ingest import ingest_bronze
from eos_assets.lib.ports import free_port
from eos_assets.lib.spark import spark_server
from eos_assets_tests.faults.ingest_once import FAILED
from eos_assets_tests.support.records import batch, committed_truth, rows
from eos_assets_tests.support.s3 import lake_env, objects
from eos_assets_tests.support.txn_producer import Sent, send_transaction

# One asset (``sys.argv[1]``) materialized in a Dagster run of its own, with the product's
# resources (EOS_* settings), so that the one step's failure is the run's.
PRODUCT_RUN = """
import json, sys
import dagster as dg
from eos_assets.resources import build_resources
from eos_assets.settings import Settings
from eos_assets_tests.support import graph

wanted = dg.AssetKey.from_user_string(sys.argv[1])
assets = [a for a in graph.ALL if wanted in a.keys]
resources = build_resources(Settings.from_env())
result = dg.materialize(assets, resources=resources, raise_on_error=False)
failures = [
    {
        "step": e.step_key,
        "description": e.step_failure_data.user_failure_data.description
        if e.step_failure_data.user_failure_data
        else None,
        "cause": e.step_failure_data.error.cause is not None if e.step_failure_data.error else None,
    }
    for e in result.get_step_failure_events()
]
print("EOS_OUTCOME " + json.dumps({"success": result.success, "failures": failures}))
"""

# Every column a reader sees, in a stable row order, to compare two tables row for row.
_KEY = ["topic", "partition", "offset"]
OUTCOME = "EOS_OUTCOME "


def over_connect(
    state: Path, bootstrap: str, topic: str, uri: str, *extra: str, crash_at: str | None = None
) -> tuple[int, dict[str, Any] | None]:
    """One ingest over the server in a process of its own; its exit code and outcome line.

    A process of its own: pyspark refuses a Spark Connect session in a process that has an
    in-process one (the session fixture's).
    """
    env = {k: v for k, v in os.environ.items() if k not in (faults.CRASH_ENV, faults.PAUSE_ENV)}
    if crash_at is not None:
        env[faults.CRASH_ENV] = crash_at
    command = ingest_command(spark_server.local_url(state), bootstrap, topic, uri, *extra)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, outcome_of(done.stdout)


def ingest_command(url: str, bootstrap: str, topic: str, uri: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "eos_assets_tests.faults.ingest_once", "--bootstrap", bootstrap,
        "--topic", topic, "--table", uri, "--remote", url, *extra,
    ]  # fmt: skip


def outcome_of(stdout: str) -> dict[str, Any] | None:
    lines = [line for line in stdout.splitlines() if line.startswith(OUTCOME)]
    return json.loads(lines[-1].removeprefix(OUTCOME)) if lines else None


def table(uri: str) -> pa.Table:
    t = delta_io.read_arrow(uri)
    return t.sort_by([(k, "ascending") for k in _KEY])


def positions(uri: str, topic: str) -> dict[str, int | None]:
    apps = [f"eos:{topic}:{p}" for p in range(3)]
    return dict(delta_io.positions(delta_io.load(uri), apps))


def send(bootstrap: str, topic: str) -> list[Sent]:
    return [
        send_transaction(bootstrap, topic, batch(300, 3)),
        send_transaction(bootstrap, topic, batch(50, 3, first=300), commit=False),
        send_transaction(bootstrap, topic, batch(250, 3, first=350)),
    ]


def test_an_ingest_over_connect_equals_the_in_process_one(
    spark: SparkSession,
    spark_server_state: Path,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    lake_root: str,
) -> None:
    topic = make_topic(3)
    sent = send(kafka_bootstrap, topic)
    classic, remote = f"{lake_root}/classic", f"{lake_root}/connect"
    assert ingest_bronze(
        spark, classic, [topic], {"bootstrap.servers": kafka_bootstrap}, contract=ORDERS.contract
    ).records
    code, outcome = over_connect(spark_server_state, kafka_bootstrap, topic, remote)
    assert code == 0 and outcome is not None and outcome["records"] == 550
    assert table(remote).equals(table(classic))
    assert positions(remote, topic) == positions(classic, topic)
    assert set(rows(remote)) == committed_truth(sent)
    code, outcome = over_connect(spark_server_state, kafka_bootstrap, topic, remote)
    assert code == 0 and outcome is not None and outcome["version"] is None  # nothing new


def test_the_local_server_states_its_task_slots(spark_server_state: Path) -> None:
    # A run reads them from the session's settings (the ingest splits its ranges by them).
    code = (
        "import sys; from pyspark.sql import SparkSession; "
        "from eos_assets.lib.spark.spark_modes import task_slots; "
        "s = SparkSession.builder.remote(sys.argv[1]).getOrCreate(); "
        "print(s.conf.get('spark.default.parallelism'), task_slots(s))"
    )
    url = spark_server.local_url(spark_server_state)
    done = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.split() == ["2", "2"], done.stderr[-500:]


def test_a_server_started_without_the_lakes_s3_settings_is_refused_in_one_line(
    spark_server_state: Path,
    s3_server: s3server.S3Info,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The session's server was started for a local lake; the run's lake is on S3.
    lake = lake_env(s3_server)
    topic = make_topic(1)
    send_transaction(kafka_bootstrap, topic, batch(10, 1))
    settings = {**lake, "EOS_TOPICS": topic, "EOS_KAFKA_BOOTSTRAP": kafka_bootstrap}
    run = product_run(spark_server_state, "orders/bronze/raw_events", "local", **settings)
    assert run is not None and not run["success"], run
    [failure] = run["failures"]
    assert failure["description"] == (
        "the local Spark server was started without the settings of a lake on S3, not for the "
        f"lake at {lake['EOS_LAKE_ROOT']} (s3 {s3_server.endpoint}): restart the Spark server "
        "with the lake's variables: eos-assets spark down && eos-assets spark up"
    )
    for name, value in lake.items():
        monkeypatch.setenv(name, value)
    assert objects(lake["EOS_LAKE_ROOT"]) == [], "nothing may be written before Spark is there"


def test_a_task_error_over_connect_is_its_one_line(
    spark_server_state: Path, kafka_bootstrap: str, make_topic: Callable[..., str], lake_root: str
) -> None:
    topic = make_topic(1)
    # More than one consumed batch (10,000 records): a 0 s read timeout expires after the first.
    send_transaction(kafka_bootstrap, topic, batch(12_000, 1))
    uri = f"{lake_root}/bronze"
    code, outcome = over_connect(
        spark_server_state, kafka_bootstrap, topic, uri, "--read-timeout", "0"
    )
    assert code == FAILED and outcome is not None and outcome["kind"] == "BrokerError"
    assert re.fullmatch(r"reading .* did not finish in 0s .*read_timeout_s", outcome["error"])


def test_a_crash_mid_read_over_connect_then_a_rerun_is_exact(
    spark_server_state: Path, kafka_bootstrap: str, make_topic: Callable[..., str], lake_root: str
) -> None:
    topic = make_topic(3)
    sent = send(kafka_bootstrap, topic)
    uri = f"{lake_root}/bronze"
    # The server's Python workers never saw this variable: the task gets it from the run.
    code, outcome = over_connect(
        spark_server_state, kafka_bootstrap, topic, uri, crash_at=faults.MID_READ
    )
    assert code == -9 and outcome is None
    code, outcome = over_connect(spark_server_state, kafka_bootstrap, topic, uri)
    assert code == 0 and outcome is not None and outcome["records"] == 550
    found = rows(uri)
    assert set(found) == committed_truth(sent) and len(found) == 550


# A run whose server died fails and exits once the bounded retries are spent
# (spark_modes.RETRY_POLICY: 11-13 s). pyspark's default retries kept it waiting ~10 minutes,
# and its cleanup calls, retried once more each, held the process until ~37 s.
DEAD_SERVER_EXIT_S = 30.0


def test_a_server_killed_mid_read_fails_the_run_in_one_line_and_a_rerun_after_up_is_exact(
    spark_server_state: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    lake_root: str,
) -> None:
    # The session's server, killed here and started again by `spark up` as a user would.
    state = spark_server_state
    monkeypatch.setenv("EOS_STATE_DIR", str(state))
    monkeypatch.setenv("EOS_SPARK_MASTER", "local[2]")
    assert cli.main(["spark", "up"]) == 0  # running already: says where
    url = capsys.readouterr().out.strip()
    topic = make_topic(3)
    uri = f"{lake_root}/bronze"
    sent = [send_transaction(kafka_bootstrap, topic, batch(300, 3))]
    assert over_connect(state, kafka_bootstrap, topic, uri)[0] == 0
    before, version = table(uri), delta_io.load(uri).version()
    sent.append(send_transaction(kafka_bootstrap, topic, batch(250, 3, first=300)))

    # The run's tasks stop mid-read inside the server; then the server dies under it.
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    env = {k: v for k, v in os.environ.items() if k != faults.CRASH_ENV}
    env |= {faults.PAUSE_ENV: faults.MID_READ, faults.PAUSE_DIR_ENV: str(pauses)}
    run = subprocess.Popen(
        ingest_command(url, kafka_bootstrap, topic, uri),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not list(pauses.glob(f"{faults.MID_READ}-*.ready")):
            assert run.poll() is None and time.monotonic() < deadline, "no task paused"
            time.sleep(0.1)
        info = spark_server.server_status(state)
        assert info is not None
        os.killpg(info.pid, signal.SIGKILL)  # the JVM and its Python workers
        stdout, _ = run.communicate(timeout=DEAD_SERVER_EXIT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run still waited {DEAD_SERVER_EXIT_S:g}s after its server died")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    outcome = outcome_of(stdout)
    assert run.returncode == FAILED and outcome is not None
    assert outcome["kind"] == "SparkServerError"
    assert outcome["error"] == (
        f"the Spark Connect server at {url} stopped answering: run `eos-assets spark up` "
        "(or check EOS_SPARK_CONNECT) and rerun"
    )
    assert delta_io.load(uri).version() == version and table(uri).equals(before)

    assert cli.main(["spark", "up"]) == 0
    assert capsys.readouterr().out.strip() == url  # its port again: run config still fits
    code, outcome = over_connect(state, kafka_bootstrap, topic, uri)
    assert code == 0 and outcome is not None and outcome["records"] == 250
    found = rows(uri)
    assert set(found) == committed_truth(sent) and len(found) == 550


def product_run(state: Path, asset: str, connect: str, **settings: str) -> dict[str, Any] | None:
    """``asset`` materialized through Dagster in a process of its own; its outcome line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_", "DAGSTER_"))}
    env |= {"EOS_STATE_DIR": str(state), "EOS_SPARK_CONNECT": connect, **settings}
    command = [sys.executable, "-c", PRODUCT_RUN, asset]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return outcome_of(done.stdout)


def daemons(server_pid: int) -> int:
    """How many Python daemons (``pyspark.daemon`` processes that are not forked workers) the
    server's JVM has started."""
    count = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            continue
        count += parent == server_pid and b"pyspark.daemon" in command
    return count


def test_runs_share_one_session_and_one_python_daemon_then_spark_down_stops_the_server(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    lake_root: str,
) -> None:
    # A server of its own: the session's one has served clients that released their session.
    state = tmp_path / "state"
    info = spark_server.up(state, "local[2]")
    try:
        assert info.session
        assert spark_server.local_url(state) == f"{info.url}/;session_id={info.session}"
        topic = make_topic(3)
        env = {"EOS_LAKE_ROOT": lake_root, "EOS_KAFKA_BOOTSTRAP": kafka_bootstrap}
        for n in range(3):
            send_transaction(kafka_bootstrap, topic, batch(100, 3, first=100 * n))
            run = product_run(state, "orders/bronze/raw_events", "local", EOS_TOPICS=topic, **env)
            assert run == {"success": True, "failures": []}
        assert len(rows(f"{lake_root}/orders/bronze/raw_events")) == 300
        # Three runs with Python tasks (the ingest's): a session each would have left three.
        assert daemons(info.pid) == 1

        # `spark status` says where it runs; `spark down` stops it, and says so once stopped.
        monkeypatch.setenv("EOS_STATE_DIR", str(state))
        assert cli.main(["spark", "status"]) == 0
        assert info.url in capsys.readouterr().out
        assert cli.main(["spark", "down"]) == 0
        assert capsys.readouterr().out.strip() == "stopped"
        assert not Path(f"/proc/{info.pid}").exists()
        assert cli.main(["spark", "status"]) == 1
        assert cli.main(["spark", "down"]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == "not running"
    finally:
        spark_server.down(state)


LOST_TWICE = """
import sys
from pyspark.sql import SparkSession
from eos_assets.lib.spark.spark_modes import bound_retries, server_lost

spark = bound_retries(SparkSession.builder.remote(sys.argv[1]).getOrCreate())
try:
    spark.range(1).collect()
except Exception as exc:
    lost = server_lost(spark, exc)
    print(lost)
# The next step of the run asks for the session again.
again = bound_retries(spark)
print([policy.max_retries for policy in again.client.get_retry_policies()])
"""


def test_once_the_server_is_found_gone_later_steps_retry_nothing(tmp_path: Path) -> None:
    url = f"sc://127.0.0.1:{free_port()}"  # nobody listens there
    done = subprocess.run(
        [sys.executable, "-c", LOST_TWICE, url], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    line, retries = done.stdout.strip().splitlines()[-2:]
    assert line.startswith(f"the Spark Connect server at {url} stopped answering")
    assert retries == "[0]"
