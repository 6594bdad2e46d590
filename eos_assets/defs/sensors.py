"""Every sensor: the consumer-lag sensor, and the automation sensor that has silver and gold
follow bronze (``automation.py`` holds its conditions).

The consumer-lag sensor watches how far bronze is behind Kafka and launches the ingest.

Lag comes from the Delta table's ``txn`` positions (the source of truth) and the partitions'
last stable offsets, never from Kafka group offsets. Each tick records it as an observation of
bronze/raw_events (the asset's Plots tab charts it), keeps a window of samples in the cursor
for a Burrow-style status, and launches ``ingest_and_refresh`` (the ingest, then everything
downstream of bronze in the same run and SparkSession) when the lag or the age of the oldest
pending record crosses its limit (``lib.limits``). A run for a small backlog gets a driver JVM
started for a short run (its run config and the ``eos/driver_jit`` tag say so).
"""

import time

import dagster as dg
from dagster_pyspark import LazyPySparkResource

from eos_assets.defs.continuous_sensor import ACTIVE, rest_request, stall_cause
from eos_assets.defs.jobs import INGEST_JOB, STREAM_JOB, STREAM_TAG, stream_selection
from eos_assets.defs.stream import Stream
from eos_assets.lib.checks.limits import Limits
from eos_assets.lib.errors import TopicMissingError
from eos_assets.lib.ingest.ranges import accept_loss, loss_summary
from eos_assets.lib.kafka.burrow import Decision, LagHistory, Sample, decide, run_key, worst
from eos_assets.lib.kafka.lag import PartitionLag, measure_lag, pin_reason, with_ages
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.spark import quick_start_run_config
from eos_assets.settings import read_limits

LAG_SENSOR = "ingest_on_kafka_lag"
# The least seconds between two ticks. Dagster's sensor daemon passes over its sensors every 5 s
# and evaluates one whose last tick began at least this long ago; at 5 the jitter of that loop
# made every other pass skip the sensor (its last tick began 4.9x s before), so ticks came 10 s
# apart as often as 5. Below the loop's period the sensor ticks on every pass: measured with the
# daemon, a 2,000 events/s stream and the warm local Spark server on a quiet machine, tick
# starts 5.0 s apart throughout against a 10 s gap after about every second tick at 5.
LAG_TICK_S = 1
# A run for at most this many offsets starts its driver JVM for a short run (C1 only,
# ``spark_env.QUICK_START_JIT``); a larger backlog gets the default JIT, which pays off on it.
QUICK_START_MAX_OFFSETS = 250_000
# A run for a small backlog takes only the path to the served KPIs when the stream's last run
# with every asset was launched less than this many seconds ago; entity state, window
# aggregates and the outbound publishers then follow at most this much later.
REST_EVERY_S = 30
# A continuous stream's assets off the KPI path are launched at most this often: their runs
# share the Spark server with the continuous run, whose batches slow down while one is active.
# Every 30 s, one was active most of the time; continuous streams alternated at 30 and 120 s
# had p95 14.1 and 15.6 s against 11.9 and 9.6 s (BENCHMARKS.md, "The producer's CPU, third
# round, and FAIR scheduling").
CONTINUOUS_REST_EVERY_S = 120
# Active runs of a job looked at per tick (a few per stream at most).
_ACTIVE_LOOKED_AT = 20


def _observation(
    key: dg.AssetKey,
    lags: list[PartitionLag],
    history: LagHistory,
    now: float,
    limits: Limits,
    reason: str,
) -> dg.AssetObservation:
    verdicts = history.evaluate(now, limits.lag_stop_after_s)
    ages = {lg.key: _rounded(lg.age_s(now)) for lg in lags}
    known = [a for a in ages.values() if a is not None]
    metadata: dict[str, dg.RawMetadataValue] = {
        "lag_total": sum(lg.lag for lg in lags),
        "status": str(worst(v.status for v in verdicts.values())),
        "decision": reason,
        "partitions": dg.MetadataValue.json(
            {
                lg.key: {
                    "position": lg.position,
                    "last_stable_offset": lg.end,
                    "lag": lg.lag,
                    "age_s": ages[lg.key],
                    "status": str(verdicts[lg.key].status),
                    "why": verdicts[lg.key].reason,
                    "held_back": lg.held_back,
                    "open_transaction": lg.stall_reason() or None,
                }
                for lg in lags
            }
        ),
    }
    if known:
        metadata["oldest_pending_age_s"] = max(known)
    metadata["held_back_total"] = sum(lg.held_back for lg in lags)
    for lg in lags:
        metadata[f"lag {lg.topic}[{lg.partition}]"] = lg.lag
    return dg.AssetObservation(asset_key=key, metadata=metadata)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _holds_the_way(
    instance: dg.DagsterInstance, run: dg.DagsterRun, released_by: dg.AssetKey
) -> bool:
    """Whether an active ingest run keeps the next one from being launched.

    An ``ingest_and_refresh`` run stops holding the way once it has committed
    ``released_by`` (the stream's silver/events): the next run's process starts and loads
    while this one computes the KPIs, so its ingest begins about when they are served. Every
    table's commit protocol lets two writers race safely (the later one re-plans from the
    other's commit), and the ingest and outbound pools have one slot each.
    """
    if run.job_name != STREAM_JOB:
        return True
    materialized = instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
    ).records
    return all(
        (event := r.event_log_entry.dagster_event) is None or event.asset_key != released_by
        for r in materialized
    )


