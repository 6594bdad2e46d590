"""The incremental checks through Dagster, on tables written by hand: each run starts from the
snapshot the check's latest passing evaluation proved (read back from the instance), and a
violation committed after a clean run fails the next one.

No Spark: bronze is forged with its ingest commits, silver and gold with the columns and
``txn`` records the checks read.
"""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from eos_assets.lib.delta import txn_ids
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.support import orders as checks
from eos_assets_tests.support.forged_log import append, ingest, read, rows
from eos_assets_tests.support.orders import EVENTS, RAW_EVENTS, WINDOW_AGGREGATES

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
SIZE_S = 60
UTC_US = pa.timestamp("us", tz="UTC")


def run(
    check: dg.AssetChecksDefinition, lake: LakeResource, instance: dg.DagsterInstance, full=False
) -> dg.AssetCheckEvaluation:
    """Run ``check`` alone in a job on ``instance``; return its evaluation."""
    (key,) = check.check_keys
    job = dg.define_asset_job("check_job", selection=dg.AssetSelection.checks(key))
    defs = dg.Definitions(asset_checks=[check], jobs=[job], resources={"lake": lake})
    config = {"ops": {check.node_def.name: {"config": {"full": True}}}} if full else None
    result = defs.resolve_job_def("check_job").execute_in_process(
        run_config=config, instance=instance, raise_on_error=False
    )
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def meta(evaluation: dg.AssetCheckEvaluation) -> dict:
    return {k: v.value for k, v in evaluation.metadata.items()}


@pytest.fixture
def lake(tmp_path: Path) -> LakeResource:
    return LakeResource(root=str(tmp_path / "lake"))


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def test_contiguity_starts_from_its_last_pass_and_catches_a_later_duplicate(
    lake: LakeResource, instance: dg.DagsterInstance
) -> None:
    uri = lake.table_uri(*RAW_EVENTS.path)
    ingest(uri, read("t", 0, 0, 4))
    first = run(checks.offsets_contiguous, lake, instance)
    assert first.passed and meta(first)["rows_checked_since_version"] is None
    ingest(uri, read("t", 0, 4, 6))
    second = run(checks.offsets_contiguous, lake, instance)
    assert second.passed, second.description
    assert (meta(second)["rows_checked_since_version"], meta(second)["rows"]) == (0, 2)
    append(uri, rows("t", 0, [1]))  # a copy of a row two passes ago
    third = run(checks.offsets_contiguous, lake, instance)
    assert not third.passed and meta(third)["rows_checked_since_version"] == 1
    assert "range [0, 4) of version 0 committed 4 records, holds 5 rows" in (
        third.description or ""
    )
    # A failed evaluation is no starting point: the next run covers the same part again.
    fourth = run(checks.offsets_contiguous, lake, instance)
    assert not fourth.passed and meta(fourth)["rows_checked_since_version"] == 1
    whole = run(checks.offsets_contiguous, lake, instance, full=True)
    assert not whole.passed and meta(whole)["rows_checked_since_version"] is None
    assert "t[0] offset 1 x2" in (whole.description or "")


def silver_rows(*events: tuple[str, int, str, str, float]) -> pa.Table:
    """Silver rows ``(event_id, seconds after T0, order_id, customer_id, amount)``."""
    return pa.table(
        {
            "event_id": [e[0] for e in events],
            "event_time": pa.array([T0 + timedelta(seconds=e[1]) for e in events], UTC_US),
            "event_type": ["order_paid"] * len(events),
            "currency": ["EUR"] * len(events),
            "order_id": [e[2] for e in events],
            "customer_id": [e[3] for e in events],
            "amount": [e[4] for e in events],
        }
    )


def window_rows(silver: pa.Table, watermark_us: int) -> pa.Table:
    """The gold rows silver gives, as the window step would (every window, final or not)."""
    con = duckdb.connect()
    con.register("silver", silver)
    size_us = SIZE_S * 1_000_000
    return con.sql(
        f"""
        SELECT make_timestamptz(w * {size_us}) AS window_start,
               make_timestamptz((w + 1) * {size_us}) AS window_end,
               event_type, currency, count(*) AS event_count,
               count(DISTINCT order_id) AS distinct_orders,
               count(DISTINCT customer_id) AS distinct_customers, sum(amount) AS amount_sum
        FROM (SELECT *, floor(epoch_us(event_time) / {size_us})::BIGINT AS w FROM silver)
        GROUP BY ALL ORDER BY ALL
        """
    ).to_arrow_table()


def commit_gold(lake: LakeResource, silver_version: int, watermark_s: int) -> None:
    """Append the gold rows of the windows gold lacks, from the whole of silver at
    ``silver_version``, with the ``txn`` records."""
    silver = DeltaTable(lake.table_uri(*EVENTS.path), version=silver_version).to_pyarrow_table()
    watermark_us = int((T0 + timedelta(seconds=watermark_s)).timestamp() * 1_000_000)
    props = CommitProperties(
        app_transactions=[
            Transaction(txn_ids.FROM_SILVER, silver_version),
            Transaction(txn_ids.WATERMARK, watermark_us),
            Transaction(txn_ids.WINDOW_SIZE, SIZE_S),
        ]
    )
    gold = window_rows(silver, watermark_us)
    uri = lake.table_uri(*WINDOW_AGGREGATES.path)
    if DeltaTable.is_deltatable(uri):
        have = set(DeltaTable(uri).to_pyarrow_table()["window_start"].to_pylist())
        gold = gold.filter(pa.array([w not in have for w in gold["window_start"].to_pylist()]))
    write_deltalake(uri, gold, mode="append", commit_properties=props)


