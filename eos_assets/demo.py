"""`eos-assets demo`: embedded broker, a demo stream, the asset graph through Dagster, a summary."""

import base64
import json
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit import broker
from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets.lib import warehouse_file
from eos_assets.lib.errors import EosError
from eos_assets.settings import Settings


@dataclass(frozen=True)
class DemoOptions:
    """Size and shape of the demo stream."""

    count: int = 20_000
    partitions: int = 6
    seed: int | None = None


def run_demo(options: DemoOptions) -> str:
    """Produce a demo stream, materialize every asset through Dagster and return the summary."""
    began = time.monotonic()
    settings = Settings.from_env()
    state_dir = Path(settings.state_dir)
    if settings.kafka_bootstrap is None:
        info = broker.up(state_dir)
        bootstrap = info.bootstrap
        where = f"embedded broker at {bootstrap} (stop it with `eos-assets broker down`)"
    else:
        bootstrap = settings.kafka_bootstrap
        broker.check_reachable(bootstrap, dict(settings.kafka_client))
        where = f"Kafka at {bootstrap}"
    topic = settings.topics[0]
    manifest = state_dir / "manifests" / f"demo-{int(time.time())}.jsonl"
    clock = state_dir / "demo_clock.txt"
    produced = produce(
        bootstrap,
        ProduceOptions(
            topic=topic,
            count=options.count,
            partitions=options.partitions,
            seed=options.seed,
            duplicate_ratio=0.02,
            late_ratio=0.01,
            abort_ratio=0.05,
            malformed_ratio=0.01,
            start_time=_continue_clock(clock),
        ),
        manifest,
        client_config=dict(settings.kafka_client),
    )
    _save_clock(clock, manifest)
    produce_s = time.monotonic() - began

    from eos_assets.definitions import defs

    instance = dg.DagsterInstance.get()
    job = defs.resolve_job_def("materialize_all")
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    result = job.execute_in_process(run_config=quiet, instance=instance, raise_on_error=False)
    if not result.success:
        failure = next((e for e in result.all_events if e.is_failure), None)
        message = failure.message if failure is not None else "see the run in `make ui`"
        raise EosError(f"the demo run {result.run_id} failed: {message}")
    meta = _bronze_metadata(result)
    lines = [
        f"eos_assets demo: {where}, topic {topic!r}",
        f"  produced: {produced.committed} committed and {produced.aborted} aborted records "
        f"in {produce_s:.1f}s (manifest {manifest})",
        f"  run {result.run_id} (Dagster instance {instance.root_directory})",
        "  bronze/raw_events per partition (records, malformed, offsets):",
    ]
    for r in meta["ranges"]:
        expected = produced.committed_by_partition.get(r["partition"], 0)
        lines.append(
            f"    {r['topic']}[{r['partition']}]: {r['records']:>7} records "
            f"(producer committed {expected}), {r['malformed']:>4} malformed, "
            f"offsets [{r['start']}, {r['end']})"
        )
    lines.append(
        f"  total: {meta['records']} records, {meta['malformed']} malformed, "
        f"Delta version {meta['delta_version']}, ingest {meta['seconds'].get('total', 0):.1f}s"
    )
    lines.extend(_derived_lines(result))
    lines.extend(_kpi_lines(settings.warehouse))
    lines.append(
        "  seconds per step: " + ", ".join(f"{k} {v:.1f}" for k, v in _step_seconds(result))
    )
    lines.append(f"  demo wall time: {time.monotonic() - began:.1f}s")
    lines.extend(_next_steps(settings.warehouse))
    return "\n".join(lines)


def query_command(warehouse: str) -> str:
    """A shell command that prints the daily KPIs from the serving database, read-only."""
    python = Path(sys.executable)
    if python.is_relative_to(Path.cwd()):
        python = python.relative_to(Path.cwd())
    return (
        f'{python} -c "import duckdb; print(duckdb.connect('
        f"'{warehouse}', read_only=True).sql('FROM kpi_daily ORDER BY day, currency'))\""
    )


def _next_steps(warehouse: str) -> list[str]:
    return [
        "",
        "Query the KPIs (read-only: safe while the pipeline runs; reconnect to see new data):",
        f"  {query_command(warehouse)}",
        "Next: `make ui` (Dagster on http://127.0.0.1:3000): the lag sensor ingests and serves "
        "whatever `eos-assets produce` sends next.",
    ]


