"""The stream specs are plain frozen values: equal by content, hashable, picklable unchanged
(Spark ships them into its tasks), and a contract finds its fields by name."""

import dataclasses
import pickle

import pytest

from eos_assets.lib.contract.stream_shape import (
    AGGREGATES,
    COUNT,
    EPOCH_SECONDS,
    FIELD_TYPES,
    LONG,
    STRING,
    SUM,
    TIME_FORMATS,
    Contract,
    Measure,
    PayloadField,
    WindowShape,
)


def contract() -> Contract:
    return Contract(
        "view_id",
        "ts",
        EPOCH_SECONDS,
        (PayloadField("page", STRING, True, ("/a", "/b")), PayloadField("ms", LONG)),
    )


SHAPE = WindowShape(("page",), (Measure("views", COUNT), Measure("time", SUM, "ms")))


def test_specs_are_equal_by_content_and_survive_pickling() -> None:
    assert contract() == contract() and hash(contract()) == hash(contract())
    for spec in (contract(), SHAPE):
        copy = pickle.loads(pickle.dumps(spec))
        assert copy == spec and copy is not spec
    assert contract() != dataclasses.replace(contract(), time_format="epoch_millis")
    assert {SHAPE: 1}[WindowShape(("page",), (Measure("views", COUNT), Measure("time", SUM, "ms")))]


def test_specs_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        SHAPE.dimensions = ()  # type: ignore[misc]


def test_a_contract_names_and_finds_its_fields() -> None:
    c = contract()
    assert c.names == ("page", "ms")
    assert c.field("page").values == ("/a", "/b")
    with pytest.raises(KeyError, match="amount"):
        c.field("amount")


def test_the_declarable_values() -> None:
    assert FIELD_TYPES == ("string", "long", "double", "boolean", "timestamp")
    assert TIME_FORMATS == ("iso8601", "epoch_millis", "epoch_seconds")
    assert AGGREGATES == ("count", "count_distinct", "sum", "min", "max")
