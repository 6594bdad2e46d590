"""What a stream declaration says, and the rules it must keep (DESIGN.md, "Declared streams").

A declaration is one ``defs.yaml`` of the ``EventStream`` component (``components/``). This
module holds its model (pydantic models that Dagster resolves from YAML: the component's schema
in the UI is this model, descriptions included), and ``check`` turns every way a declaration
can be wrong into one ``DeclarationError`` line naming the file, the field and the fix. Checks
that need more than the declaration (KPI SQL against the tables it names, two streams sharing
a table) are here too, so that a bad declaration fails when the definitions load, never during
a run.
"""

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, NoReturn

import dagster as dg
import duckdb
import yaml
from pydantic import ConfigDict, Field, ValidationError

from eos_assets.declared_resources import (
    StreamKafka,
    StreamLake,
    StreamWarehouse,
    check_own,
    check_store,
    topic_home,
)
from eos_assets.lib.derived.kpi_formula import check_formula
from eos_assets.lib.derived.kpi_sql import SqlKpi, Untranslatable, translate
from eos_assets.lib.errors import EosError

DECLARATION = "defs.yaml"
TYPE = "eos_assets.components.EventStream"
NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
# Columns every stream's tables carry whatever the declaration says; a payload field of the
# same name would be ambiguous.
BRONZE_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "kafka_timestamp",
    "key",
    "value",
    "event_id",
    "event_time",
    "schema_version",
    "error",
)
# Columns every entity table has: the latest event's ordering key and id, the silver version.
ENTITY_LAST_TIME = "last_event_time"
ENTITY_COLUMNS = (
    ENTITY_LAST_TIME,
    "last_event_id",
    "last_topic",
    "last_partition",
    "last_offset",
    "silver_version",
)
# The key and bookkeeping columns a KPI table kept from the events may have besides its
# ``by`` fields and measures, and the names of the stream's other tables.
KPI_KEY_COLUMNS = ("window_start", "window_end", "day")
KPI_COLUMNS = ("revision", "silver_version")
STREAM_TABLES = (
    "raw_events",
    "events",
    "entity_state",
    "window_aggregates",
    "late_events",
    "kpis",
    "agg_out",
    "kpi_alerts",
)
WINDOW_COLUMNS = (
    "window_start",
    "window_end",
    "late_events",
    "revision",
    "is_final",
    "watermark",
)


class DeclarationError(EosError):
    """A stream declaration is wrong; the message names the file, the field and the fix."""

    def __init__(self, source: str, field: str, problem: str, fix: str) -> None:
        super().__init__(f"{source}: {field}: {problem}: {fix}")
        self.source, self.field, self.problem, self.fix = source, field, problem, fix

    def __reduce__(self) -> tuple[type, tuple[str, str, str, str]]:
        return type(self), (self.source, self.field, self.problem, self.fix)


class FieldType(StrEnum):
    """Types a payload field may declare, with the Delta/Spark type each becomes."""

    STRING = "string"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    TIMESTAMP = "timestamp"


class ValueFormat(StrEnum):
    """How a stream's Kafka values are encoded."""

    JSON = "json"  # a JSON object
    AVRO = "avro"  # Avro framed by a schema registry (a magic byte 0, the schema id, the record)


class TimeFormat(StrEnum):
    """How the event-time field is written in the JSON value."""

    ISO8601 = "iso8601"  # a string with seconds and a zone
    EPOCH_MILLIS = "epoch_millis"  # an integral number
    EPOCH_SECONDS = "epoch_seconds"  # a number, fractions allowed


class Fold(StrEnum):
    """How an entity's field folds its events: every fold is a commutative merge."""

    LATEST = "latest"  # the value of the entity's latest event (event time, then offset)
    SUM = "sum"
    COUNT = "count"
    MIN = "min"
    MAX = "max"
    FIRST_TIME = "first_time"  # the earliest event time
    LAST_TIME = "last_time"  # the latest event time


class Aggregate(StrEnum):
    """How a window measure aggregates the window's events."""

    COUNT = "count"
    COUNT_DISTINCT = "count_distinct"
    SUM = "sum"
    MIN = "min"
    MAX = "max"


_NUMERIC = {FieldType.LONG, FieldType.DOUBLE}
_DUCKDB_TYPES = {
    FieldType.STRING: "VARCHAR",
    FieldType.LONG: "BIGINT",
    FieldType.DOUBLE: "DOUBLE",
    FieldType.BOOLEAN: "BOOLEAN",
    FieldType.TIMESTAMP: "TIMESTAMPTZ",
}


