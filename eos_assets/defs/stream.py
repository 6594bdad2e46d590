"""One declared stream as the definitions take it: its name, its keys and the specs of its tables.

Every asset of a stream is keyed ``<stream>/<layer>/<table>`` (so its lake path is
``<lake>/<stream>/<layer>/<table>``) and grouped ``<stream>_<layer>``; its sensor and checks are
named after it. Two streams therefore never share a Delta table, and the ``txn`` app ids, which
live in each table's own log, never meet.

``ORDERS`` is the shipped orders stream, read from its declaration (tests and tools that run
one stream's code without loading the definitions use it).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import dagster as dg

from eos_assets.declaration import (
    AlertRule,
    StreamModel,
    as_timedelta,
    read_declaration,
    seconds,
    sql_kpis,
)
from eos_assets.declared_resources import own_key, own_keys
from eos_assets.defs.resource_keys import renamed
from eos_assets.lib.checks.limits import Limits
from eos_assets.lib.contract.stream_shape import Contract, KpiSpec, WindowShape
from eos_assets.lib.derived.entity_state import EntitySpec
from eos_assets.lib.derived.kpi_sql import SqlKpi
from eos_assets.lib.derived.windows import WindowSpec
from eos_assets.lib.outbound.alert_rules import ABOVE, BELOW, Rule
from eos_assets.stream_specs import contract, entity_spec, kpi_specs, window_shape
from eos_assets.streams import declaration

BRONZE, SILVER, GOLD, SERVING, OUTBOUND = "bronze", "silver", "gold", "serving", "outbound"
CONTINUOUS = "continuous"  # the declared mode of a stream whose KPI path runs in one loop
# The kinds of a table Spark computes and commits to Delta.
SPARK_DELTA = {"spark", "delta"}


class _TableKey:
    """``stream.<table>``: the key ``<stream>/<layer>/<table>`` of one of the stream's tables."""

    def __init__(self, layer: str) -> None:
        self.layer = layer

    def __set_name__(self, owner: type, table: str) -> None:
        self.table = table

    def __get__(self, stream: "Stream", owner: type) -> dg.AssetKey:
        return stream.key(self.layer, self.table)


