"""serving/kpis with readers: held read-only connections never stop it, a killed writer loses
nothing that was served.

The KPI Delta tables are written directly (no Spark); every row of Delta version ``v`` has
``orders_paid == v + 1``, so a reader that sees a whole served version sees
``orders_paid == delta_version + 1`` on every row of both tables.
"""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from eos_assets.lib import faults
from eos_assets.lib.serving import serving, warehouse_file
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.warehouse import WarehouseResource
from eos_assets_tests.support.graph import KPI_DAILY_SCHEMA, KPI_WINDOW_SCHEMA
from eos_assets_tests.support.orders import KPI_DAILY, KPI_WINDOW, duckdb_matches_delta, serving_kpi

REPO = Path(__file__).resolve().parents[2]
DAY = date(2026, 11, 21)
CURRENCIES = ("EUR", "USD", "GBP")
WINDOWS = 48
# One query that reads both KPI tables and the versions, as of one snapshot.
SNAPSHOT = (
    "SELECT table_name, delta_version, "
    "(SELECT list(DISTINCT orders_paid) FROM orders.kpi_window), "
    "(SELECT list(DISTINCT orders_paid) FROM orders.kpi_daily), "
    "(SELECT count(*) FROM orders.kpi_window), (SELECT count(*) FROM orders.kpi_daily) "
    "FROM eos_delta_versions ORDER BY table_name"
)


def _measures(paid: int) -> dict[str, Any]:
    counters = {
        "orders_created": 10 * paid,
        "orders_paid": paid,
        "orders_cancelled": 1,
        "orders_refunded": 0,
        "paid_amount": 10.0 * paid,
        "refunded_amount": 0.0,
    }
    derived = {
        "revenue": 10.0 * paid,
        "average_order_value": 10.0,
        "unique_customers": 3,
        "cancellation_rate": 1 / (10 * paid),
    }
    return {**counters, **derived, "revision": paid, "silver_version": paid}


def write_version(lake: LakeResource, paid: int) -> None:
    """Replace both KPI tables with rows whose ``orders_paid`` is ``paid``."""
    start = datetime(2026, 11, 21, tzinfo=UTC)
    windows = [
        {
            "window_start": start + timedelta(minutes=5 * i),
            "window_end": start + timedelta(minutes=5 * (i + 1)),
            "currency": c,
            **_measures(paid),
        }
        for i in range(WINDOWS)
        for c in CURRENCIES
    ]
    daily = [{"day": DAY, "currency": c, **_measures(paid)} for c in CURRENCIES]
    for key, rows, schema in (
        (KPI_WINDOW, windows, KPI_WINDOW_SCHEMA),
        (KPI_DAILY, daily, KPI_DAILY_SCHEMA),
    ):
        uri = lake.table_uri(*key.path)
        mode = "overwrite" if Path(uri).exists() else "error"
        write_deltalake(uri, pa.Table.from_pylist(rows, schema=schema), mode=mode)


def whole(rows: list[list[Any]]) -> int:
    """The Delta version a snapshot shows, after checking it is one whole version."""
    versions = {r[1] for r in rows}
    assert len(versions) == 1 and len(rows) == 2, rows
    (version,) = versions
    for _, _, window_paid, daily_paid, windows, days in rows:
        assert window_paid == [version + 1] and daily_paid == [version + 1], rows
        assert windows == WINDOWS * len(CURRENCIES) and days == len(CURRENCIES), rows
    return version


def serve(lake: LakeResource, warehouse: Path) -> dg.ExecuteInProcessResult:
    """Materialize serving/kpis with its reconciliation check; both must succeed."""
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [serving_kpi, duckdb_matches_delta],
            resources={"lake": lake, "warehouse": WarehouseResource(path=str(warehouse))},
            instance=instance,
            raise_on_error=False,
        )
    failures = [e.message for e in result.all_events if e.is_failure]
    assert result.success, failures
    (check,) = result.get_asset_check_evaluations()
    assert check.passed, check.metadata
    return result


def current(warehouse: Path) -> int:
    """The version a reader that connects now sees."""
    with warehouse_file.connect_reader(warehouse) as conn:
        return whole([list(r) for r in conn.execute(SNAPSHOT).fetchall()])


