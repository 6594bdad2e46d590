"""The production instance (deploy/dagster.yaml) on a real PostgreSQL: the standard Dagster CLI
materializes bronze with it, and the run and its materialization are found in PostgreSQL."""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg2

from eos_assets.lib.delta import delta_io
from eos_assets_tests.deploy.postgres import Postgres, create_database, postgres_server
from eos_assets_tests.support.records import batch, committed_truth
from eos_assets_tests.support.txn_producer import send_transaction

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")
DB = "dagster"


def _instance_env(pg: Postgres, home: Path, **settings: str) -> dict[str, str]:
    """Only what a deployment sets: DAGSTER_HOME, the PostgreSQL connection and the settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_", "DAGSTER_"))}
    env.update(
        DAGSTER_HOME=str(home),
        DAGSTER_PG_HOST=pg.host,
        DAGSTER_PG_PORT=str(pg.port),
        DAGSTER_PG_DB=DB,
        DAGSTER_PG_USERNAME=pg.user,
        DAGSTER_PG_PASSWORD=pg.password,
        **settings,
    )
    return env


def _query(pg: Postgres, sql: str, *args: object) -> list[tuple]:
    conn = psycopg2.connect(pg.dsn(DB))
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    finally:
        conn.close()


def test_the_production_instance_keeps_runs_and_events_in_postgres(
    kafka_bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    sent = [send_transaction(kafka_bootstrap, topic, batch(20, 2))]
    home, lake = tmp_path / "dagster_home", tmp_path / "lake"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.yaml", home / "dagster.yaml")
    with postgres_server() as pg:
        create_database(pg, DB)
        env = _instance_env(
            pg, home, EOS_KAFKA_BOOTSTRAP=kafka_bootstrap, EOS_TOPICS=topic,
            EOS_LAKE_ROOT=str(lake), EOS_WAREHOUSE=str(tmp_path / "warehouse.duckdb"),
            EOS_STATE_DIR=str(tmp_path / "state"), EOS_SPARK_MASTER="local[1]",
        )  # fmt: skip
        info = subprocess.run(
            [sys.executable, "-m", "eos_assets_tests.deploy.instance_info"],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert info.returncode == 0, info.stderr[-3000:]
        assert json.loads(info.stdout.strip().splitlines()[-1]) == {
            "run_storage": "PostgresRunStorage",
            "event_log_storage": "PostgresEventLogStorage",
            "run_coordinator": "QueuedRunCoordinator",
            "max_concurrent_runs": 4,
            "pool_default_limit": 1,
            "pool_granularity": "PoolGranularity.RUN",
            "run_monitoring": True,
            "run_retries": 1,
            "telemetry": False,
        }

        command = [DAGSTER, "asset", "materialize", "-m", "eos_assets.definitions"]
        command += ["--select", "orders/bronze/raw_events"]
        done = subprocess.run(
            command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]

        runs = _query(pg, "SELECT run_id, status FROM runs")
        assert len(runs) == 1 and runs[0][1] == "SUCCESS", runs
        run_id = runs[0][0]
        materialized = _query(
            pg,
            "SELECT asset_key FROM event_logs WHERE run_id = %s "
            "AND dagster_event_type = 'ASSET_MATERIALIZATION'",
            run_id,
        )
        assert materialized == [('["orders", "bronze", "raw_events"]',)], materialized
        steps = _query(
            pg,
            "SELECT count(*) FROM event_logs WHERE run_id = %s "
            "AND dagster_event_type = 'STEP_SUCCESS'",
            run_id,
        )
        assert steps[0][0] >= 1
    t = delta_io.read_arrow(str(lake / "orders" / "bronze" / "raw_events"))
    columns = (t["partition"].to_pylist(), t["offset"].to_pylist(), t["value"].to_pylist())
    got = set(zip(*columns, strict=True))
    assert got == committed_truth(sent)
