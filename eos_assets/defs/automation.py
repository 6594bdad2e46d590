"""The automation conditions: when silver and gold follow bronze, and when a check runs.

Silver and gold follow bronze through declarative automation: an asset is requested when an
upstream asset was updated, nothing upstream is missing or in progress, and every blocking
check upstream (``offsets_contiguous`` on bronze, ``event_id_unique`` on silver/events) passed.
The checks that read Kafka run on schedules (``schedules.py``): a stopped ingest is exactly
when freshness matters. The sensor that evaluates these conditions is in ``sensors.py``.
"""

from collections.abc import Callable, Mapping

import dagster as dg

FOLLOW_UPSTREAM = (
    dg.AutomationCondition.eager() & dg.AutomationCondition.all_deps_blocking_checks_passed()
).with_label("eager once upstream blocking checks passed")
# A check runs with its asset whenever the asset is requested, or after the asset was updated
# by a run that did not evaluate the check (jobs include their assets' checks, so a run of
# ingest_and_refresh leaves nothing to do here).
CHECK_WITH_ASSET = (
    dg.AutomationCondition.any_deps_updated().since(
        dg.AutomationCondition.newly_requested() | dg.AutomationCondition.newly_updated()
    )
    | dg.AutomationCondition.will_be_requested()
).with_label("with its asset")


def check_with_asset(
    asset: dg.AssetKey,
    name: str,
    description: str,
    *,
    blocking: bool = False,
    op_tags: Mapping[str, str] | None = None,
) -> Callable[[Callable[..., dg.AssetCheckResult]], dg.AssetChecksDefinition]:
    """``dg.asset_check`` for a check that runs with its asset (``CHECK_WITH_ASSET``)."""
    return dg.asset_check(
        asset=asset,
        name=name,
        description=description,
        blocking=blocking,
        op_tags=op_tags,
        automation_condition=CHECK_WITH_ASSET,
    )