class _Strict(dg.Model, dg.Resolvable):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PayloadField(_Strict):
    """One field of the JSON value."""

    type: FieldType = Field(description="string, long, double, boolean or timestamp")
    required: bool = Field(
        default=False,
        description="A record without a valid value is malformed (kept in bronze with the "
        "reason, never in silver). Optional fields are null when absent or invalid.",
    )
    values: list[str] | None = Field(
        default=None,
        description="For a string: the only values allowed; any other makes the record malformed.",
    )
    path: str | None = Field(
        default=None,
        description="For an avro stream: the field of the record read into this column, names "
        "joined by dots (customer.id); default the column's name",
    )


class EventIdField(_Strict):
    """Where the event's unique id is: the key of deduplication."""

    field: str = Field(
        description="name of the JSON field holding a non-empty string id (an avro stream: a "
        "field of the record, names joined by dots for a nested one)"
    )


class EventTimeField(_Strict):
    """Where the event's time is: the time windows and freshness follow."""

    field: str = Field(description="name of the JSON field holding the event time")
    format: TimeFormat = Field(
        default=TimeFormat.ISO8601,
        description="iso8601 (string with seconds and a zone), epoch_millis or epoch_seconds",
    )


class EntityField(_Strict):
    """One column of the entity state and how it folds."""

    fold: Fold = Field(
        description="latest, sum, count, min, max, first_time or last_time",
    )
    of: str | None = Field(
        default=None,
        description="the payload field folded (none for count, first_time, last_time); "
        "defaults to the column's own name for latest, sum, min and max",
    )
    when: dict[str, str] | None = Field(
        default=None,
        description="fold only events whose fields equal these values, e.g. "
        "{event_type: order_paid}",
    )
    strip_prefix: str | None = Field(
        default=None, description="for latest of a string: this prefix is removed"
    )


class Entity(_Strict):
    """The state of each entity, folded from its events (a table keyed by ``key``)."""

    key: str = Field(
        description="the payload field naming the entity; events without it have no state"
    )
    fields: dict[str, EntityField] = Field(description="the state's columns, by name")


class Measure(_Strict):
    """One measure of a window."""

    agg: Aggregate = Field(description="count, count_distinct, sum, min or max")
    of: str | None = Field(default=None, description="the payload field (none for count)")


class Windows(_Strict):
    """Event-time tumbling windows with a grace period for late events."""

    size: str = Field(default="5m", description="window length, e.g. 5m, 1h")
    grace: str = Field(
        default="10m",
        description="how long after a window ends its events still count as on time; later "
        "events restate the window (a new revision), never dropped",
    )
    dimensions: list[str] = Field(default_factory=list, description="payload fields to group by")
    measures: dict[str, Measure] = Field(description="the window's measures, by name")


class KpiMeasure(_Strict):
    """One column of a KPI table kept from the events: an aggregate or a formula."""

    agg: Aggregate | None = Field(
        default=None, description="count, count_distinct (exact), sum, min or max"
    )
    of: str | None = Field(default=None, description="the payload field (none for count)")
    when: dict[str, str] | None = Field(
        default=None,
        description="only events whose fields have these values, e.g. {event_type: order_paid}",
    )
    formula: str | None = Field(
        default=None,
        description="or arithmetic over measures declared before it: names, numbers, + - * / "
        "and parentheses; a null operand or a division by zero gives null",
    )


class Kpi(_Strict):
    """One KPI table: measures of the events per time period and fields (a Delta table Spark
    keeps batch by batch), or SQL over ``window_aggregates`` and ``entity_state``."""

    time: str | None = Field(
        default=None,
        description="the period of a row: a duration (e.g. 5m, 1h: columns window_start and "
        "window_end, UTC, aligned on the epoch), day (column day, the UTC date), or none (one "
        "row per by value over all time)",
    )
    by: list[str] = Field(
        default_factory=list, description="string payload fields to group by (missing: '')"
    )
    measures: dict[str, KpiMeasure] = Field(
        default_factory=dict, description="the table's measures, by name, in column order"
    )
    sql: str | None = Field(
        default=None,
        description="instead of time, by and measures: a SELECT over the tables "
        "window_aggregates and entity_state (DuckDB SQL)",
    )


