"""The shape of one declared stream, as plain frozen specs the exactly-once code takes.

``lib`` knows no YAML and no stream by name: a declaration (``eos_assets/declaration.py``) is
turned into these specs by ``components/specs.py``, and every table's code reads the field
names, types and measures from them. The specs are small frozen dataclasses, so they pickle
into Spark tasks (classic or Spark Connect) unchanged.

Column layout every stream shares (the payload fields go in the middle, in declared order):

- bronze: ``topic, partition, offset, kafka_timestamp, key, value, event_id, event_time,
  <payload>, schema_version, error``;
- the event id and time are read from the declared JSON fields (``Contract.id_field``,
  ``Contract.time_field``) and land in the columns ``event_id`` and ``event_time`` whatever the
  JSON calls them.
"""

from dataclasses import dataclass

# Payload field types (the declaration's ``FieldType`` values).
STRING, LONG, DOUBLE, BOOLEAN, TIMESTAMP = "string", "long", "double", "boolean", "timestamp"
FIELD_TYPES = (STRING, LONG, DOUBLE, BOOLEAN, TIMESTAMP)
# How the event time is written (the declaration's ``TimeFormat`` values).
ISO8601, EPOCH_MILLIS, EPOCH_SECONDS = "iso8601", "epoch_millis", "epoch_seconds"
# How a stream's values are encoded (the declaration's ``ValueFormat`` values).
JSON, AVRO = "json", "avro"
TIME_FORMATS = (ISO8601, EPOCH_MILLIS, EPOCH_SECONDS)
# Window aggregates (the declaration's ``Aggregate`` values).
COUNT, COUNT_DISTINCT, SUM, MIN, MAX = "count", "count_distinct", "sum", "min", "max"
AGGREGATES = (COUNT, COUNT_DISTINCT, SUM, MIN, MAX)


@dataclass(frozen=True)
class PayloadField:
    """One declared field of the JSON value.

    ``required``: a record without a valid value is malformed. ``values``: for a string, the
    only values allowed (any other makes the record malformed).
    """

    name: str
    type: str
    required: bool = False
    values: tuple[str, ...] | None = None
    path: str | None = None  # an avro stream's field of the record, when not ``name``

    @property
    def key(self) -> str:
        """What the field is read from: its JSON key, or its path in an avro record."""
        return self.path or self.name


@dataclass(frozen=True)
class Contract:
    """What a record of the stream must hold: id and time fields, and the payload fields."""

    id_field: str
    time_field: str
    time_format: str
    fields: tuple[PayloadField, ...]
    format: str = JSON  # how the values are encoded: json, or avro framed by a schema registry

    @property
    def registry(self) -> bool:
        """Whether the values are framed by a schema registry (each with its schema id)."""
        return self.format != JSON

    @property
    def names(self) -> tuple[str, ...]:
        """The payload columns, in declared order."""
        return tuple(f.name for f in self.fields)

    @property
    def epoch_time(self) -> bool:
        """Whether the event time is written as a number (epoch milliseconds or seconds)."""
        return self.time_format != ISO8601

    def field(self, name: str) -> PayloadField:
        """The payload field called ``name``.

        Raises:
            KeyError: the contract declares no such field.
        """
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


@dataclass(frozen=True)
class Measure:
    """One measure of a window: ``agg`` over the payload field ``of`` (none for count)."""

    name: str
    agg: str
    of: str | None = None


@dataclass(frozen=True)
class WindowShape:
    """What each event-time window of the stream groups by and computes."""

    dimensions: tuple[str, ...]
    measures: tuple[Measure, ...]


# The time key of a declared KPI table (``KpiSpec.time``).
WINDOW, DAY = "window", "day"


@dataclass(frozen=True)
class KpiMeasure:
    """One column of a declared KPI table: an aggregate or a formula over earlier measures.

    ``agg`` (one of ``AGGREGATES``) over the payload field ``of`` (none for count), counting
    only the events whose fields equal ``when`` (``(field, value)`` pairs); or ``formula``:
    arithmetic over measures declared before it (``lib/derived/kpi_formula.py``).
    """

    name: str
    agg: str | None = None
    of: str | None = None
    when: tuple[tuple[str, str], ...] = ()
    formula: str | None = None


@dataclass(frozen=True)
class KpiSpec:
    """A declared KPI table: its time key, the fields it groups by, its measures.

    ``time``: ``WINDOW`` (columns ``window_start``, ``window_end``; ``size_us`` long, aligned
    on the epoch), ``DAY`` (column ``day``, the UTC date) or None (all time). ``by``: string
    payload fields; a missing value groups under ``""``.
    """

    name: str
    time: str | None
    by: tuple[str, ...]
    measures: tuple[KpiMeasure, ...]
    size_us: int | None = None

    @property
    def time_column(self) -> str | None:
        """The time key column (None without a time key)."""
        return {WINDOW: "window_start", DAY: "day"}.get(self.time or "")

    @property
    def key(self) -> tuple[str, ...]:
        """The columns identifying a row: the time key column (if any), then ``by``."""
        column = self.time_column
        return (column, *self.by) if column else self.by

    @property
    def distinct(self) -> tuple[KpiMeasure, ...]:
        """The ``count_distinct`` measures (kept exact through a table of values)."""
        return tuple(m for m in self.measures if m.agg == COUNT_DISTINCT)
