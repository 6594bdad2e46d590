"""Measure the work of one incremental run of every derived table against the table's size.

``python -m eos_assets_tests.support.measure_increments --bootstrap HOST:PORT`` produces one stream
per size in ``--existing`` (default 50000 and 200000, one lake each), builds every derived table
from the first ``existing`` offsets, then runs them over the next ``--batch`` (10000) and prints
what that run read and how long it took. Not a test: timings vary with the machine, so
nothing here asserts on them.
"""

import argparse
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit.producer import ProduceOptions, produce
from eos_assets.lib.derived import entity_state, silver_events, window_aggregates, windows
from eos_assets.lib.derived.kpi_tables import KpiTable, update_kpis
from eos_assets.lib.ingest.ingest import IngestOptions, ingest_bronze
from eos_assets.lib.spark.spark_env import spark_config, use_this_python
from eos_assets_tests.support.graph import ORDERS_ENTITY

START = datetime(2026, 11, 21, 0, 0, tzinfo=UTC)
MIX: dict[str, Any] = {"duplicate_ratio": 0.02, "late_ratio": 0.01, "malformed_ratio": 0.01}


def derived(spark: SparkSession, root: Path) -> dict[str, tuple[float, dict[str, int]]]:
    """Run every derived table once; per table: seconds and what it read or wrote."""
    uri = {n: str(root / n) for n in ("bronze/raw_events", "silver/events")}
    out: dict[str, tuple[float, dict[str, int]]] = {}
    began = time.monotonic()
    ev = silver_events.update_events(
        spark, ORDERS.contract, uri["bronze/raw_events"], uri["silver/events"]
    )
    out["silver/events"] = (
        time.monotonic() - began,
        {
            "new rows": ev.bronze_rows,
            "inserted": ev.inserted,
            "silver rows read for dedup": ev.existing_rows_read,
        },
    )
    began = time.monotonic()
    st = entity_state.update_entity_state(
        spark, ORDERS_ENTITY, uri["silver/events"], str(root / "silver/order_state")
    )
    out["silver/order_state"] = (
        time.monotonic() - began,
        {
            "orders touched": st.entities_touched,
            "files rewritten": st.files_rewritten,
            "rows copied by merge": st.rows_copied,
        },
    )
    began = time.monotonic()
    wi = window_aggregates.update_windows(
        spark,
        ORDERS.windows,
        ORDERS.contract,
        uri["silver/events"],
        str(root / "gold/window_aggregates"),
        str(root / "gold/late_events"),
        windows.WindowSpec(),
    )
    out["gold/window_aggregates"] = (
        time.monotonic() - began,
        {
            "windows recomputed": wi.windows_recomputed,
            "silver rows read": wi.silver_rows_read,
            "late events": wi.late_events,
        },
    )
    began = time.monotonic()
    tables = [
        KpiTable(spec, str(root / "gold" / spec.name), str(root / "gold" / f"{spec.name}_distinct"))
        for spec in ORDERS.kpi_specs
    ]
    kpis = update_kpis(
        spark, tables, ORDERS.contract, uri["silver/events"], grace=ORDERS.window.grace
    )
    out["gold/<kpi> (" + ", ".join(kpis) + ")"] = (
        time.monotonic() - began,
        {
            "rows upserted": sum(k.rows_written for k in kpis.values()),
            "new distinct values": sum(k.new_distinct for k in kpis.values()),
            "distinct rows read": sum(k.distinct_rows_read for k in kpis.values()),
        },
    )
    return out


def scenario(spark: SparkSession, bootstrap: str, existing: int, batch: int, seed: int) -> dict:
    """One stream of ``existing + batch`` events: build the tables from the first ``existing``
    offsets, then measure the run over the rest (late events reach 30 minutes back)."""
    root = Path(tempfile.mkdtemp(prefix=f"eos-measure-{existing}-"))
    topic = f"measure-{existing}-{uuid.uuid4().hex[:6]}"
    bronze = str(root / "bronze/raw_events")
    options = ProduceOptions(
        topic=topic,
        count=existing + batch,
        seed=seed,
        start_time=START,
        partitions=6,
        transaction_size=1000,
        late_by=timedelta(minutes=30),
        **MIX,
    )
    produce(bootstrap, options, root / "manifest.jsonl")
    config = {"bootstrap.servers": bootstrap}
    ingest_bronze(
        spark,
        bronze,
        [topic],
        config,
        IngestOptions(max_records=existing),
        contract=ORDERS.contract,
    )
    derived(spark, root)
    ingest_bronze(spark, bronze, [topic], config, contract=ORDERS.contract)
    return derived(spark, root)


def main() -> None:
    """Print one line per derived table and scenario."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--existing", type=int, action="append")
    parser.add_argument("--batch", type=int, default=10_000)
    args = parser.parse_args()
    use_this_python()
    builder = SparkSession.builder
    for key, value in spark_config("local[2]", app_name="eos_measure").items():
        builder = builder.config(key, value)
    spark = builder.config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    sizes = args.existing or [50_000, 200_000]
    scenario(spark, args.bootstrap, 5_000, 1_000, seed=1)  # warm the JVM up
    results = {
        n: scenario(spark, args.bootstrap, n, args.batch, seed=100 + i) for i, n in enumerate(sizes)
    }
    print(f"batch of {args.batch} events on top of " + " vs ".join(map(str, sizes)))
    for table in results[sizes[0]]:
        cells = []
        for n in sizes:
            seconds, counts = results[n][table]
            cells.append(f"{seconds:5.2f}s " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        print(f"{table:<24} " + "  |  ".join(cells))
    spark.stop()


if __name__ == "__main__":
    main()