class AlertRule(_Strict):
    """An alert raised once per final row of a served KPI whose metric crosses a threshold."""

    kpi: str = Field(description="a served KPI with time and measures")
    metric: str = Field(description="one of the KPI's measures")
    below: float | None = Field(default=None, description="alert when the metric is below this")
    above: float | None = Field(default=None, description="or when it is above this")


class Thresholds(_Strict):
    """What counts as healthy for this stream."""

    lag_max_records: int = Field(
        default=10_000, gt=0, description="the lag sensor launches an ingest at this lag"
    )
    lag_max_age: str = Field(
        default="60s", description="... or when the oldest unread record is this old"
    )
    freshness_max_age: str = Field(
        default="15m", description="the freshness check warns past this age"
    )
    malformed_max_rate: float = Field(
        default=0.01, gt=0, le=1, description="the malformed-rate check warns above this share"
    )


class StreamModel(_Strict):
    """One event stream: its topics, the shape of its events, and what is computed from them."""

    name: str = Field(
        description="the stream's name: lower case, digits and _; it prefixes its assets, "
        "lake paths, checks, sensor and schedules"
    )
    topics: list[str] | None = Field(default=None, description="the topics, by name")
    topic_pattern: str | None = Field(
        default=None, description="or a regular expression over topic names (not both)"
    )
    start: str = Field(
        default="earliest",
        description="where a partition never read starts: earliest, latest, or an ISO-8601 "
        "time (the first offset at or after it)",
    )
    format: ValueFormat = Field(
        default=ValueFormat.JSON,
        description="json: each value is a JSON object; avro: an Avro record framed by the "
        "schema registry of EOS_SCHEMA_REGISTRY_URL, read with its own writer's schema",
    )
    event_id: EventIdField
    event_time: EventTimeField
    payload: dict[str, PayloadField] = Field(
        description="the JSON fields kept as columns, by name; fields not named stay in the "
        "raw value"
    )
    entity: Entity | None = Field(default=None, description="optional state per entity")
    windows: Windows
    kpis: dict[str, Kpi] = Field(default_factory=dict, description="KPI tables, by name")
    serve: list[str] = Field(
        default_factory=list, description="the KPI tables copied into DuckDB for serving"
    )
    alerts: dict[str, AlertRule] = Field(
        default_factory=dict,
        description="alert rules over final rows of served KPIs, by name; delivered to "
        "EOS_ALERT_URL with an idempotency key",
    )
    thresholds: Thresholds = Field(default_factory=Thresholds)
    mode: Literal["sensor", "continuous"] = Field(
        default="sensor",
        description="sensor: the lag sensor launches a run per backlog; continuous: one "
        "long-lived run loops micro-batches from Kafka to the served KPIs (seconds, not tens "
        "of seconds; it holds a run process and a Spark session)",
    )
    kafka: StreamKafka | None = Field(
        default=None,
        description="this stream's own Kafka cluster, in place of the environment's "
        "(EOS_KAFKA_*) for this stream only",
    )
    lake: StreamLake | None = Field(
        default=None, description="this stream's own lake root, in place of EOS_LAKE_ROOT"
    )
    warehouse: StreamWarehouse | None = Field(
        default=None,
        description="this stream's own DuckDB serving database, in place of EOS_WAREHOUSE",
    )


def seconds(text: str) -> float:
    """A duration such as ``90s``, ``5m`` or ``1h`` in seconds.

    Raises:
        ValueError: not a whole number followed by ms, s, m, h or d.
    """
    match = DURATION.match(text.strip())
    if not match:
        raise ValueError(text)
    return int(match.group(1)) * _UNITS[match.group(2)]


def start_time(start: str) -> datetime | None:
    """The time of a ``start`` that names one (None for earliest/latest).

    Raises:
        ValueError: neither earliest, latest nor an ISO-8601 time with a zone.
    """
    if start in ("earliest", "latest"):
        return None
    parsed = datetime.fromisoformat(start)
    if parsed.tzinfo is None:
        raise ValueError(start)
    return parsed.astimezone(UTC)


