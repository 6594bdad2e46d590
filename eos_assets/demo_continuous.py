"""`eos-assets demo --continuous SECONDS`: a stream's continuous loop, live.

The stream (orders by default) runs as if declared ``mode: continuous``: one run of its job
``<stream>_continuous_kpis`` loops micro-batches on the Dagster instance of `make ui`, while a
paced producer sends ``--rate`` events/s for SECONDS. The summary lists the run's batches, with
where each one's seconds went, and the KPIs served from DuckDB; the UI then shows every batch
as materializations of the stream's assets.
"""

import threading
import time
from pathlib import Path
from typing import Any

import dagster as dg

from eos_assets.defs.continuous import continuous_job
from eos_assets.defs.stream import Stream
from eos_assets.demo import (
    demo_broker,
    demo_records,
    kpi_lines,
    save_clock,
    stream_definitions,
)
from eos_assets.demo_options import DemoOptions
from eos_assets.devkit import broker
from eos_assets.devkit.manifest import ProduceSummary
from eos_assets.devkit.producer import ProduceOptions, produce
from eos_assets.instance import ensure_instance_config
from eos_assets.lib.errors import EosError
from eos_assets.resources import build_resources
from eos_assets.settings import Settings

DRAIN_S = 15.0  # the loop runs this long after the producer's last second
SHOWN = 12  # batch lines printed at most (the first and the last ones)


def run_continuous_demo(options: DemoOptions, seconds: float, drain_s: float = DRAIN_S) -> str:
    """Loop the stream's continuous run while a paced producer sends for ``seconds``, and
    ``drain_s`` longer; return the summary.

    Raises:
        EosError: the producer or the run failed (one line).
    """
    began = time.monotonic()
    settings = Settings.from_env()
    state_dir = Path(settings.state_dir)
    model, _ = stream_definitions(options.stream, settings)
    bootstrap, where = demo_broker(settings)
    stream = Stream.of(model.model_copy(update={"mode": "continuous"}))
    topic = settings.topics[0] if settings.topics_from_env else stream.topics[0]
    client = dict(settings.kafka_client)
    broker.ensure_topic(bootstrap, topic, options.partitions, client)  # before the loop reads
    defs = dg.Definitions(jobs=[continuous_job(stream)], resources=build_resources(settings))
    job = defs.resolve_job_def(stream.named("continuous_kpis"))
    manifest = state_dir / "manifests" / f"demo-continuous-{int(time.time())}.jsonl"
    clock = state_dir / "demo_clock.txt"
    sending = demo_records(options, topic, clock, max(1, int(options.rate * seconds)), options.rate)
    producer = _Producer(bootstrap, sending, manifest, client)

    ensure_instance_config()
    instance = dg.DagsterInstance.get()
    loop = {"max_seconds": seconds + drain_s}
    config: dict[str, Any] = {
        "ops": {stream.named("kpi_batches"): {"config": loop}},
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    producer.start()
    result = job.execute_in_process(run_config=config, instance=instance, raise_on_error=False)
    produced = producer.finish()
    save_clock(clock, manifest, model)
    if not result.success:
        failure = next((e for e in result.all_events if e.is_failure), None)
        message = failure.message if failure is not None else "see the run in `make ui`"
        raise EosError(f"the continuous demo run {result.run_id} failed: {message}")
    said = [
        e.user_message
        for e in instance.all_logs(result.run_id)
        if e.user_message.startswith(("batch ", "follow step "))
    ]
    shown = said if len(said) <= SHOWN else [*said[: SHOWN // 2], "...", *said[-SHOWN // 2 :]]
    batches = sum(line.startswith("batch ") for line in said)
    lines = [
        f"eos_assets demo, continuous: stream {stream.name}, {where}, topic {topic!r}",
        f"  produced: {produced.committed} committed and {produced.aborted} aborted records at "
        f"{options.rate:g} events/s (manifest {manifest})",
        f"  run {result.run_id} of {job.name} (Dagster instance {instance.root_directory}): "
        f"{batches} batches in {seconds + drain_s:g}s, then it ended by its bound",
        *[f"    {line}" for line in shown],
        *kpi_lines(settings.warehouse, stream),
        f"  demo wall time: {time.monotonic() - began:.1f}s",
        f"Next: `make ui`: the asset pages of {stream.raw_events.to_user_string()}, "
        f"{stream.events.to_user_string()} and the KPI tables list one materialization per "
        f"batch, and run {result.run_id} logs each batch's seconds",
    ]
    return "\n".join(lines)


class _Producer:
    """The demo's paced producer, in a thread beside the run."""

    def __init__(
        self, bootstrap: str, options: ProduceOptions, manifest: Path, client: dict[str, str]
    ) -> None:
        self._args = (bootstrap, options, manifest)
        self._client = client
        self._done: ProduceSummary | BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="demo-producer", daemon=True)

    def start(self) -> None:
        """Begin sending."""
        self._thread.start()

    def finish(self) -> ProduceSummary:
        """Wait for the last record.

        Raises:
            EosError: the producer failed.
        """
        self._thread.join()
        done = self._done
        if isinstance(done, EosError):
            raise done
        if not isinstance(done, ProduceSummary):
            raise EosError(f"the demo's producer failed: {done!r}")
        return done

    def _run(self) -> None:
        try:
            self._done = produce(*self._args, client_config=self._client)
        except BaseException as exc:  # handed to the caller's thread
            self._done = exc
