"""The codes of a malformed record: shared ones, a payload field's own, and reading them back."""

from eos_assets.lib.contract.contract import Malformed, error_code, field_code
from eos_assets.lib.contract.stream_shape import DOUBLE, STRING, PayloadField


def test_shared_codes_in_precedence_order() -> None:
    assert [str(m) for m in Malformed] == [
        "null_value",
        "invalid_utf8",
        "invalid_json",
        "not_an_object",
        "missing_event_id",
        "invalid_event_time",
    ]


def test_a_field_code_says_unknown_for_declared_values_and_invalid_otherwise() -> None:
    assert field_code(PayloadField("status", STRING, values=("new",))) == "unknown_status"
    assert field_code(PayloadField("note", STRING)) == "invalid_note"
    assert field_code(PayloadField("amount", DOUBLE, values=None, required=True)) == (
        "invalid_amount"
    )


def test_the_code_of_an_error_value() -> None:
    assert error_code("invalid_json: Expecting value: line 1 column 1") == "invalid_json"
    assert error_code(f"{Malformed.NULL_VALUE}: the record has no value") == Malformed.NULL_VALUE
    assert error_code(None) is None
