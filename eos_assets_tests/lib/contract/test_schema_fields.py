"""The slots a contract reads from each JSON value and the fields table they fill."""

import pyarrow as pa
import pytest

from eos_assets.lib.contract.schema_fields import JSON_ERROR, kind_column, layout
from eos_assets.lib.contract.stream_shape import (
    BOOLEAN,
    DOUBLE,
    EPOCH_MILLIS,
    ISO8601,
    LONG,
    STRING,
    TIMESTAMP,
    Contract,
    PayloadField,
)

FIELDS = (
    PayloadField("status", STRING, values=("new", "paid")),
    PayloadField("note", STRING),
    PayloadField("customer", STRING, required=True),
    PayloadField("qty", LONG),
    PayloadField("amount", DOUBLE, required=True),
    PayloadField("gift", BOOLEAN),
    PayloadField("shipped_at", TIMESTAMP),
)


def test_slots_of_a_contract_in_order_with_their_kinds() -> None:
    lay = layout(Contract("order_id", "ts", ISO8601, FIELDS))
    assert [(s.key, s.column, s.kind, s.checked, s.text) for s in lay.slots] == [
        ("order_id", "event_id", "string", True, False),
        ("ts", "event_time", "string", True, False),
        ("status", "status", "string", True, False),  # declared values: checked
        ("note", "note", "string", False, True),  # optional free string: any JSON as text
        ("customer", "customer", "string", True, False),
        ("qty", "qty", "number", False, False),
        ("amount", "amount", "number", True, False),
        ("gift", "gift", "boolean", False, False),
        ("shipped_at", "shipped_at", "string", False, False),
        ("schema_version", "schema_version", "number", False, False),
    ]
    assert [s.key for s in lay.slots if s.long] == ["qty"]
    checked = ["event_id", "event_time", "status", "customer", "amount"]
    assert lay.schema.names == [
        JSON_ERROR,
        *[s.column for s in lay.slots],
        *[kind_column(c) for c in checked],
    ]
    assert kind_column("amount") == "amount:kind"
    types = {n: lay.schema.field(n).type for n in ("event_time", "qty", "amount", "gift")}
    assert types == {
        "event_time": pa.string(),
        "qty": pa.int64(),
        "amount": pa.float64(),
        "gift": pa.bool_(),
    }


def test_an_epoch_time_is_read_as_a_number() -> None:
    time_slot = layout(Contract("id", "ts", EPOCH_MILLIS, ())).slots[1]
    assert (time_slot.kind, time_slot.arrow) == ("number", pa.float64())


def test_a_json_key_read_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="reads the JSON key 'ts' twice"):
        layout(Contract("id", "ts", ISO8601, (PayloadField("ts", STRING),)))
    with pytest.raises(ValueError, match="'schema_version' twice"):
        layout(Contract("id", "ts", ISO8601, (PayloadField("schema_version", LONG),)))
