"""KPI alerts as a Dagster resource: where and how they are delivered."""

import dagster as dg
from pydantic import Field

from eos_assets.lib.outbound.alert_notify import DeliveryPolicy
from eos_assets.settings import read_alert_policy


class AlertsResource(dg.ConfigurableResource):
    """The endpoint of the KPI alerts; their retries are read at each run (the rules are
    declared with the stream)."""

    url: str | None = Field(
        default=None,
        description="HTTP endpoint the alerts are delivered to (EOS_ALERT_URL); empty: alerts "
        "are recorded in the ledger as PENDING and none is delivered.",
    )

    def policy(self) -> DeliveryPolicy:
        """The delivery settings (``EOS_ALERT_*``), read now: a change needs no reload.

        Raises:
            ConfigError: a variable does not parse.
        """
        return read_alert_policy()
