"""Order state is a commutative merge: any split of the events, in any order, same state."""

from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from eos_assets.lib import delta_tables
from eos_assets.lib.order_state import ORDER_STATE_SCHEMA, combine, order_states
from eos_assets.lib.silver_events import EVENTS_SCHEMA, PARTITION_BY

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
STORED = delta_tables.data_schema(EVENTS_SCHEMA, PARTITION_BY)


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
    schema = delta_tables.spark_schema(STORED).add("silver_version", "long")
    return spark.createDataFrame([tuple(e[f.name] for f in schema) for e in events], schema)


def _state(frame: DataFrame) -> dict[str, dict[str, Any]]:
    rows = frame.toArrow().select(ORDER_STATE_SCHEMA.names).to_pylist()
    return {r["order_id"]: {k: v for k, v in r.items() if k != "silver_version"} for r in rows}


def test_state_does_not_depend_on_how_events_are_split_or_ordered(spark: SparkSession) -> None:
    whole = _state(order_states(_frame(spark, EVENTS)))
    assert whole["o-1"]["status"] == "refunded" and whole["o-2"]["status"] == "cancelled"
    assert whole["o-1"]["paid_amount"] == 20.0 and whole["o-1"]["refunded_amount"] == 20.0
    assert whole["o-1"]["event_count"] == 3
    assert whole["o-1"]["first_event_time"] == T0
    assert whole["o-1"]["last_event_time"] == T0 + timedelta(seconds=90)
    # The refund arrives first, the rest later (out of order): the older events never win.
    late_first = [EVENTS[2], EVENTS[4]]
    rest = [e for e in EVENTS if e not in late_first]
    for first, then in ((late_first, rest), (rest, late_first)):
        current = order_states(_frame(spark, first))
        merged = combine(current, order_states(_frame(spark, then)))
        touched = {e["order_id"] for e in then}
        assert _state(merged) == {k: v for k, v in whole.items() if k in touched}
