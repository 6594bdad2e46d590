"""`eos-assets demo`: embedded broker, a demo stream, the asset graph through Dagster, a summary."""

import base64
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from eos_assets import examples, streams
from eos_assets.components import builtin
from eos_assets.declaration import StreamModel, read_declaration
from eos_assets.defs.stream import Stream
from eos_assets.demo_options import DemoOptions
from eos_assets.devkit import broker
from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets.instance import ensure_instance_config
from eos_assets.lib.errors import ConfigError, EosError
from eos_assets.lib.serving import serving, warehouse_file
from eos_assets.settings import Settings

# How many of the epoch units make a second, by event-time format (ISO strings: none).
_EPOCH_UNITS = {"epoch_millis": 1000, "epoch_seconds": 1}
_SHOWN = 8  # rows of each declared KPI table printed


def run_demo(options: DemoOptions) -> str:
    """Produce a demo stream, materialize every asset through Dagster and return the summary."""
    began = time.monotonic()
    settings = Settings.from_env()
    state_dir = Path(settings.state_dir)
    bootstrap, where = demo_broker(settings)
    model, defs = stream_definitions(options.stream, settings)
    stream = Stream.of(model)
    topic = settings.topics[0] if settings.topics_from_env else stream.topics[0]
    manifest = state_dir / "manifests" / f"demo-{int(time.time())}.jsonl"
    clock = state_dir / "demo_clock.txt"
    # The producer alone: the broker's start and the definitions' loading are not in it.
    producing = time.monotonic()
    produced = produce(
        bootstrap,
        demo_records(options, topic, clock, options.count),
        manifest,
        client_config=dict(settings.kafka_client),
    )
    produce_s = time.monotonic() - producing
    save_clock(clock, manifest, model)

    ensure_instance_config()
    instance = dg.DagsterInstance.get()
    job = defs.resolve_job_def(f"demo_{stream.name}")
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    result = job.execute_in_process(run_config=quiet, instance=instance, raise_on_error=False)
    if not result.success:
        failure = next((e for e in result.all_events if e.is_failure), None)
        message = failure.message if failure is not None else "see the run in `make ui`"
        raise EosError(f"the demo run {result.run_id} failed: {message}")
    meta = _metadata(result, stream.raw_events)
    lines = [
        f"eos_assets demo: stream {stream.name}, {where}, topic {topic!r}",
        f"  produced: {produced.committed} committed and {produced.aborted} aborted records "
        f"in {produce_s:.1f}s (manifest {manifest})",
        f"  run {result.run_id} (Dagster instance {instance.root_directory})",
        f"  {stream.raw_events.to_user_string()} per partition (records, malformed, offsets):",
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
    lines.extend(_derived_lines(result, stream))
    lines.extend(kpi_lines(settings.warehouse, stream))
    lines.append(
        "  seconds per step: " + ", ".join(f"{k} {v:.1f}" for k, v in _step_seconds(result))
    )
    lines.append(f"  demo wall time: {time.monotonic() - began:.1f}s")
    lines.extend(_next_steps(settings.warehouse, stream))
    return "\n".join(lines)


def demo_records(
    options: DemoOptions, topic: str, clock: Path, count: int, rate: float = 0.0
) -> ProduceOptions:
    """What the demo's producer sends: ``count`` records of its mix (re-sent, late, aborted
    and malformed ones), from where the last demo's event clock stopped; ``rate`` paces it."""
    return ProduceOptions(
        stream=options.stream,
        topic=topic,
        count=count,
        partitions=options.partitions,
        seed=options.seed,
        rate=rate,
        duplicate_ratio=0.02,
        late_ratio=0.01,
        abort_ratio=0.05,
        malformed_ratio=0.01,
        start_time=continue_clock(clock),
    )


def demo_broker(settings: Settings) -> tuple[str, str]:
    """The broker of the demo: ``EOS_KAFKA_BOOTSTRAP``'s, or the embedded one, started when it
    is not running; its address and how the summary names it.

    Raises:
        BrokerError: the configured broker does not answer (one line).
    """
    if settings.kafka_bootstrap is None:
        bootstrap = broker.up(Path(settings.state_dir)).bootstrap
        return bootstrap, f"embedded broker at {bootstrap} (stop it with `eos-assets broker down`)"
    broker.check_reachable(settings.kafka_bootstrap, dict(settings.kafka_client))
    return settings.kafka_bootstrap, f"Kafka at {settings.kafka_bootstrap}"


def query_command(warehouse: str, sql: str) -> str:
    """A shell command that prints ``sql`` over the serving database, read-only."""
    python = Path(sys.executable)
    if python.is_relative_to(Path.cwd()):
        python = python.relative_to(Path.cwd())
    return (
        f'{python} -c "import duckdb; print(duckdb.connect('
        f"'{warehouse}', read_only=True).sql('{sql}'))\""
    )


def _next_steps(warehouse: str, stream: Stream) -> list[str]:
    if not stream.serve:
        return []
    sql = f"FROM {stream.name}.{stream.serve[0]} ORDER BY ALL"
    return [
        "",
        "Query the KPIs (read-only: safe while the pipeline runs; reconnect to see new data):",
        f"  {query_command(warehouse, sql)}",
        "Next: `make ui` (Dagster on http://127.0.0.1:3000): the lag sensor ingests and serves "
        "whatever `eos-assets produce` sends next.",
    ]


def stream_definitions(name: str, settings: Settings) -> tuple[StreamModel, dg.Definitions]:
    """The declaration of stream ``name`` and definitions with a job of its assets.

    A stream declared in ``eos_assets/streams`` runs in the code location's definitions; an
    example (``eos_assets/examples``) runs on its own.

    Raises:
        ConfigError: no declared or example stream has that name.
    """
    if streams.declaration(name).exists():
        from eos_assets.definitions import defs as loaded
        from eos_assets.definitions import streams as models

        model = next(m for m in models if m.name == name)
        defs = loaded
    elif examples.declaration(name).exists():
        from eos_assets.definitions import build_shared

        model = read_declaration(examples.declaration(name))
        defs = dg.Definitions.merge(builtin.definitions(model), build_shared([model], settings))
    else:
        raise ConfigError(
            f"no stream {name!r}: declare it in eos_assets/streams/{name}/defs.yaml, or name "
            "an example of eos_assets/examples"
        )
    stream = Stream.of(model)
    layers = ("bronze", "silver", "gold", "serving", "outbound")
    job = dg.define_asset_job(
        f"demo_{stream.name}",
        selection=dg.AssetSelection.groups(*(stream.group(layer) for layer in layers)),
    )
    return model, dg.Definitions.merge(defs, dg.Definitions(jobs=[job]))


def continue_clock(clock: Path) -> datetime:
    """Event time to start at: now, or later if an earlier demo's events reached further.

    The demo's event clock runs faster than real time; a second demo starting at "now" would
    fall behind the first one's watermark and every event would count as late.
    """
    now = datetime.now(UTC)
    if not clock.exists():
        return now
    return max(now, datetime.fromisoformat(clock.read_text().strip()))


def save_clock(clock: Path, manifest: Path, model: StreamModel) -> None:
    """Remember the latest event time this demo committed."""
    latest: datetime | None = None
    field, unit = model.event_time.field, _EPOCH_UNITS.get(str(model.event_time.format))
    for record in read_manifest(manifest):
        if record["status"] != "committed" or record["malformed"] is not None:
            continue
        value = json.loads(base64.b64decode(record["value_b64"]))[field]
        if unit is None:
            stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        else:
            stamp = datetime.fromtimestamp(value / unit, UTC)
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


def _metadata(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> dict:
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        if mat.asset_key == key:
            return {k: v.value for k, v in mat.metadata.items()}
    raise EosError(f"the demo run did not materialize {key.to_user_string()}")


def _derived_lines(result: dg.ExecuteInProcessResult, stream: Stream) -> list[str]:
    """One line per silver and gold table: what this run added."""
    events = _metadata(result, stream.events)
    windows = _metadata(result, stream.window_aggregates)
    lines = [
        f"  {stream.events.to_user_string()}: {events['rows_inserted']} events inserted, "
        f"{events['duplicates_in_batch'] + events['duplicates_already_in_silver']} duplicates "
        f"and {events['malformed_excluded']} malformed records left out",
    ]
    if stream.entity is not None:
        state = _metadata(result, stream.entity_state)
        lines.append(
            f"  {stream.entity_state.to_user_string()}: {state['entities_touched']} "
            f"{stream.entity.key} values touched"
        )
    lines.append(
        f"  {stream.window_aggregates.to_user_string()}: {windows['windows_recomputed']} "
        f"windows computed, {windows['late_events']} late events recorded in "
        f"{stream.late_events.to_user_string()}, watermark {windows['watermark']}"
    )
    return lines


def kpi_lines(warehouse: str, stream: Stream) -> list[str]:
    """The stream's served KPIs as DuckDB serves them, and the Delta versions they reflect."""
    lines = []
    with warehouse_file.connect_reader(warehouse) as conn:
        for name in stream.serve:
            table = f"{stream.name}.{name}"
            rows = conn.execute(f"FROM {table} ORDER BY ALL LIMIT {_SHOWN}").fetchall()
            columns = [c[0] for c in conn.description or []]
            (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone() or (0,)
            lines.append(f"  {table} from DuckDB ({count} rows, first {len(rows)}):")
            lines.append("    " + " | ".join(columns))
            lines += ["    " + " | ".join(_cell(v) for v in row) for row in rows]
        versions = conn.execute(
            f"SELECT table_name, delta_version FROM {serving.VERSIONS_TABLE} "
            "WHERE table_name LIKE ? ORDER BY table_name",
            [f"{stream.name}.%"],
        ).fetchall() if stream.served_specs else []  # fmt: skip
    if versions:
        lines.append("    reflects Delta " + ", ".join(f"{t} v{v}" for t, v in versions))
    return lines


def _cell(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