def check(model: StreamModel, source: str) -> None:
    """Check everything a declaration says on its own.

    Args:
        model: the declaration.
        source: the file it came from, as the errors name it.

    Raises:
        DeclarationError: the first problem, in the order of the fields.
    """

    def fail(field: str, problem: str, fix: str) -> NoReturn:
        raise DeclarationError(source, field, problem, fix)

    if not NAME.match(model.name):
        fail("name", f"{model.name!r} is not a valid stream name", "use lower case, digits and _")
    if bool(model.topics) == bool(model.topic_pattern):
        fail("topics", "give topics or topic_pattern", "set exactly one of the two")
    if model.topic_pattern:
        try:
            re.compile(model.topic_pattern)
        except re.error as exc:
            fail("topic_pattern", f"not a regular expression ({exc})", "fix the pattern")
    try:
        start_time(model.start)
    except ValueError:
        fail(
            "start",
            f"{model.start!r} is not earliest, latest or a time",
            "write earliest, latest or an ISO-8601 time with a zone",
        )
    fields = model.payload
    for name in fields:
        if name in BRONZE_COLUMNS:
            fail(f"payload.{name}", "is a column every stream has", "rename the field")
    for name, spec in fields.items():
        if spec.values is not None and spec.type != FieldType.STRING:
            fail(f"payload.{name}.values", "only a string field lists values", "remove values")
        if spec.path is not None and model.format == ValueFormat.JSON:
            fail(
                f"payload.{name}.path",
                "reads a field of an avro record",
                "remove it (a json stream reads the top-level key of the column's name) or "
                "declare format: avro",
            )
        if spec.path is not None and not all(spec.path.split(".")):
            fail(
                f"payload.{name}.path",
                f"{spec.path!r} is not field names joined by dots",
                "write e.g. customer.id",
            )
    if model.format == ValueFormat.AVRO and "schema_id" in fields:
        fail("payload.schema_id", "is a column every avro stream has", "rename the field")
    _check_reserved(model, fail)

    def known(field: str, where: str, numeric: bool = False) -> None:
        if field not in fields:
            fail(
                where,
                f"{field!r} is not a payload field",
                "declare it under payload or fix the name",
            )
        if numeric and fields[field].type not in _NUMERIC:
            fail(
                where, f"{field!r} is a {fields[field].type}", "fold or sum a long or double field"
            )

    for key, duration in (
        ("windows.size", model.windows.size),
        ("windows.grace", model.windows.grace),
        ("thresholds.lag_max_age", model.thresholds.lag_max_age),
        ("thresholds.freshness_max_age", model.thresholds.freshness_max_age),
    ):
        try:
            value = seconds(duration)
        except ValueError:
            fail(
                key,
                f"{duration!r} is not a duration",
                "write a whole number and a unit: 90s, 5m, 1h",
            )
        if key == "windows.size" and (value < 1 or value % 1):
            fail(key, f"{duration!r} is not a whole number of seconds", "use at least 1s")
    for i, dimension in enumerate(model.windows.dimensions):
        known(dimension, f"windows.dimensions[{i}]")
        if fields[dimension].type != FieldType.STRING:
            fail(
                f"windows.dimensions[{i}]",
                f"{dimension!r} is a {fields[dimension].type}",
                "group windows by string fields only (a missing one groups under '')",
            )
    if not model.windows.measures:
        fail("windows.measures", "no measure", "declare at least one, e.g. events: {agg: count}")
    for name, measure in model.windows.measures.items():
        where = f"windows.measures.{name}"
        if name in WINDOW_COLUMNS or name in model.windows.dimensions:
            fail(where, "is also a column of the window table", "rename the measure")
        if measure.agg == Aggregate.COUNT:
            if measure.of is not None:
                fail(f"{where}.of", "count takes no field", "remove of, or use count_distinct")
            continue
        if measure.of is None:
            fail(f"{where}.of", f"{measure.agg} needs a field", "name a payload field in of")
        known(measure.of, f"{where}.of", numeric=measure.agg == Aggregate.SUM)
    if model.entity is not None:
        _check_entity(model.entity, fields, known, fail)
    for name, kpi in model.kpis.items():
        if not NAME.match(name):
            fail(f"kpis.{name}", "is not a valid table name", "use lower case, digits and _")
        if name in STREAM_TABLES:
            fail(f"kpis.{name}", "is the name of another table of the stream", "rename the KPI")
        _check_kpi(model, f"kpis.{name}", kpi, known, fail)
    for i, table in enumerate(model.serve):
        if table not in model.kpis:
            fail(f"serve[{i}]", f"{table!r} is not a KPI of this stream", "name one of kpis")
    for name, rule in model.alerts.items():
        _check_alert(model, name, rule, fail)
    check_own(model, model.name, fail)