@dataclass(frozen=True)
class Stream:
    """A declared stream's name, topics, record contract, window shape and entity state."""

    name: str
    topics: tuple[str, ...]
    contract: Contract
    windows: WindowShape
    entity: EntitySpec | None
    # The KPI tables kept from the events (Delta tables, Spark-computed batch by batch).
    kpi_specs: tuple[KpiSpec, ...] = ()
    # The KPI tables Spark computes with their declared SQL over window_aggregates and
    # entity_state.
    sql_kpis: tuple[SqlKpi, ...] = ()
    # The KPIs served in DuckDB as ``<stream>.<kpi>``, and the alert rules over them.
    serve: tuple[str, ...] = ()
    alerts: tuple[Rule, ...] = ()
    # The declared thresholds (EOS_* variables override them) and window size and grace (a
    # run's config overrides them).
    limits: Limits = field(default_factory=Limits)
    window: WindowSpec = field(default_factory=WindowSpec)
    topic_pattern: str | None = None  # instead of ``topics``: every topic it matches
    # Where a partition never read starts: "earliest", "latest", or an ISO-8601 time.
    start: str = "earliest"
    # "sensor": the lag sensor launches a run per backlog; "continuous": one long-lived run
    # loops micro-batches along the path to the served KPIs (``defs/continuous.py``).
    mode: str = "sensor"
    # The resources it configures itself (``kafka``, ``lake``, ``warehouse``): its definitions
    # name them by its own keys, ``<key>__<stream>`` (``declared_resources``).
    own_resources: tuple[str, ...] = ()

    # The stream's tables and their layers: ``stream.events`` is ``<stream>/silver/events``.
    raw_events = _TableKey(BRONZE)
    events = _TableKey(SILVER)
    entity_state = _TableKey(SILVER)
    window_aggregates = _TableKey(GOLD)
    late_events = _TableKey(GOLD)
    kpis = _TableKey(SERVING)
    agg_out = _TableKey(OUTBOUND)
    kpi_alerts = _TableKey(OUTBOUND)

    @classmethod
    def of(cls, model: StreamModel) -> "Stream":
        """The specs of a checked declaration."""
        return cls(
            model.name,
            tuple(model.topics or ()),
            contract(model),
            window_shape(model),
            entity_spec(model),
            kpi_specs(model),
            sql_kpis(model, model.name),
            tuple(model.serve),
            tuple(_rule(name, rule) for name, rule in model.alerts.items()),
            Limits(
                malformed_max_rate=model.thresholds.malformed_max_rate,
                freshness_max_age_s=seconds(model.thresholds.freshness_max_age),
                lag_max_records=model.thresholds.lag_max_records,
                lag_max_age_s=seconds(model.thresholds.lag_max_age),
            ),
            WindowSpec(as_timedelta(model.windows.size), as_timedelta(model.windows.grace)),
            model.topic_pattern,
            model.start,
            model.mode,
            own_keys(model),
        )

    def key(self, layer: str, table: str) -> dg.AssetKey:
        """The key of one of the stream's tables: ``<stream>/<layer>/<table>``."""
        return dg.AssetKey([self.name, layer, table])

    def resource_key(self, key: str) -> str:
        """The key this stream's definitions bind for the resource every stream calls ``key``:
        its own (``lake__<stream>``) when it configures that resource itself."""
        return own_key(key, self.name) if key in self.own_resources else key

    def keyed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, whose resource parameters are named ``kafka``, ``lake``, ``warehouse`` ...,
        taking the resources of this stream's keys (for ``dg.asset``, ``dg.sensor`` ...)."""
        return renamed(fn, {key: self.resource_key(key) for key in self.own_resources})

    def group(self, layer: str) -> str:
        """The asset group of one of the stream's layers (the lineage page shows each)."""
        return f"{self.name}_{layer}"

    def spark_table(
        self, key: dg.AssetKey, deps: Sequence[dg.AssetKey], **options: Any
    ) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
        """``dg.asset`` for a Delta table Spark computes from ``deps``, in its layer's group,
        on the stream's resources; ``options`` are ``dg.asset``'s others."""
        asset = dg.asset(
            key=key, deps=deps, group_name=self.group(key.path[1]), kinds=SPARK_DELTA, **options
        )
        return lambda fn: asset(self.keyed(fn))

    def spark_tables(
        self, deps: Sequence[dg.AssetKey], descriptions: Mapping[dg.AssetKey, str]
    ) -> list[dg.AssetSpec]:
        """The specs of Delta tables Spark computes from ``deps``, each in its layer's group."""
        return [
            dg.AssetSpec(
                key,
                deps=deps,
                group_name=self.group(key.path[1]),
                kinds=SPARK_DELTA,
                description=description,
            )
            for key, description in descriptions.items()
        ]

    def kpi_key(self, kpi: str) -> dg.AssetKey:
        """The key of a KPI table: ``<stream>/gold/<kpi>``."""
        return self.key(GOLD, kpi)

    def distinct_key(self, kpi: str) -> dg.AssetKey:
        """The key of the distinct values behind a KPI's ``count_distinct`` measures."""
        return self.key(GOLD, f"{kpi}_distinct")

    @property
    def served_specs(self) -> tuple[KpiSpec, ...]:
        """The KPI tables kept from the events that are served in DuckDB."""
        return tuple(spec for spec in self.kpi_specs if spec.name in self.serve)

    @property
    def sql_serving(self) -> dg.AssetKey:
        """``<stream>/serving/sql_kpis``: the served SQL KPI tables."""
        return self.key(SERVING, "sql_kpis")

    @property
    def served_sql(self) -> tuple[SqlKpi, ...]:
        """The SQL KPI tables that are served in DuckDB."""
        return tuple(kpi for kpi in self.sql_kpis if kpi.name in self.serve)

    @property
    def loop_keys(self) -> list[dg.AssetKey]:
        """What a continuous run of the stream materializes: bronze, silver, the entity state,
        the windows and late events, the KPI tables (and distinct values), and serving."""
        keys = [self.raw_events, self.events]
        if self.entity is not None:
            keys.append(self.entity_state)
        keys += [self.window_aggregates, self.late_events]
        for spec in self.kpi_specs:
            keys.append(self.kpi_key(spec.name))
            if spec.distinct:
                keys.append(self.distinct_key(spec.name))
        keys += [self.kpi_key(kpi.name) for kpi in self.sql_kpis]
        if self.served_specs:
            keys.append(self.kpis)
        if self.served_sql:
            keys.append(self.sql_serving)
        return keys

    @property
    def continuous(self) -> bool:
        """Whether one long-lived run loops the stream's path to its served KPIs."""
        return self.mode == CONTINUOUS

    def named(self, what: str) -> str:
        """The name of one of the stream's sensors: ``<stream>_<what>``."""
        return f"{self.name}_{what}"


def _rule(name: str, rule: AlertRule) -> Rule:
    if rule.below is not None:
        return Rule(name, rule.kpi, rule.metric, BELOW, rule.below)
    return Rule(name, rule.kpi, rule.metric, ABOVE, rule.above or 0.0)


@cache
def _orders() -> Stream:
    return Stream.of(read_declaration(declaration("orders")))


def __getattr__(name: str) -> Stream:
    """``ORDERS``, read from its declaration when first asked for, not when this module is
    imported: a wrong declaration then fails where the definitions load, as one line."""
    if name == "ORDERS":
        return _orders()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