def _stream_selection(
    context: dg.SensorEvaluationContext, stream: Stream, lean_to: dg.AssetKey | None = None
) -> tuple[list[dg.AssetKey], list[dg.AssetCheckKey]]:
    """The stream's assets and checks of ``ingest_and_refresh``, named in each run it launches.

    With ``lean_to``, only the path from bronze to that asset (and the assets computed in the
    same step as one of them), with their checks.

    A run that names them records them (its asset and check selection); the automation sensor
    then knows that the checks ran with their assets in that run and requests no check-only
    run after it.
    """
    repository = context.repository_def
    if repository is None:
        raise dg.DagsterInvariantViolationError(
            f"{stream.named(LAG_SENSOR)} needs the code location's asset graph: build its "
            "context with "
            "repository_def"
        )
    graph = repository.asset_graph
    selection = stream_selection(stream)
    if lean_to is not None and graph.has(lean_to):
        selection &= dg.AssetSelection.assets(lean_to).upstream().required_multi_asset_neighbors()
    return sorted(selection.resolve(graph)), sorted(selection.resolve_checks(graph))


def lag_sensor(stream: Stream) -> dg.SensorDefinition:
    """``<stream>_ingest_on_kafka_lag``: the stream's consumer-lag sensor.

    A run for a small backlog takes only the path to ``serving/kpis``, which makes the stream's
    KPIs visible, when a run of every asset was launched recently (``REST_EVERY_S``).
    """
    tags = {STREAM_TAG: stream.name}
    served_key = stream.kpis

    @dg.sensor(
        name=stream.named(LAG_SENSOR),
        job_name=STREAM_JOB,
        minimum_interval_seconds=LAG_TICK_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Measures how far {stream.raw_events.to_user_string()} is behind Kafka "
        "(Delta txn positions vs last stable offsets), records it on the table with a "
        "Burrow-style status (OK, WARN, STALL, STOP) and launches ingest_and_refresh for the "
        "stream (bronze, then everything downstream in the same run) when the lag reaches "
        "EOS_LAG_MAX_RECORDS or the oldest pending record EOS_LAG_MAX_AGE_S.",
    )
    @stream.keyed
    def ingest_on_kafka_lag(
        context: dg.SensorEvaluationContext,
        kafka: KafkaResource,
        lake: LakeResource,
        pyspark: LazyPySparkResource,
    ) -> dg.SensorResult:
        """Launch an ingest when bronze is too far behind; skip with the reason otherwise.

        A topic that does not exist yet skips the tick with the reason; the first tick after it
        was created measures it like any other.

        Raises:
            BrokerError: Kafka is unreachable (the tick fails with one line).
        """
        limits = read_limits(declared=stream.limits)
        now = time.time()
        client = kafka.client_config()
        topics = kafka.topics_for(stream.topics, stream.topic_pattern)
        if not topics:
            reason = f"no topic matches topic_pattern {stream.topic_pattern!r} yet"
            return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=context.cursor)
        try:
            lags = measure_lag(
                client,
                topics,
                lake.table_uri(*stream.raw_events.path),
                lake.storage_options,
                False,
                start=stream.start,
            )
        except TopicMissingError as missing:
            # The first state of a new deployment: no producer has written yet. Not a failure.
            reason = (
                f"waiting for topic {missing.topic!r} to be created on {missing.bootstrap} "
                "(the first `eos-assets produce` creates it; EOS_TOPICS names the topics)"
            )
            return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=context.cursor)
        total = sum(lg.lag for lg in lags)
        if 0 < total < limits.lag_max_records:
            lags = with_ages(client, lags)  # small by construction: reading its head is cheap
        history = LagHistory.from_json(context.cursor)
        history.retain(lg.key for lg in lags)
        for lg in lags:
            history.add(lg.key, Sample(now, lg.start, lg.end), limits.lag_window)
        lost = [r for lg in lags if (r := lg.lost) is not None]
        if lost:
            # An ingest would stop at the loss: launching one per tick would only fail runs.
            reason = (
                f"{loss_summary(lost)}; no ingest is launched until it is accepted: "
                f"{accept_loss(stream.raw_events.to_user_string())}"
            )
            return dg.SensorResult(
                skip_reason=dg.SkipReason(reason),
                cursor=history.to_json(),
                asset_events=[_observation(stream.raw_events, lags, history, now, limits, reason)],
            )
        if stream.continuous:
            return _continuous_tick(context, stream, lags, history, now, limits)
        ages = [lg.age_s(now) for lg in lags if lg.lag > 0]
        only_markers = bool(ages) and all(
            lg.measured and lg.oldest_ms is None for lg in lags if lg.lag > 0
        )
        decision = decide(
            total,
            max((a for a in ages if a is not None), default=None),
            limits.lag_max_records,
            limits.lag_max_age_s,
            only_markers,
        )
        if not decision.launch and (pin := pin_reason(lags)):
            decision = Decision(True, pin)
        reason = decision.reason
        if not decision.launch and (held := [lg for lg in lags if lg.held_back]):
            # Bronze is as far as read_committed readers can go; say what holds Kafka back.
            reason += f"; {held[0].stall_reason()}"
            reason += f" (and {len(held) - 1} more partitions)" if len(held) > 1 else ""
        request = None
        if decision.launch:
            key = run_key({(lg.topic, lg.partition): (lg.start, lg.end) for lg in lags})
            # A run launched for another stream does not hold this one back; a run started by
            # hand (no stream tag) covers every stream and does.
            active = [
                run
                for job in (STREAM_JOB, INGEST_JOB)
                for run in context.instance.get_runs(
                    filters=dg.RunsFilter(job_name=job, statuses=ACTIVE), limit=_ACTIVE_LOOKED_AT
                )
                if run.tags.get(STREAM_TAG, stream.name) == stream.name
                and _holds_the_way(context.instance, run, stream.events)
            ][:1]
            if history.requested == key:
                reason = f"an ingest up to these offsets was already requested (run key {key})"
            elif active:
                reason = f"ingest run {active[0].run_id[:8]} is {active[0].status.value}; waiting"
            else:
                history.requested = key
                quick = total <= QUICK_START_MAX_OFFSETS
                lean = history.lean(now, REST_EVERY_S) and quick
                if not lean:
                    history.full_at = now
                assets, checks = _stream_selection(context, stream, served_key if lean else None)
                request = dg.RunRequest(
                    run_key=key,
                    run_config=quick_start_run_config(pyspark) if quick else {},
                    tags={
                        **tags,
                        "eos/trigger": "lag",
                        "eos/lag_total": str(total),
                        "eos/driver_jit": "c1" if quick else "default",
                        "eos/path": "kpis" if lean else "all",
                    },
                    asset_selection=assets,
                    asset_check_keys=checks,
                )
        events = [_observation(stream.raw_events, lags, history, now, limits, reason)]
        if request is None:
            return dg.SensorResult(
                skip_reason=dg.SkipReason(reason), cursor=history.to_json(), asset_events=events
            )
        context.log.info(f"launching {STREAM_JOB} for {stream.name}: {reason}")
        return dg.SensorResult(
            run_requests=[request], cursor=history.to_json(), asset_events=events
        )

    return ingest_on_kafka_lag


