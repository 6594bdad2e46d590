"""The continuous run of a stream declared ``mode: continuous``: one long-lived Dagster run
that loops micro-batches along the path to the served KPIs.

The run polls bronze's positions against Kafka's last stable offsets every ``poll_s``; as soon
as committed records are pending (no threshold) it runs a batch (``continuous_batch.py``):
bronze, its blocking check, silver/events, its blocking check, the declared KPI tables and their
DuckDB serving, each logged as a materialization or check evaluation of its asset. At most every
``follow_every_s`` a follow pass brings the entity state, the windows and the SQL KPI tables up
to a proven silver version, one step after each batch's KPI tables. The steps run one after the
other in the op's thread: on a 2-core machine, a KPI pass overlapping the next batch's silver,
or the follow steps, took 3-10 times longer than alone. A blocking check that fails, or a step that
fails, fails the run with its one line. The run ends by itself after ``max_seconds`` or
``max_batches``; the stream's keeper sensor (``continuous_sensor.py``) starts the next one.

The run records its process (``eos/pid``, ``eos/host``), a heartbeat and the time of its last
batch as run tags: the keeper sensor tells a dead run from a live one by them, and the lag
sensor names a live run that stopped making batches as the cause of a stall.
"""

import os
import socket
import time
from collections.abc import Iterator

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field

from eos_assets.defs.continuous_batch import Batches, Event, Step
from eos_assets.defs.jobs import STREAM_TAG
from eos_assets.defs.stream import Stream
from eos_assets.lib import faults
from eos_assets.lib.ingest.ingest import SMALL_READ, IngestOptions
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import spark_session
from eos_assets.resources.warehouse import WarehouseResource

CONTINUOUS_JOB = "continuous_kpis"  # a stream's job is ``<stream>_continuous_kpis``
# Run tags the loop keeps up to date.
PID, HOST, HEARTBEAT, LAST_BATCH, BATCHES = (
    "eos/pid",
    "eos/host",
    "eos/heartbeat",
    "eos/last_batch",
    "eos/batches",
)
HEARTBEAT_EVERY_S = 2.0
AFTER_BATCH = "continuous_after_batch"  # a fault point: between a batch and the next poll


class ContinuousConfig(dg.Config):
    """How long a continuous run loops and how much one batch reads."""

    poll_s: float = Field(
        default=0.5, gt=0, description="Seconds between two looks at Kafka when idle."
    )
    max_offsets_per_batch: int = Field(
        default=200_000, gt=0, description="Offsets one batch reads at most (all partitions)."
    )
    max_seconds: float = Field(
        default=600.0, gt=0, description="The run ends after this long; the sensor starts "
        "the next (logs and memory stay bounded, new code is picked up).",
    )  # fmt: skip
    max_batches: int = Field(default=2_000, gt=0, description="Or after this many batches.")
    follow_every_s: float = Field(
        default=30.0, ge=0, description="Seconds between two passes of the entity state, the "
        "windows and the SQL KPIs (a pass holds up the next batch for its seconds).",
    )  # fmt: skip
    checks_every_s: float = Field(
        default=60.0, ge=0, description="Seconds between two evaluations, by the follow steps, "
        "of the checks that block nothing (final_windows_match_silver, duckdb_matches_delta).",
    )  # fmt: skip
    read_timeout_s: float = Field(
        default=300.0, description="A range not read completely in this time fails the run."
    )


def continuous_job(stream: Stream) -> dg.JobDefinition:
    """``<stream>_continuous_kpis``: the one op that loops the stream's batches."""

    @dg.op(name=stream.named("kpi_batches"), tags={"kind": "spark"})
    @stream.keyed
    def kpi_batches(
        context: dg.OpExecutionContext,
        config: ContinuousConfig,
        kafka: KafkaResource,
        lake: LakeResource,
        pyspark: LazyPySparkResource,
        warehouse: WarehouseResource,
    ) -> Iterator[Event | dg.Output[int]]:
        """Loop micro-batches from Kafka to the served KPIs until the run's bound."""
        began = time.monotonic()
        _tag(context, {PID: str(os.getpid()), HOST: socket.gethostname()})
        options = IngestOptions(
            max_records=config.max_offsets_per_batch,
            read_timeout_s=config.read_timeout_s,
            group_id=kafka.consumer_group,
            start=stream.start,
            asset=stream.raw_events.to_user_string(),
            read_here_below=SMALL_READ,
        )
        batches = Batches(context, stream, spark_session(pyspark), kafka, lake, warehouse, options)
        batches.checks_every_s = config.checks_every_s
        done, beat = 0, 0.0
        # A batch that moved silver owes a follow pass; a pass starts at most every
        # ``follow_every_s``, and its steps run one a batch (after its KPI tables), or one a
        # poll while the loop idles, so none holds up a batch for the whole pass.
        owed, began_pass, steps = False, float("-inf"), list[Step]()

        def follow(took: dict[str, float]) -> Iterator[Event]:
            nonlocal owed, began_pass
            if not steps and owed and time.monotonic() - began_pass >= config.follow_every_s:
                owed, began_pass = False, time.monotonic()
                steps.extend(batches.follow_steps(batches.proven_silver))
            if steps:
                yield from steps.pop(0)(took)

        # The first pass brings the path up to bronze even with nothing pending: a run that
        # died after a commit left the tables after it behind.
        catch_up = True
        while done < config.max_batches and time.monotonic() - began < config.max_seconds:
            if time.monotonic() - beat >= HEARTBEAT_EVERY_S:
                beat = time.monotonic()
                _tag(context, {HEARTBEAT: f"{time.time():.3f}"})
            # Once Kafka answered, a broker that goes away (a restart) costs a retry.
            ingested = batches.ingest(ride_over=not catch_up)
            took: dict[str, float] = {}
            if ingested.version is None and not catch_up:
                yield from follow(took)
                if took:
                    context.log.info(f"follow step while idle: {_seconds(took)}")
                else:
                    time.sleep(config.poll_s)
                continue
            catch_up = False
            yield from batches.front(ingested, took)
            passed = batches.kpis(batches.proven_silver, took)
            if passed is not None:
                yield from batches.kpi_events(passed)
            owed = True
            yield from follow(took)
            done += 1
            _tag(context, {LAST_BATCH: f"{time.time():.3f}", BATCHES: str(done)})
            context.log.info(f"batch {done}: {ingested.records} records, {_seconds(took)}")
            faults.crash_point(AFTER_BATCH)
        # The run ends with the follow steps up to its last batch.
        began_pass = float("-inf")
        while steps or owed:
            took = {}
            yield from follow(took)
            context.log.info(f"follow step at the end: {_seconds(took)}")
        context.log.info(f"{done} batches in {time.monotonic() - began:.0f} s: the run ends here")
        yield dg.Output(done, metadata={"batches": done})

    @dg.job(
        name=stream.named(CONTINUOUS_JOB),
        tags={STREAM_TAG: stream.name},
        description=f"One long-lived run that loops micro-batches of stream {stream.name} "
        "from Kafka to its served KPIs (bronze, silver/events, the KPI tables, DuckDB), each "
        "batch logged as materializations and blocking check evaluations.",
    )
    def continuous_kpis() -> None:
        kpi_batches()

    return continuous_kpis


def _seconds(took: dict[str, float]) -> str:
    return "seconds " + ", ".join(f"{k} {v:.2f}" for k, v in took.items())


def _tag(context: dg.OpExecutionContext, tags: dict[str, str]) -> None:
    context.instance.add_run_tags(context.run_id, tags)
