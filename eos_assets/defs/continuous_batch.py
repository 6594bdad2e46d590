"""One micro-batch of a continuous stream: the steps of the assets on its path to the served
KPIs, each logged as the Dagster event its asset or check would have produced.

Every step is the call the asset itself makes (``ingest_bronze``, ``update_events``, the
stream's KPI tables and their serving) with the asset's own metadata (``defs/bronze.py``,
``defs/silver.py``, ``defs/kpis.py``), so each commit is the asset's:
positions with the data, compare-and-set on the snapshot its plan read. The two blocking checks
(``offsets_contiguous`` on bronze, ``event_id_unique`` on silver/events) are evaluated after
their asset's commit and before anything reads it; one that fails stops the batch there.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import dagster as dg
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from eos_assets.defs import kpis as kpi_defs
from eos_assets.defs.bronze import ingest_metadata
from eos_assets.defs.check_state import passed_metadata
from eos_assets.defs.checks import OFFSETS_CONTIGUOUS, report_result
from eos_assets.defs.derived_checks import (
    EVENT_ID_UNIQUE,
    WINDOWS_RECONCILE,
    unique_ids,
    windows_result,
)
from eos_assets.defs.gold import aggregate, window_events
from eos_assets.defs.kpis import SERVING_RECONCILE
from eos_assets.defs.silver import (
    entity_state_metadata,
    events_metadata,
    fold_entities,
    run_or_fail,
)
from eos_assets.defs.stream import Stream
from eos_assets.lib.checks.contiguity import contiguity_of
from eos_assets.lib.checks.increment import Checked
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived.kpi_tables import KpiOutcome
from eos_assets.lib.derived.silver_events import update_events
from eos_assets.lib.ingest.ingest import IngestOptions, IngestOutcome, ingest_bronze
from eos_assets.lib.kafka.retry import while_unreachable
from eos_assets.lib.serving.serving import MirrorOutcome
from eos_assets.lib.spark.spark_modes import server_lost
from eos_assets.resources.kafka import KafkaResource, registry_config
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.warehouse import WarehouseResource

T = TypeVar("T")

# What a batch yields, as its asset or check would have.
Event = dg.AssetMaterialization | dg.AssetCheckEvaluation
# One step of a follow pass: it runs, adds its seconds to the dict, yields its events.
Step = Callable[[dict[str, float]], Iterator[Event]]


@dataclass(frozen=True)
class KpiPass:
    """What one pass over the KPI tables and their serving did."""

    tables: dict[str, KpiOutcome]
    served: MirrorOutcome | None


@dataclass
class Batches:
    """What the batches of one continuous run share: its context, session and resources, and
    the snapshot each blocking check last proved (read from the instance once, then kept)."""

    context: dg.OpExecutionContext
    stream: Stream
    spark: SparkSession
    kafka: KafkaResource
    lake: LakeResource
    warehouse: WarehouseResource
    options: IngestOptions
    proven: dict[dg.AssetCheckKey, Checked | None] = field(default_factory=dict)
    failed: dg.AssetCheckEvaluation | None = None
    # The silver version the last passing event_id_unique evaluation proved: the KPI steps
    # consume up to it and no further, whatever silver holds by then.
    proven_silver: int | None = None
    serve_pending: bool = True  # the first KPI pass serves even when nothing changed
    follow_pending: bool = True  # the first follow pass computes the SQL KPIs even so
    # The checks that block nothing are evaluated by the follow steps at most this often, once
    # the KPI tables were served; ``checked`` has the metadata of each one's last pass.
    checks_every_s: float = 60.0
    checked_at: float | None = None
    checked: dict[dg.AssetCheckKey, dict[str, Any] | None] = field(default_factory=dict)
    served_once: bool = False

    def __post_init__(self) -> None:
        for key in (self.contiguous, self.unique):
            metadata = passed_metadata(self.context.instance, key)
            self.proven[key] = Checked.from_metadata(metadata)

    @property
    def contiguous(self) -> dg.AssetCheckKey:
        return dg.AssetCheckKey(self.stream.raw_events, OFFSETS_CONTIGUOUS)

    @property
    def unique(self) -> dg.AssetCheckKey:
        return dg.AssetCheckKey(self.stream.events, EVENT_ID_UNIQUE)

    def uri(self, key: dg.AssetKey) -> str:
        return self.lake.table_uri(*key.path)

    def ingest(self, ride_over: bool = False) -> IngestOutcome:
        """Plan, read and commit the pending offsets (at most ``options.max_records``). With
        ``ride_over``, a broker that answers nothing (restarting) is retried for up to
        ``EOS_KAFKA_RETRY_SECONDS``: nothing was committed, the retry plans from the table."""
        stream = self.stream

        def once() -> IngestOutcome:
            return ingest_bronze(
                self.spark,
                self.uri(stream.raw_events),
                self.kafka.topics_for(stream.topics, stream.topic_pattern),
                self.kafka.client_config(),
                self.options,
                self.lake.storage_options,
                contract=stream.contract,
                registry=registry_config() if stream.contract.registry else None,
            )

        warn = self.context.log.warning
        return self._or_fail(partial(while_unreachable, once, warn) if ride_over else once)

    def front(self, ingested: IngestOutcome, took: dict[str, float]) -> Iterator[Event]:
        """Bronze's commit (if any), its blocking check, silver/events brought up to bronze and
        its blocking check: the event of each step as it is done; ``took`` gets each step's
        seconds. Afterwards ``proven_silver`` is the silver version the check proved.

        Raises:
            dg.Failure: a blocking check failed (its one line), or a step failed in one line.
        """
        stream = self.stream
        if ingested.version is not None:
            took["ingest"] = ingested.seconds.get("total", 0.0)
            yield self._materialized(
                stream.raw_events,
                ingest_metadata(self.context.log, stream, ingested, self.uri(stream.raw_events)),
            )
        yield self._timed(
            took, "check_offsets", lambda: self._check(self.contiguous, self._contiguity)
        )
        self._stop_if_failed()
        events = self._timed(
            took,
            "silver",
            lambda: self._or_fail(
                lambda: update_events(
                    self.spark,
                    stream.contract,
                    self.uri(stream.raw_events),
                    self.uri(stream.events),
                    self.lake.storage_options,
                )
            ),
        )
        if events.version is not None:
            yield self._materialized(stream.events, events_metadata(self.context, events))
        yield self._timed(
            took, "check_event_ids", lambda: self._check(self.unique, self._unique_ids)
        )
        self._stop_if_failed()

    def kpis(self, upto: int | None, took: dict[str, float]) -> "KpiPass | None":
        """The stream's KPI tables brought up to silver version ``upto`` (one a blocking check
        proved), then its DuckDB serving; None when there was nothing to do (``kpi_events``
        logs the pass).

        Raises:
            dg.Failure: a step failed, in one line.
        """
        stream = self.stream
        tables: dict[str, KpiOutcome] = {}
        if stream.kpi_specs:
            tables = self._timed(
                took,
                "kpis",
                lambda: self._or_fail(lambda: kpi_defs.update(stream, self.spark, self.lake, upto)),
            )
        changed = any(o.version is not None for o in tables.values())
        if not changed and not self.serve_pending:
            return None
        self.serve_pending = False
        served = None
        if stream.served_specs:
            served = self._timed(took, "serve", lambda: self._serve(kpi_defs.EVENTS))
        self.served_once = True
        return KpiPass(tables, served)

    def _serve(self, kind: str) -> MirrorOutcome:
        return self._or_fail(
            lambda: kpi_defs.serve(self.stream, self.lake, self.warehouse, (kind,))
        )

    def kpi_events(self, done: "KpiPass") -> Iterator[Event]:
        """A KPI pass's materializations, as the KPI assets would have logged them."""
        for result in kpi_defs.kpi_events(self.stream, self.context, done.tables):
            yield self._as_event(result)
        if done.served is not None:
            metadata = kpi_defs.serving_metadata(self.context, done.served, self.warehouse.path)
            yield self._materialized(self.stream.kpis, metadata)

    def follow_steps(self, upto: int | None) -> list[Step]:
        """The follow steps of one pass, each run at a batch of its own (a pass of them
        together held up a batch for 8-16 s): the entity state, then the windows with their
        late events (at the declared size and grace), each brought up to silver version
        ``upto``; then the SQL KPI tables computed over them and served, and the checks that
        block nothing when due. Each yields its assets' materializations (none for a table
        that did not move, but at a run's first pass).

        Raises:
            dg.Failure: a step failed, in one line.
        """
        stream = self.stream
        first, moved = self.follow_pending, [False]
        self.follow_pending = False

        def entity(took: dict[str, float]) -> Iterator[Event]:
            done = self._timed(
                took,
                "entity_state",
                lambda: self._or_fail(lambda: fold_entities(stream, self.spark, self.lake, upto)),
            )
            moved[0] |= done.version is not None
            if first or done.version is not None:
                metadata = entity_state_metadata(self.context, done)
                yield self._materialized(stream.entity_state, metadata)

        def windows(took: dict[str, float]) -> Iterator[Event]:
            done = self._timed(
                took,
                "windows",
                lambda: self._or_fail(
                    lambda: aggregate(stream, self.spark, self.lake, stream.window, upto)
                ),
            )
            moved[0] |= done.version is not None
            if first or done.version is not None:
                for result in window_events(stream, self.context, done, stream.window):
                    yield self._as_event(result)

        def sql(took: dict[str, float]) -> Iterator[Event]:
            if not (first or moved[0]):
                return
            if stream.sql_kpis:
                done = self._timed(
                    took,
                    "sql_kpis",
                    lambda: self._or_fail(
                        lambda: kpi_defs.update_sql(stream, self.spark, self.lake)
                    ),
                )
                for result in kpi_defs.sql_kpi_events(stream, done):
                    yield self._as_event(result)
            if stream.served_sql:
                served = self._timed(took, "serve_sql", lambda: self._serve(kpi_defs.SQL))
                metadata = kpi_defs.serving_metadata(self.context, served, self.warehouse.path)
                yield self._materialized(stream.sql_serving, metadata)
            if self.served_once and (
                self.checked_at is None or time.monotonic() - self.checked_at >= self.checks_every_s
            ):
                yield from self._timed(took, "checks", self._nonblocking_checks)
                self.checked_at = time.monotonic()

        return [entity, windows, sql] if stream.entity is not None else [windows, sql]

    def _nonblocking_checks(self) -> list[dg.AssetCheckEvaluation]:
        """``final_windows_match_silver`` from where its last passing evaluation left off,
        and ``duckdb_matches_delta`` of each serving asset, as their checks evaluate."""
        stream = self.stream
        windows_key = dg.AssetCheckKey(stream.window_aggregates, WINDOWS_RECONCILE)
        if windows_key not in self.checked:
            self.checked[windows_key] = passed_metadata(self.context.instance, windows_key)
        dt = delta_io.load(self.uri(stream.window_aggregates), self.lake.storage_options)
        found = windows_result(stream, dt, self.lake, self.checked[windows_key])
        results = [(windows_key, found)]
        for kind, served in (
            (kpi_defs.EVENTS, stream.served_specs),
            (kpi_defs.SQL, stream.served_sql),
        ):
            if served:
                key = dg.AssetCheckKey(kpi_defs.serving_key(stream, kind), SERVING_RECONCILE)
                found = kpi_defs.served_result(stream, self.lake, self.warehouse, kind)
                results.append((key, found))
        evaluations = []
        for key, result in results:
            evaluation = _evaluation(key, result, blocking=False)
            if evaluation.passed:
                self.checked[key] = _values(result.metadata)
            evaluations.append(evaluation)
        return evaluations

    def _as_event(self, result: dg.MaterializeResult) -> dg.AssetMaterialization:
        assert result.asset_key is not None
        key = dg.AssetKey.from_coercible(result.asset_key)
        return self._materialized(key, dict(result.metadata or {}))

    def _contiguity(self, checked: Checked | None) -> Any:
        dt = delta_io.load(self.uri(self.stream.raw_events), self.lake.storage_options)
        return contiguity_of(dt, checked, self.lake.storage_options)

    def _unique_ids(self, checked: Checked | None) -> Any:
        dt = delta_io.load(self.uri(self.stream.events), self.lake.storage_options)
        report = unique_ids(dt, checked, dict(self.lake.storage_options or {}))
        report.counts.update(Checked.of(dt).metadata())
        self.proven_silver = dt.version()
        return report

    def _check(
        self, key: dg.AssetCheckKey, report: Callable[[Checked | None], Any]
    ) -> dg.AssetCheckEvaluation:
        """Evaluate a blocking check; a passing one becomes where the next evaluation starts."""
        result = report_result(self._or_fail(lambda: report(self.proven.get(key))))
        evaluation = _evaluation(key, result, blocking=True)
        self.failed = None if result.passed else evaluation
        if result.passed:
            self.proven[key] = Checked.from_metadata(_values(result.metadata))
        return evaluation

    def _stop_if_failed(self) -> None:
        """Stop the loop at a failed blocking check, before anything reads its asset.

        Raises:
            dg.Failure: the check's one line.
        """
        failed = self.failed
        if failed is not None:
            raise dg.Failure(
                description=f"blocking check {failed.check_name} of "
                f"{failed.asset_key.to_user_string()} failed, nothing after it was committed: "
                f"{failed.description}"
            )

    def _or_fail(self, step: Callable[[], T]) -> T:
        """``run_or_fail`` with this loop's session, so a lost Spark Connect server is told
        apart from a failing step.

        Raises:
            dg.Failure: the step's one line (a lost Spark server's too).
        """
        try:
            return run_or_fail(step)
        except PySparkException as exc:
            lost = server_lost(self.spark, exc)
            if lost is None:
                raise
            raise dg.Failure(description=str(lost)) from None

    @staticmethod
    def _materialized(key: dg.AssetKey, metadata: dict[str, Any]) -> dg.AssetMaterialization:
        return dg.AssetMaterialization(asset_key=key, metadata=metadata)

    @staticmethod
    def _timed(took: dict[str, float], name: str, step: Callable[[], Any]) -> Any:
        began = time.monotonic()
        try:
            return step()
        finally:
            took[name] = round(time.monotonic() - began, 3)


def _evaluation(
    key: dg.AssetCheckKey, result: dg.AssetCheckResult, blocking: bool
) -> dg.AssetCheckEvaluation:
    """A check's result as the evaluation its check would have logged."""
    return dg.AssetCheckEvaluation(
        asset_key=key.asset_key,
        check_name=key.name,
        passed=result.passed,
        metadata=result.metadata or {},  # type: ignore[arg-type]
        severity=result.severity,
        description=result.description,
        blocking=blocking,
    )


def _values(metadata: Any) -> dict[str, Any]:
    """A result's metadata as plain values (what the next evaluation starts from)."""
    return {k: getattr(v, "value", v) for k, v in (metadata or {}).items()}