class HeldReader:
    """``held_reader`` in a process of its own: one read-only connection, held until close."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eos_assets_tests.support.held_reader", str(path)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._line() == "ready"

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the reader process exited"
        return line.strip()

    def query(self, sql: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(sql + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self._line())
        assert not (isinstance(answer, dict) and "error" in answer), answer
        return answer

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.proc.stdout.close()


@pytest.fixture
def lake(tmp_path: Path) -> LakeResource:
    return LakeResource(root=str(tmp_path / "lake"))


@pytest.fixture
def held(tmp_path: Path, lake: LakeResource) -> Iterator[tuple[Path, HeldReader]]:
    """A served version 0 and a reader process that holds it open."""
    warehouse = tmp_path / "warehouse.duckdb"
    write_version(lake, 1)
    serve(lake, warehouse)
    reader = HeldReader(warehouse)
    try:
        yield warehouse, reader
    finally:
        reader.close()


def test_readers_holding_the_file_never_stop_serving_and_keep_their_version(
    lake: LakeResource, held: tuple[Path, HeldReader]
) -> None:
    warehouse, reader = held
    # Only the versions are read before the runs: the KPI rows are read from the held file
    # after it was replaced.
    assert reader.query("SELECT count(*) FROM eos_delta_versions") == [[2]]
    # A second holder, in this process, the way a notebook opens the file.
    notebook = duckdb.connect(str(warehouse), read_only=True)
    try:
        for paid in (2, 3, 4):
            write_version(lake, paid)
            result = serve(lake, warehouse)
            (served,) = result.asset_materializations_for_node("orders__serving__kpis")
            assert served.metadata["rows_upserted"].value == {
                "orders.kpi_window": WINDOWS * len(CURRENCIES),
                "orders.kpi_daily": len(CURRENCIES),
            }
            assert current(warehouse) == paid - 1  # a new connection sees the new version
            assert whole(reader.query(SNAPSHOT)) == 0  # the held one still sees all of v0
            assert whole([list(r) for r in notebook.execute(SNAPSHOT).fetchall()]) == 0
    finally:
        notebook.close()
    # Reconnecting shows the latest version, in another process as in this one.
    fresh = HeldReader(warehouse)
    try:
        assert whole(fresh.query(SNAPSHOT)) == 3
    finally:
        fresh.close()
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert whole([list(r) for r in conn.execute(SNAPSHOT).fetchall()]) == 3
        keys = conn.execute(
            "SELECT schema_name || '.' || table_name, constraint_type FROM duckdb_constraints() "
            "WHERE constraint_type = 'PRIMARY KEY' ORDER BY ALL"
        ).fetchall()
    assert [k[0] for k in keys] == [
        "main.eos_delta_versions",
        "orders.kpi_daily",
        "orders.kpi_window",
    ]


def _killed_serving_run(lake: LakeResource, warehouse: Path, point: str) -> None:
    """Materialize serving/kpis in a process of its own that SIGKILLs itself at ``point``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOS_FAULT_")}
    env[faults.CRASH_ENV] = point
    cmd = [sys.executable, "-m", "eos_assets_tests.support.derived_once", "--lake", lake.root]
    cmd += ["--warehouse", str(warehouse), "--asset", "orders/serving/kpis"]
    done = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == -signal.SIGKILL, f"did not die at {point}: {done.stderr[-2000:]}"


@pytest.mark.slow  # a process of its own per point, killed: 7-9 s each
@pytest.mark.parametrize("point", serving.CRASH_POINTS)
def test_a_writer_killed_mid_swap_leaves_the_served_version_whole_and_the_next_run_completes_it(
    lake: LakeResource, held: tuple[Path, HeldReader], point: str
) -> None:
    warehouse, reader = held
    write_version(lake, 2)
    before = warehouse.stat().st_ino

    _killed_serving_run(lake, warehouse, point)

    # The served file is the one from before, whole, for new and held readers alike.
    assert warehouse.stat().st_ino == before
    assert current(warehouse) == 0 and whole(reader.query(SNAPSHOT)) == 0
    staged = warehouse_file.next_path(warehouse)
    assert staged.exists(), "the killed writer was building the next version"
    if point == warehouse_file.BEFORE_SWAP:  # the next version was whole, only not swapped in
        with duckdb.connect(str(staged), read_only=True) as conn:
            assert whole([list(r) for r in conn.execute(SNAPSHOT).fetchall()]) == 1

    serve(lake, warehouse)

    assert current(warehouse) == 1 and whole(reader.query(SNAPSHOT)) == 0
    assert not staged.exists()
