"""The thresholds: their defaults, and one ``EOS_<FIELD NAME>`` variable for every field."""

import dataclasses

import pytest

from eos_assets.lib.checks.limits import Limits
from eos_assets.lib.errors import ConfigError
from eos_assets.settings import read_limits


def test_the_defaults() -> None:
    assert Limits() == Limits(
        malformed_max_rate=0.01,
        freshness_max_age_s=900.0,
        lag_max_records=10_000,
        lag_max_age_s=60.0,
        lag_stop_after_s=900.0,
        lag_window=10,
        audit_budget_s=300.0,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        Limits().lag_window = 3  # type: ignore[misc]


def test_every_field_has_its_variable_of_its_type() -> None:
    fields = dataclasses.fields(Limits)
    env = {f"EOS_{f.name.upper()}": str(7 + i) for i, f in enumerate(fields)}
    limits = read_limits(env)
    for i, f in enumerate(fields):
        value = getattr(limits, f.name)
        assert (value, type(value)) == (7 + i, f.type), f.name
        assert f"  {f.name}:" in (Limits.__doc__ or ""), f"{f.name} is not documented"


def test_a_whole_number_field_refuses_a_fraction() -> None:
    with pytest.raises(ConfigError, match=r"^EOS_LAG_MAX_RECORDS='2\.5' is not a "):
        read_limits({"EOS_LAG_MAX_RECORDS": "2.5"})
    assert read_limits({"EOS_MALFORMED_MAX_RATE": "0.25"}).malformed_max_rate == 0.25