def check_placement(model: StreamModel, source: str, project_lake: str) -> None:
    """Check what a stream declares about where it runs against the project's settings:
    its own lake is on the store of the project's lake (``project_lake``).

    Raises:
        DeclarationError: it is not.
    """

    def fail(field: str, problem: str, fix: str) -> NoReturn:
        raise DeclarationError(source, field, problem, fix)

    check_store(model, project_lake, fail)


def kpi_time(text: str | None) -> str | None:
    """A KPI's declared ``time`` checked: None, ``day`` or a duration of whole seconds.

    Raises:
        ValueError: none of these.
    """
    if text is None or text == "day":
        return text
    value = seconds(text)
    if value < 1 or value % 1:
        raise ValueError(text)
    return text


def _check_kpi(model: StreamModel, where: str, kpi: Kpi, known: Any, fail: Any) -> None:
    """A KPI is SQL, or a time key, ``by`` fields and measures over the events."""
    if kpi.sql is not None:
        if kpi.measures or kpi.by or kpi.time is not None:
            fail(where, "has both sql and measures", "declare sql, or time, by and measures")
        return
    if not kpi.measures:
        fail(f"{where}.measures", "no measure and no sql", "declare measures, or sql")
    try:
        kpi_time(kpi.time)
    except ValueError:
        fail(f"{where}.time", f"{kpi.time!r} is not a period", "write day or a duration: 5m, 1h")
    if kpi.time is None and not kpi.by:
        fail(where, "has neither time nor by", "declare a time (5m, 1h, day) or by fields")
    for i, field in enumerate(kpi.by):
        known(field, f"{where}.by[{i}]")
        if model.payload[field].type != FieldType.STRING:
            fail(f"{where}.by[{i}]", f"{field!r} is a {model.payload[field].type}",
                 "group by string fields only (a missing one groups under '')")  # fmt: skip
    columns = {*KPI_KEY_COLUMNS, *KPI_COLUMNS, *kpi.by}
    before: list[str] = []
    for name, measure in kpi.measures.items():
        at = f"{where}.measures.{name}"
        if name in columns:
            fail(at, "is also a key or bookkeeping column of the KPI", "rename the measure")
        if (measure.formula is None) == (measure.agg is None):
            fail(at, "needs agg or formula", "declare exactly one of agg and formula")
        if measure.formula is not None:
            if measure.of is not None or measure.when:
                fail(at, "a formula takes no of or when", "remove them")
            problem = check_formula(measure.formula, before)
            if problem is not None:
                fail(f"{at}.formula", problem, "use the measures declared above it")
        elif measure.agg == Aggregate.COUNT:
            if measure.of is not None:
                fail(f"{at}.of", "count takes no field", "remove of, or use count_distinct")
        elif measure.of is None:
            fail(f"{at}.of", f"{measure.agg} needs a field", "name a payload field in of")
        else:
            known(measure.of, f"{at}.of", numeric=measure.agg == Aggregate.SUM)
        for field, value in (measure.when or {}).items():
            known(field, f"{at}.when")
            listed = model.payload[field].values
            if listed is not None and value not in listed:
                fail(f"{at}.when.{field}", f"{value!r} is not one of its values",
                     f"use one of {', '.join(listed)}")  # fmt: skip
        before.append(name)


def _check_alert(model: StreamModel, name: str, rule: AlertRule, fail: Any) -> None:
    """An alert rule names a served KPI kept from the events, one measure and one bound."""
    where = f"alerts.{name}"
    if not NAME.match(name):
        fail(where, "is not a valid rule name", "use lower case, digits and _")
    kpi = model.kpis.get(rule.kpi)
    if kpi is None or rule.kpi not in model.serve:
        fail(f"{where}.kpi", f"{rule.kpi!r} is not a served KPI", "name one listed in serve")
    assert kpi is not None  # fail raised
    if kpi.sql is not None or kpi.time is None:
        fail(f"{where}.kpi", f"{rule.kpi!r} has no time periods to be final",
             "alert on a KPI declared with time and measures")  # fmt: skip
    if rule.metric not in kpi.measures:
        fail(f"{where}.metric", f"{rule.metric!r} is not a measure of {rule.kpi}",
             f"name one of {', '.join(kpi.measures)}")  # fmt: skip
    if (rule.below is None) == (rule.above is None):
        fail(where, "needs one bound", "declare exactly one of below and above")


