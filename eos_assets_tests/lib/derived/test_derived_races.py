"""Two runs of the same derived table racing: one commits, the other re-plans and adds nothing.

The second run is started from inside the first one's fault point, after the first planned
and computed and before it commits: the first one's commit, made from the snapshot it planned
on, must then fail with CommitFailedError (the concurrent ``txn``) and re-plan.
"""

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.lib import faults
from eos_assets.lib.contract.schema import to_bronze_table
from eos_assets.lib.delta.delta_io import read_rows
from eos_assets.lib.derived import entity_state, silver_events
from eos_assets_tests.support.graph import ORDERS_ENTITY


def _value(n: int) -> bytes:
    return json.dumps(
        {
            "event_id": f"e-{n}",
            "event_type": "order_created" if n % 3 else "order_paid",
            "order_id": f"o-{n // 3}",
            "customer_id": f"c-{n % 5}",
            "amount": 10.0 + n,
            "currency": "EUR",
            "event_time": f"2026-11-21T10:{n % 60:02d}:00.000Z",
            "schema_version": 1,
        }
    ).encode()


@pytest.fixture
def lake(tmp_path: Path) -> dict[str, str]:
    """A bronze table with 30 events, 10 duplicates of them and 3 malformed records."""
    uri = {n: str(tmp_path / n) for n in ("bronze", "silver", "state")}
    values = [_value(n) for n in range(30)] + [_value(n) for n in range(10)] + [b"{"] * 3
    tables = []
    for partition in (0, 1):
        mine = values[partition::2]
        offsets = list(range(len(mine)))
        keys: list[bytes | None] = [None] * len(mine)
        tables.append(
            to_bronze_table(
                ORDERS.contract, "orders", partition, offsets, [0] * len(mine), keys, list(mine)
            )
        )
    write_deltalake(uri["bronze"], pa.concat_tables(tables))
    return uri


def _race(monkeypatch: pytest.MonkeyPatch, point: str, rival) -> list:
    """At ``point`` (first time only), run ``rival`` to completion; its outcome goes in the list."""
    outcomes: list = []

    def reached(name: str, pid: int | None = None) -> None:
        if name == point and not outcomes:
            outcomes.append("running")
            outcomes[0] = rival()

    monkeypatch.setattr(faults, "crash_point", reached)
    return outcomes


def test_racing_silver_runs_insert_each_event_once(
    spark: SparkSession, lake: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def run() -> silver_events.EventsOutcome:
        return silver_events.update_events(spark, ORDERS.contract, lake["bronze"], lake["silver"])

    rival = _race(monkeypatch, silver_events.AFTER_FILES, run)
    first = run()
    assert rival[0].version == 1 and rival[0].inserted == 30
    assert first.attempts == 2 and first.version is None and first.inserted == 0
    rows = read_rows(
        DeltaTable(lake["silver"]), silver_events.events_schema(ORDERS.contract)
    ).to_pylist()
    assert sorted(r["event_id"] for r in rows) == sorted(f"e-{n}" for n in range(30))
    assert DeltaTable(lake["silver"]).version() == 1


def test_racing_order_state_merges_fold_each_event_once(
    spark: SparkSession, lake: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    silver_events.update_events(spark, ORDERS.contract, lake["bronze"], lake["silver"])

    def run() -> entity_state.EntityStateOutcome:
        return entity_state.update_entity_state(spark, ORDERS_ENTITY, lake["silver"], lake["state"])

    rival = _race(monkeypatch, entity_state.BEFORE_MERGE, run)
    first = run()
    assert rival[0].version == 1 and first.attempts == 2 and first.version is None
    rows = read_rows(DeltaTable(lake["state"]), ORDERS_ENTITY.schema).to_pylist()
    assert sum(r["event_count"] for r in rows) == 30 and len(rows) == 10
