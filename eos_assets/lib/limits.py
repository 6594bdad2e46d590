"""Thresholds of the checks and of the lag sensor, read from ``EOS_*`` environment variables.

They are read when a check or a sensor tick runs, so changing one takes effect at the next
evaluation without reloading the code location.
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from eos_assets.lib.errors import ConfigError


@dataclass(frozen=True)
class Limits:
    """What counts as healthy; every field has an ``EOS_<FIELD NAME>`` variable.

    Attributes:
        malformed_max_rate: malformed records over all records above which the malformed-rate
            check warns (whole table, and the latest ingest alone).
        freshness_max_age_s: the oldest committed Kafka record not yet in bronze may be at most
            this old before the freshness check warns.
        lag_max_records: the lag sensor launches an ingest when the total lag (offsets) reaches
            this.
        lag_max_age_s: ... or when the oldest record not yet in bronze is this old.
        lag_stop_after_s: a partition with lag whose position has not moved for this long is
            STOP.
        lag_window: samples kept per partition for the lag status (one per sensor tick).
        audit_budget_s: the audit stops reading Kafka after this long and reports a partial
            audit (a failure with severity WARN, never a pass).
    """

    malformed_max_rate: float = 0.01
    freshness_max_age_s: float = 900.0
    lag_max_records: int = 10_000
    lag_max_age_s: float = 60.0
    lag_stop_after_s: float = 900.0
    lag_window: int = 10
    audit_budget_s: float = 300.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Limits":
        """Read the limits from ``env`` (default: the process environment).

        Raises:
            ConfigError: a variable is not a positive number.
        """
        env = os.environ if env is None else env
        values: dict[str, float | int] = {}
        for f in fields(cls):
            name = f"EOS_{f.name.upper()}"
            raw = env.get(name)
            if not raw:
                continue
            kind = int if f.type in (int, "int") else float
            try:
                value = kind(raw)
            except ValueError:
                value = -1
            if value <= 0:
                raise ConfigError(
                    f"{name}={raw!r} is not a positive {kind.__name__}: fix or unset it"
                )
            values[f.name] = value
        return cls(**values)  # type: ignore[arg-type]