def add_silver(lake: LakeResource, table: pa.Table) -> int:
    uri = lake.table_uri(*EVENTS.path)
    write_deltalake(uri, table, mode="append")
    return DeltaTable(uri).version()


def test_windows_compare_what_changed_since_the_last_pass_and_catch_a_late_change(
    lake: LakeResource, instance: dg.DagsterInstance
) -> None:
    v0 = add_silver(lake, silver_rows(("a", 10, "o1", "c1", 1.0), ("b", 70, "o2", "c1", 2.0)))
    commit_gold(lake, v0, 120)  # windows 10:00 and 10:01 final
    first = run(checks.final_windows_match_silver, lake, instance)
    assert first.passed, first.description
    assert (meta(first)["final_windows"], meta(first)["since_gold_version"]) == (2, None)

    v1 = add_silver(lake, silver_rows(("c", 130, "o3", "c2", 3.0), ("d", 200, "o4", "c2", 4.0)))
    commit_gold(lake, v1, 240)  # 10:02 and 10:03 become final
    second = run(checks.final_windows_match_silver, lake, instance)
    assert second.passed, second.description
    assert (meta(second)["final_windows"], meta(second)["since_gold_version"]) == (2, 0)

    # A late silver row in a window proven two passes ago, that gold never counted.
    v2 = add_silver(lake, silver_rows(("e", 15, "o5", "c3", 5.0)))
    gold_uri = lake.table_uri(*WINDOW_AGGREGATES.path)
    watermark = DeltaTable(gold_uri).transaction_version(txn_ids.WATERMARK)
    props = CommitProperties(
        app_transactions=[
            Transaction(txn_ids.FROM_SILVER, v2),
            Transaction(txn_ids.WATERMARK, watermark or 0),
            Transaction(txn_ids.WINDOW_SIZE, SIZE_S),
        ]
    )
    gold = DeltaTable(gold_uri).to_pyarrow_table().slice(0, 0)
    write_deltalake(gold_uri, gold, mode="append", commit_properties=props)
    third = run(checks.final_windows_match_silver, lake, instance)
    assert not third.passed and meta(third)["since_gold_version"] == 1
    assert "window 2026-11-21 10:00:00+00:00 order_paid/EUR: event_count 1 vs silver 2" in (
        third.description or ""
    )


def test_windows_catch_an_altered_total_of_a_window_proven_before(
    lake: LakeResource, instance: dg.DagsterInstance
) -> None:
    v0 = add_silver(lake, silver_rows(("a", 10, "o1", "c1", 1.0), ("b", 70, "o2", "c1", 2.0)))
    commit_gold(lake, v0, 120)
    assert run(checks.final_windows_match_silver, lake, instance).passed
    gold_uri = lake.table_uri(*WINDOW_AGGREGATES.path)
    DeltaTable(gold_uri).update(
        updates={"amount_sum": "amount_sum + 1"},
        predicate=f"window_start = '{(T0 + timedelta(minutes=1)).isoformat()}'",
    )
    after = run(checks.final_windows_match_silver, lake, instance)
    assert not after.passed and meta(after)["since_gold_version"] == 0
    assert meta(after)["final_windows"] == 1  # the rewritten file's other window is unchanged
    assert "amount_sum 3.0 vs silver 2.0" in (after.description or "")


def test_event_ids_added_after_a_pass_are_checked_against_the_proven_ones(
    lake: LakeResource, instance: dg.DagsterInstance
) -> None:
    add_silver(lake, silver_rows(("a", 10, "o1", "c1", 1.0), ("b", 70, "o2", "c1", 2.0)))
    first = run(checks.event_id_unique, lake, instance)
    assert first.passed and "rows_checked_since_version" not in meta(first)
    add_silver(lake, silver_rows(("c", 130, "o3", "c2", 3.0)))
    second = run(checks.event_id_unique, lake, instance)
    assert second.passed, second.description
    assert (meta(second)["rows_checked_since_version"], meta(second)["rows_added"]) == (0, 1)
    add_silver(lake, silver_rows(("a", 140, "o1", "c1", 1.0)))  # "a" was proven two passes ago
    third = run(checks.event_id_unique, lake, instance)
    assert not third.passed
    assert "event_id a x2" in (third.description or "")


def test_a_gold_row_that_becomes_final_by_its_own_window_end_is_compared(
    lake: LakeResource, instance: dg.DagsterInstance
) -> None:
    v0 = add_silver(lake, silver_rows(("a", 10, "o1", "c1", 1.0), ("b", 70, "o2", "c1", 2.0)))
    commit_gold(lake, v0, 120)
    gold_uri = lake.table_uri(*WINDOW_AGGREGATES.path)
    row = DeltaTable(gold_uri).to_pyarrow_table().slice(0, 1).to_pylist()[0]
    # A row of window 10:00 whose window_end says 10:03: not final at 10:02, final at 10:04.
    row.update(currency="USD", window_end=T0 + timedelta(minutes=3))
    schema = DeltaTable(gold_uri).to_pyarrow_table().schema
    write_deltalake(gold_uri, pa.Table.from_pylist([row], schema), mode="append")
    first = run(checks.final_windows_match_silver, lake, instance)
    assert first.passed, first.description
    v1 = add_silver(lake, silver_rows(("c", 130, "o3", "c2", 3.0), ("d", 200, "o4", "c2", 4.0)))
    commit_gold(lake, v1, 240)
    second = run(checks.final_windows_match_silver, lake, instance)
    assert not second.passed and meta(second)["since_gold_version"] == 1
    assert "window 2026-11-21 10:00:00+00:00 order_paid/USD: event_count 1 vs silver None" in (
        second.description or ""
    )