def _continuous_tick(
    context: dg.SensorEvaluationContext,
    stream: Stream,
    lags: list[PartitionLag],
    history: LagHistory,
    now: float,
    limits: Limits,
) -> dg.SensorResult:
    """A continuous stream's tick: the lag and its status recorded, no ingest launched (its
    continuous run takes every pending record), a live run that makes no batch named as the
    stall's cause, and the assets the run does not materialize (the publishers) launched every
    ``CONTINUOUS_REST_EVERY_S`` at most."""
    reason = "continuous stream: its continuous run ingests every pending record"
    if sum(lg.lag for lg in lags) and (cause := stall_cause(context.instance, stream, now)):
        reason = f"stalled: {cause}"
    request = None
    busy = context.instance.get_runs(
        filters=dg.RunsFilter(job_name=STREAM_JOB, statuses=ACTIVE, tags={STREAM_TAG: stream.name}),
        limit=1,
    )
    if not history.lean(now, CONTINUOUS_REST_EVERY_S) and not busy:
        request = rest_request(context, stream)
        if request is not None:
            history.full_at = now
    events = [_observation(stream.raw_events, lags, history, now, limits, reason)]
    if request is None:
        return dg.SensorResult(
            skip_reason=dg.SkipReason(reason), cursor=history.to_json(), asset_events=events
        )
    return dg.SensorResult(run_requests=[request], cursor=history.to_json(), asset_events=events)


def downstream_sensor(streams: list[Stream]) -> list[dg.AutomationConditionSensorDefinition]:
    """The automation sensor of the silver, gold, serving and outbound assets of every stream
    that is not continuous (none when every stream is: a continuous run and the lag sensor's
    rest runs carry theirs)."""
    followed = [s.raw_events for s in streams if not s.continuous]
    if not followed:
        return []
    sensor = dg.AutomationConditionSensorDefinition(
        "follow_bronze_downstream",
        target=dg.AssetSelection.assets(*followed).downstream(include_self=False),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30,
        description="Materializes silver and gold after bronze changes, once the blocking "
        "checks upstream passed.",
    )
    return [sensor]
