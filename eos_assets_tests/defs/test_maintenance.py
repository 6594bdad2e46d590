"""The daily maintenance job: compaction, orphan removal and checkpoints change no row, and the
incremental assets downstream neither re-read compacted rows nor miss new ones."""

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
from deltalake import DeltaTable

from eos_assets.lib.delta import delta_io
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.support import graph
from eos_assets_tests.support.graph_run import OrdersGraph
from eos_assets_tests.support.oracle import expected
from eos_assets_tests.support.orders import EVENTS, RAW_EVENTS, TABLES, maintenance_job

START = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
WINDOW, GRACE = timedelta(minutes=5), timedelta(minutes=10)


def snapshot(lake: LakeResource) -> dict[str, list[Any]]:
    """Every table's rows, sorted, as plain values."""
    out = {}
    for key in TABLES:
        t = delta_io.read_arrow(lake.table_uri(*key.path))
        out[key.to_user_string()] = sorted(map(repr, t.to_pylist()))
    return out


def test_maintenance_compacts_vacuums_checkpoints_and_loses_nothing(
    orders_graph: OrdersGraph,
) -> None:
    config = graph.window_config(WINDOW.total_seconds() / 60, GRACE.total_seconds() / 60)
    lake = LakeResource(root=orders_graph.lake_root)
    mix = {"duplicate_ratio": 0.05, "abort_ratio": 0.1, "malformed_ratio": 0.02}
    batches: list[list[dict[str, Any]]] = []
    for number in range(3):
        start = START + timedelta(seconds=120 * number)
        batches.append(
            orders_graph.send(
                f"batch-{number}", count=600, seed=40 + number, start_time=start,
                transaction_size=100, partitions=3, **mix,
            )
        )  # fmt: skip
        orders_graph.materialize(graph.ALL, config)

    bronze_uri = lake.table_uri(*RAW_EVENTS.path)
    files_before = len(DeltaTable(bronze_uri).file_uris())
    old_orphan = Path(bronze_uri) / "part-orphan-old.snappy.parquet"
    young_orphan = Path(bronze_uri) / "part-orphan-young.snappy.parquet"
    for orphan in (old_orphan, young_orphan):
        orphan.write_bytes(b"left by a crashed writer")
    two_hours_ago = time.time() - 7200
    os.utime(old_orphan, (two_hours_ago, two_hours_ago))
    before = snapshot(lake)

    result = maintenance_job.execute_in_process(
        run_config={"ops": {"maintain_tables": {"config": {"orphan_hours": 1}}}},
        resources={"lake": lake},
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    assert snapshot(lake) == before
    assert len(DeltaTable(bronze_uri).file_uris()) < files_before
    assert not old_orphan.exists() and young_orphan.exists()
    for key in TABLES:
        log = Path(lake.table_uri(*key.path)) / "_delta_log"
        assert list(log.glob("*.checkpoint.parquet")), f"{key.to_user_string()} has no checkpoint"

    # Downstream keeps going from the compacted tables: compacted rows are not fed again.
    orders_graph.materialize(graph.ALL, config)
    assert snapshot(lake) == before
    start = START + timedelta(seconds=400)
    batches.append(
        orders_graph.send(
            "batch-after", count=400, seed=49, start_time=start, transaction_size=100, partitions=3
        )
    )
    orders_graph.materialize(graph.ALL, config)
    # The oracle numbers bronze versions by batch; maintenance commits shift them, so compare
    # what does not depend on version numbers: bronze records and silver's events, each once.
    committed = {
        (r["partition"], r["offset"]) for b in batches for r in b if r["status"] == "committed"
    }
    bronze = delta_io.read_arrow(bronze_uri, columns=["partition", "offset"]).to_pylist()
    assert (
        len(bronze) == len(committed)
        and {(r["partition"], r["offset"]) for r in bronze} == committed
    )
    silver = delta_io.read_arrow(lake.table_uri(*EVENTS.path), columns=["event_id"])
    ids = silver["event_id"].to_pylist()
    assert len(ids) == len(set(ids))
    assert set(ids) == set(expected(batches, WINDOW, GRACE).events)
