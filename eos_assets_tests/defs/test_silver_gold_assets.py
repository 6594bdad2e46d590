"""The whole graph, bronze to the DuckDB KPI tables, against an oracle built from the manifests.

Three batches go through the product producer, the graph is materialized after each, and every
derived table is compared exactly with what ``oracle.py`` computes from the manifests alone:
duplicates inside a batch and across batches (a restarted producer re-sending a whole earlier
stream), late events beyond the grace period, aborted transactions and malformed records,
event dates on both sides of midnight. Materializing again changes no Delta version.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

from eos_assets_tests.support import graph
from eos_assets_tests.support.graph_run import OrdersGraph
from eos_assets_tests.support.oracle import expected

START = datetime(2026, 11, 21, 23, 57, tzinfo=UTC)  # the stream crosses midnight
WINDOW, GRACE = timedelta(minutes=1), timedelta(minutes=1)


def test_graph_matches_the_oracle_over_batches_and_is_idempotent(
    orders_graph: OrdersGraph,
) -> None:
    lake_root, warehouse = orders_graph.lake_root, orders_graph.warehouse
    config = graph.window_config(WINDOW.total_seconds() / 60, GRACE.total_seconds() / 60)
    mix: dict[str, Any] = {
        "duplicate_ratio": 0.05,
        "late_ratio": 0.04,
        "abort_ratio": 0.15,
        "malformed_ratio": 0.03,
        "transaction_size": 100,
        "partitions": 3,
    }
    # Each inner list reaches bronze in one version (one materialization per list); each item
    # is one run of the producer.
    plans: list[list[dict[str, Any]]] = [
        [{"count": 1200, "seed": 11, "start_time": START}],
        [{"count": 1200, "seed": 12, "start_time": START + timedelta(seconds=200),
          "late_by": timedelta(minutes=4)}],
        [
            # A producer restarted without its state re-sends the start of the first stream:
            # the same event ids and bytes under a new producer id, invisible to Kafka.
            {"count": 500, "seed": 11, "start_time": START},
            {"count": 800, "seed": 13, "start_time": START + timedelta(seconds=420),
             "late_by": timedelta(minutes=5)},
        ],
    ]  # fmt: skip
    batches: list[list[dict[str, Any]]] = []
    results = []
    want = expected(batches, WINDOW, GRACE)
    for number, runs in enumerate(plans):
        batches.append([])
        for part, options in enumerate(runs):
            batches[-1].extend(orders_graph.send(f"batch-{number}-{part}", **options, **mix))
        results.append(orders_graph.materialize(graph.ALL, config))
        want = expected(batches, WINDOW, GRACE)
        graph.assert_matches_oracle(lake_root, want, warehouse)

    assert len(want.late_events) > 10, "the scenario must produce late events"
    assert any(w["revision"] > 1 and w["late_events"] for w in want.windows.values())
    assert len({d for d, _ in want.kpi_daily}) == 2, "the scenario must cross midnight"
    committed = [line for b in batches for line in b if line["status"] == "committed"]
    assert sum(1 for line in committed if line["kind"] == "malformed") > 10
    assert any(line["status"] == "aborted" for b in batches for line in b)
    # The restarted producer's events were already in silver; the late ones were counted.
    resent = {
        line["event_id"]
        for line in batches[2]
        if line["status"] == "committed" and line["kind"] != "malformed"
    }
    known = sum(1 for e in resent if want.events[e].batch < 2)
    assert known > 200
    assert _metadata(results[2], "orders__silver__events")["duplicates_already_in_silver"] == known
    assert _metadata(results[1], "orders__gold__window_aggregates")["late_events"] > 0

    before = graph.versions(lake_root)
    result = orders_graph.materialize(graph.DERIVED, config)
    assert graph.versions(lake_root) == before
    graph.assert_matches_oracle(lake_root, want, warehouse)
    silver = _metadata(result, "orders__silver__events")
    assert silver["delta_version"] is None and silver["rows_inserted"] == 0
    assert _metadata(result, "orders__serving__kpis")["rows_upserted"] == {}


def _metadata(result: Any, node: str) -> dict[str, Any]:
    (mat, *_) = result.asset_materializations_for_node(node)
    return {k: v.value for k, v in mat.metadata.items()}
