"""Entity state is a commutative merge: any split of the events, in any order, same state;
the orders stream's folds, and folds of another declaration over the same events."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.contract.schema_time import UTC_MICROS
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived.entity_state import EntitySpec, Fold, combine, entity_states
from eos_assets.lib.derived.silver_events import PARTITION_BY, events_schema
from eos_assets_tests.support.graph import ORDER_STATE_SCHEMA, ORDERS_ENTITY

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
STORED = delta_io.data_schema(events_schema(ORDERS.contract), PARTITION_BY)


def _event(n: int, kind: str, order: str, seconds: int, offset: int, amount: float) -> dict:
    return {
        "event_id": f"e-{n}",
        "event_type": f"order_{kind}",
        "event_time": T0 + timedelta(seconds=seconds),
        "order_id": order,
        "customer_id": "c-1",
        "amount": amount,
        "currency": "EUR",
        "schema_version": 1,
        "topic": "orders",
        "partition": 0,
        "offset": offset,
        "kafka_timestamp": T0,
        "bronze_version": 1,
        "silver_version": n,
    }


EVENTS = [
    _event(1, "created", "o-1", 0, 10, 20.0),
    _event(2, "paid", "o-1", 30, 11, 20.0),
    _event(3, "refunded", "o-1", 90, 12, 20.0),
    _event(4, "created", "o-2", 5, 13, 7.5),
    _event(5, "cancelled", "o-2", 5, 14, 7.5),  # same time as its creation: offset decides
]


def _frame(spark: SparkSession, events: list[dict]) -> DataFrame:
    schema = delta_io.spark_schema(STORED).add("silver_version", "long")
    return spark.createDataFrame([tuple(e[f.name] for f in schema) for e in events], schema)


def _state(frame: DataFrame) -> dict[str, dict[str, Any]]:
    rows = frame.toArrow().select(ORDER_STATE_SCHEMA.names).to_pylist()
    return {r["order_id"]: {k: v for k, v in r.items() if k != "silver_version"} for r in rows}


def test_state_does_not_depend_on_how_events_are_split_or_ordered(spark: SparkSession) -> None:
    whole = _state(entity_states(_frame(spark, EVENTS), ORDERS_ENTITY))
    assert whole["o-1"]["status"] == "refunded" and whole["o-2"]["status"] == "cancelled"
    assert whole["o-1"]["paid_amount"] == 20.0 and whole["o-1"]["refunded_amount"] == 20.0
    assert whole["o-1"]["event_count"] == 3
    assert whole["o-1"]["first_event_time"] == T0
    assert whole["o-1"]["last_event_time"] == T0 + timedelta(seconds=90)
    # The refund arrives first, the rest later (out of order): the older events never win.
    late_first = [EVENTS[2], EVENTS[4]]
    rest = [e for e in EVENTS if e not in late_first]
    for first, then in ((late_first, rest), (rest, late_first)):
        current = entity_states(_frame(spark, first), ORDERS_ENTITY)
        batch = entity_states(_frame(spark, then), ORDERS_ENTITY)
        merged = combine(current, batch, ORDERS_ENTITY)
        touched = {e["order_id"] for e in then}
        assert _state(merged) == {k: v for k, v in whole.items() if k in touched}


# Another declaration over the same events: state per customer, with every kind of fold.
PER_CUSTOMER = EntitySpec(
    key="customer_id",
    key_type=pa.string(),
    folds=(
        Fold("orders_touched", "count", pa.int64()),
        Fold("paid", "sum", pa.float64(), of="amount", when=(("event_type", "order_paid"),)),
        Fold("smallest", "min", pa.float64(), of="amount"),
        Fold("largest", "max", pa.float64(), of="amount"),
        Fold("last_kind", "latest", pa.string(), of="event_type", strip_prefix="order_"),
        Fold("first_seen", "first_time", UTC_MICROS),
        Fold("last_seen", "last_time", UTC_MICROS),
    ),
)


def test_other_folds_over_the_same_events(spark: SparkSession) -> None:
    events = [
        *EVENTS,
        {**_event(6, "paid", "o-3", 200, 15, 4.0), "customer_id": "c-2"},
        {**_event(7, "created", "o-3", 100, 16, 4.0), "customer_id": "c-2"},
    ]
    by = {c: [e for e in events if e["customer_id"] == c] for c in ("c-1", "c-2")}
    want = {
        c: {
            "orders_touched": len(rows),
            "paid": sum(e["amount"] for e in rows if e["event_type"] == "order_paid"),
            "smallest": min(e["amount"] for e in rows),
            "largest": max(e["amount"] for e in rows),
            "last_kind": max(rows, key=lambda e: (e["event_time"], e["offset"]))[
                "event_type"
            ].removeprefix("order_"),
            "first_seen": min(e["event_time"] for e in rows),
            "last_seen": max(e["event_time"] for e in rows),
        }
        for c, rows in by.items()
    }
    assert PER_CUSTOMER.schema.names[:8] == ["customer_id", *[f.name for f in PER_CUSTOMER.folds]]

    def state(frame: DataFrame) -> dict[str, dict[str, Any]]:
        rows = frame.toArrow().to_pylist()
        return {r["customer_id"]: {k: r[k] for k in want["c-1"]} for r in rows}

    assert state(entity_states(_frame(spark, events), PER_CUSTOMER)) == want
    for split in (3, 5):
        first = entity_states(_frame(spark, events[split:]), PER_CUSTOMER)
        then = entity_states(_frame(spark, events[:split]), PER_CUSTOMER)
        merged = state(combine(first, then, PER_CUSTOMER))
        touched = {e["customer_id"] for e in events[:split]}
        assert merged == {c: v for c, v in want.items() if c in touched}


def test_a_batch_without_values_keeps_an_earlier_sum(spark: SparkSession) -> None:
    """A sum over an optional field: a later batch whose events all lack it adds nothing."""
    spec = EntitySpec(
        key="order_id",
        key_type=pa.string(),
        folds=(Fold("total", "sum", pa.float64(), of="amount"),),
    )
    with_amount = _event(1, "created", "o-1", 0, 10, 20.0)
    without = [{**_event(n, "paid", "o-1", n, 10 + n, 0.0), "amount": None} for n in (2, 3)]

    def total(events: list[dict], then: list[dict] | None = None) -> list[float | None]:
        state = entity_states(_frame(spark, events), spec)
        if then is not None:
            state = combine(state, entity_states(_frame(spark, then), spec), spec)
        return state.toArrow().column("total").to_pylist()

    assert total([with_amount], then=without) == [20.0]
    assert total(without, then=[with_amount]) == [20.0]
    assert total(without) == [None]  # no value yet
