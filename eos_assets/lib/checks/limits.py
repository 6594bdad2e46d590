"""Thresholds of the checks and of the lag sensor (``settings.read_limits`` reads them from
``EOS_*`` variables when a check or a sensor tick runs, so a change takes effect at the next
evaluation without reloading the code location)."""

from dataclasses import dataclass


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