def _continue_clock(clock: Path) -> datetime:
    """Event time to start at: now, or later if an earlier demo's events reached further.

    The demo's event clock runs faster than real time; a second demo starting at "now" would
    fall behind the first one's watermark and every event would count as late.
    """
    now = datetime.now(UTC)
    if not clock.exists():
        return now
    return max(now, datetime.fromisoformat(clock.read_text().strip()))


def _save_clock(clock: Path, manifest: Path) -> None:
    """Remember the latest event time this demo committed."""
    latest: datetime | None = None
    for record in read_manifest(manifest):
        if record["status"] != "committed" or record["malformed"] is not None:
            continue
        value = json.loads(base64.b64decode(record["value_b64"]))
        stamp = datetime.fromisoformat(value["event_time"].replace("Z", "+00:00"))
        latest = stamp if latest is None or stamp > latest else latest
    if latest is not None:
        clock.write_text(latest.isoformat())


def _step_seconds(result: dg.ExecuteInProcessResult) -> list[tuple[str, float]]:
    """Wall time of each step (asset) of the run, in the order they finished."""
    return [
        (e.step_key or "?", getattr(e.event_specific_data, "duration_ms", 0.0) / 1000)
        for e in result.all_events
        if e.event_type_value == "STEP_SUCCESS"
    ]


def _metadata(result: dg.ExecuteInProcessResult, node: str, key: dg.AssetKey) -> dict:
    for mat in result.asset_materializations_for_node(node):
        if mat.asset_key == key:
            return {k: v.value for k, v in mat.metadata.items()}
    raise EosError(f"the demo run did not materialize {key.to_user_string()}")


def _derived_lines(result: dg.ExecuteInProcessResult) -> list[str]:
    """One line per silver and gold table: what this run added."""
    events = _metadata(result, "orders__silver__events", ORDERS.events)
    state = _metadata(result, "orders__silver__entity_state", ORDERS.entity_state)
    windows = _metadata(result, "orders__gold__window_aggregates", ORDERS.window_aggregates)
    return [
        f"  silver/events: {events['rows_inserted']} events inserted, "
        f"{events['duplicates_in_batch'] + events['duplicates_already_in_silver']} duplicates "
        f"and {events['malformed_excluded']} malformed records left out",
        f"  silver/order_state: {state['entities_touched']} orders touched",
        f"  gold/window_aggregates: {windows['windows_recomputed']} windows computed, "
        f"{windows['late_events']} late events recorded in gold/late_events, "
        f"watermark {windows['watermark']}",
    ]


def _kpi_lines(warehouse: str) -> list[str]:
    """The daily KPI table as served from DuckDB, and the Delta versions it reflects."""
    with warehouse_file.connect_reader(warehouse) as conn:
        rows = conn.execute(
            "SELECT day, currency, orders_created, orders_paid, orders_cancelled, revenue, "
            "average_order_value, unique_customers, cancellation_rate "
            "FROM kpi_daily ORDER BY day, currency"
        ).fetchall()
        versions = conn.execute(
            "SELECT table_name, delta_version FROM eos_delta_versions ORDER BY table_name"
        ).fetchall()
    header = (
        f"    {'day':<10} {'cur':<4} {'created':>8} {'paid':>6} {'cancelled':>9} "
        f"{'revenue':>12} {'AOV':>8} {'customers':>9} {'cancel %':>8}"
    )
    lines = [f"  KPIs per day from DuckDB ({warehouse}):", header]
    for day, cur, created, paid, cancelled, revenue, aov, customers, rate in rows:
        lines.append(
            f"    {day!s:<10} {cur:<4} {created:>8} {paid:>6} {cancelled:>9} {revenue:>12,.2f} "
            f"{aov or 0:>8.2f} {customers:>9} {100 * (rate or 0):>7.1f}%"
        )
    lines.append("    reflects Delta " + ", ".join(f"gold/{t} v{v}" for t, v in versions))
    return lines


def _bronze_metadata(result: dg.ExecuteInProcessResult) -> dict:
    for mat in result.asset_materializations_for_node("orders__bronze__raw_events"):
        if mat.asset_key == ORDERS.raw_events:
            return {k: v.value for k, v in mat.metadata.items()}
    raise EosError("the demo run did not materialize bronze/raw_events")