def _check_reserved(model: StreamModel, fail: Any) -> None:
    """The id and time fields are taken out of the payload; they must not be declared twice."""
    for where, name in (
        ("event_id.field", model.event_id.field),
        ("event_time.field", model.event_time.field),
    ):
        if not name:
            fail(where, "is empty", "name the JSON field")
        if name in model.payload:
            fail(where, f"{name!r} is also declared under payload", "remove it from payload")


def _check_entity(entity: Entity, fields: dict[str, PayloadField], known: Any, fail: Any) -> None:
    known(entity.key, "entity.key")
    if fields[entity.key].type not in (FieldType.STRING, FieldType.LONG):
        fail(
            "entity.key",
            f"{entity.key!r} is a {fields[entity.key].type}",
            "key by a string or long",
        )
    if not entity.fields:
        fail("entity.fields", "no field", "declare at least one, e.g. events: {fold: count}")
    for name, spec in entity.fields.items():
        where = f"entity.fields.{name}"
        if name == entity.key:
            fail(where, "is the entity key", "rename the field")
        if name == ENTITY_LAST_TIME:
            if spec.fold != Fold.LAST_TIME or spec.when:
                fail(where, "is the latest event's time column", "declare it as {fold: last_time}")
        elif name in ENTITY_COLUMNS:
            fail(where, "is a column every entity table has", "rename the field")
        if spec.fold == Fold.LATEST and spec.when:
            fail(f"{where}.when", "latest folds every event", "remove when")
        source = spec.of
        if spec.fold in (Fold.COUNT, Fold.FIRST_TIME, Fold.LAST_TIME):
            if source is not None:
                fail(f"{where}.of", f"{spec.fold} takes no field", "remove of")
        else:
            known(source or name, f"{where}.of", numeric=spec.fold == Fold.SUM)
        if spec.strip_prefix is not None and spec.fold != Fold.LATEST:
            fail(f"{where}.strip_prefix", "only latest strips a prefix", "remove strip_prefix")
        for field in spec.when or {}:
            known(field, f"{where}.when")


def window_columns(model: StreamModel) -> dict[str, str]:
    """The columns of the stream's window table, with their DuckDB types."""
    columns = {"window_start": "TIMESTAMPTZ", "window_end": "TIMESTAMPTZ"}
    for dimension in model.windows.dimensions:
        columns[dimension] = _DUCKDB_TYPES[model.payload[dimension].type]
    for name, measure in model.windows.measures.items():
        if measure.agg in (Aggregate.COUNT, Aggregate.COUNT_DISTINCT):
            columns[name] = "BIGINT"
        else:
            columns[name] = _DUCKDB_TYPES[model.payload[measure.of or ""].type]
    columns.update(
        late_events="BIGINT", revision="BIGINT", is_final="BOOLEAN", watermark="TIMESTAMPTZ"
    )
    return columns


def entity_columns(model: StreamModel) -> dict[str, str]:
    """The columns of the stream's entity table, with their DuckDB types (none without one)."""
    entity = model.entity
    if entity is None:
        return {}
    columns = {entity.key: _DUCKDB_TYPES[model.payload[entity.key].type]}
    for name, spec in entity.fields.items():
        if spec.fold == Fold.COUNT:
            columns[name] = "BIGINT"
        elif spec.fold in (Fold.FIRST_TIME, Fold.LAST_TIME):
            columns[name] = "TIMESTAMPTZ"
        else:
            columns[name] = _DUCKDB_TYPES[model.payload[spec.of or name].type]
    return columns


def check_kpis(model: StreamModel, source: str) -> None:
    """Check that each KPI's SQL parses, names only columns the two tables have, and has a
    Spark translation (``sql_kpis``)."""
    sql_kpis(model, source)


