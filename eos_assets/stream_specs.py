"""A declaration as the plain specs the exactly-once code takes (``lib`` knows no YAML)."""

import pyarrow as pa

from eos_assets.declaration import FieldType, Fold, StreamModel, seconds
from eos_assets.lib.contract.schema_time import UTC_MICROS
from eos_assets.lib.contract.stream_shape import (
    DAY,
    WINDOW,
    Contract,
    KpiMeasure,
    KpiSpec,
    Measure,
    PayloadField,
    WindowShape,
)
from eos_assets.lib.derived.entity_state import EntitySpec
from eos_assets.lib.derived.entity_state import Fold as FoldSpec

ARROW_TYPES = {
    FieldType.STRING: pa.string(),
    FieldType.LONG: pa.int64(),
    FieldType.DOUBLE: pa.float64(),
    FieldType.BOOLEAN: pa.bool_(),
    FieldType.TIMESTAMP: UTC_MICROS,
}


def entity_spec(stream: StreamModel) -> EntitySpec | None:
    """The entity state the stream declares (None without one)."""
    entity = stream.entity
    if entity is None:
        return None
    folds = []
    for name, field in entity.fields.items():
        if field.fold == Fold.COUNT:
            kind: pa.DataType = pa.int64()
        elif field.fold in (Fold.FIRST_TIME, Fold.LAST_TIME):
            kind = UTC_MICROS
        else:
            kind = ARROW_TYPES[stream.payload[field.of or name].type]
        of = None
        if field.fold not in (Fold.COUNT, Fold.FIRST_TIME, Fold.LAST_TIME):
            of = field.of or name
        folds.append(
            FoldSpec(
                name=name,
                fold=str(field.fold),
                type=kind,
                of=of,
                when=tuple(sorted((field.when or {}).items())),
                strip_prefix=field.strip_prefix,
            )
        )
    return EntitySpec(
        key=entity.key,
        key_type=ARROW_TYPES[stream.payload[entity.key].type],
        folds=tuple(folds),
    )


def contract(stream: StreamModel) -> Contract:
    """What a record of the stream must hold, as the bronze parser takes it."""
    return Contract(
        id_field=stream.event_id.field,
        time_field=stream.event_time.field,
        time_format=str(stream.event_time.format),
        fields=tuple(
            PayloadField(
                name=name,
                type=str(field.type),
                required=field.required,
                values=tuple(field.values) if field.values is not None else None,
                path=field.path,
            )
            for name, field in stream.payload.items()
        ),
        format=str(stream.format),
    )


def window_shape(stream: StreamModel) -> WindowShape:
    """The dimensions and measures of the stream's windows."""
    return WindowShape(
        dimensions=tuple(stream.windows.dimensions),
        measures=tuple(
            Measure(name=name, agg=str(m.agg), of=m.of)
            for name, m in stream.windows.measures.items()
        ),
    )


def kpi_specs(stream: StreamModel) -> tuple[KpiSpec, ...]:
    """The KPI tables the stream keeps from its events (its SQL KPIs are not among them)."""
    specs = []
    for name, kpi in stream.kpis.items():
        if kpi.sql is not None:
            continue
        time, size_us = None, None
        if kpi.time == "day":
            time = DAY
        elif kpi.time is not None:
            time, size_us = WINDOW, int(seconds(kpi.time) * 1_000_000)
        measures = tuple(
            KpiMeasure(
                name=m_name,
                agg=None if m.agg is None else str(m.agg),
                of=m.of,
                when=tuple(sorted((m.when or {}).items())),
                formula=m.formula,
            )
            for m_name, m in kpi.measures.items()
        )
        specs.append(KpiSpec(name, time, tuple(kpi.by), measures, size_us))
    return tuple(specs)