def sql_kpis(model: StreamModel, source: str) -> tuple[SqlKpi, ...]:
    """The stream's SQL KPIs, bound and translated to Spark SQL.

    The SQL is bound by DuckDB against empty tables of the window and entity columns (its
    output columns keep DuckDB's names), then translated (``lib/derived/kpi_sql.py``), so a
    typo or a construct Spark cannot run fails here, when the definitions load, and not in
    the first run.

    Raises:
        DeclarationError: the first KPI that does not parse, bind or translate.
    """
    declared = {name: kpi.sql for name, kpi in model.kpis.items() if kpi.sql is not None}
    if not declared:
        return ()
    translated = []
    with duckdb.connect(":memory:") as con:
        for table, columns in (
            ("window_aggregates", window_columns(model)),
            ("entity_state", entity_columns(model)),
        ):
            if columns:
                body = ", ".join(f'"{c}" {t}' for c, t in columns.items())
                con.execute(f"CREATE TABLE {table} ({body})")
        for name, sql in declared.items():
            where = f"kpis.{name}.sql"
            try:
                described = con.execute(f"DESCRIBE {sql.strip().rstrip(';')}").fetchall()
            except duckdb.Error as exc:
                problem = str(exc).splitlines()[0]
                fail_fix = (
                    "write a SELECT over window_aggregates"
                    + (" and entity_state" if model.entity else "")
                    + " with their declared columns"
                )
                raise DeclarationError(source, where, problem, fail_fix) from None
            try:
                translated.append(translate(name, sql, tuple(str(row[0]) for row in described)))
            except Untranslatable as exc:
                raise DeclarationError(
                    source, where, exc.construct + " has no Spark translation", exc.fix
                ) from None
    return tuple(translated)


def check_together(streams: Sequence[tuple[StreamModel, str]]) -> None:
    """Check what no two streams may share: a name (and so a table or ``txn`` app id).

    Raises:
        DeclarationError: two declarations share a name, or a topic of one cluster.
    """
    seen: dict[str, str] = {}
    # By cluster as declared: one topic name on two declared clusters is two topics.
    topics: dict[tuple[str, str], str] = {}
    for model, source in streams:
        if model.name in seen:
            raise DeclarationError(
                source,
                "name",
                f"stream {model.name!r} is also declared in {seen[model.name]}, so both would "
                "write its tables",
                "give each stream its own name",
            )
        seen[model.name] = source
        for topic in model.topics or ():
            home = (topic_home(model), topic)
            if home in topics:
                raise DeclarationError(
                    source,
                    "topics",
                    f"topic {topic!r} is also read by {topics[home]}",
                    "read each topic in one stream",
                )
            topics[home] = source


def unmatched_pattern(model: StreamModel, existing: Iterable[str]) -> str | None:
    """A warning when the stream's topic pattern matches none of ``existing`` topics."""
    if not model.topic_pattern:
        return None
    pattern = re.compile(model.topic_pattern)
    if any(pattern.fullmatch(t) for t in existing):
        return None
    return (
        f"stream {model.name!r}: topic_pattern {model.topic_pattern!r} matches no topic yet; "
        "the stream reads topics that match once they exist"
    )


def describe(path: Path, root: Path) -> str:
    """How errors name a declaration file: relative to the project when inside it."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def as_timedelta(text: str) -> timedelta:
    """A declared duration as a timedelta."""
    return timedelta(seconds=seconds(text))


def read_declaration(path: Path) -> StreamModel:
    """The stream a declaration file declares, checked on its own (for tools and tests that
    run one stream's code without loading the definitions).

    Raises:
        DeclarationError: the declaration is wrong.
    """
    source = describe(path, Path(__file__).parent.parent)
    model = precheck(path, source)
    check(model, source)
    return model


def precheck(path: Path, source: str) -> StreamModel:
    """Read one declaration file and validate it against the model.

    Raises:
        DeclarationError: not YAML, another component type, or a field the model refuses.
    """
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(file)"
        raise DeclarationError(source, where, "not valid YAML", "fix the syntax") from None
    if not isinstance(document, dict):
        raise DeclarationError(source, "(file)", "not a mapping", f"start with type: {TYPE}")
    if document.get("type") != TYPE:
        raise DeclarationError(
            source, "type", f"unknown type {document.get('type')!r}", f"set type: {TYPE}"
        )
    try:
        return StreamModel.model_validate(document.get("attributes") or {})
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        fix = _FIXES.get(error["type"], "fix the value")
        if field == "kafka.sasl_password":
            fix = "put it in an environment variable and name that in kafka.sasl_password_env"
        raise DeclarationError(source, field, error["msg"].lower(), fix) from None


_FIXES = {
    "missing": 'add it (README, "Declared streams", lists every field)',
    "extra_forbidden": "remove it or fix its spelling",
    "enum": "use one of the values listed",
}
