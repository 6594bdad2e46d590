"""Where an incremental check starts: the snapshot its latest passing evaluation proved clean.

A check that runs with its asset records, in the metadata of each passing evaluation, the
version it proved and a digest of that snapshot's files (``lib/checks/increment.Checked``).
The next evaluation reads it back from the Dagster instance and looks only at what changed
since. A failed evaluation records nothing to start from, so the next one covers its part
again; an instance without a passing evaluation (a new deployment, a wiped instance) and the
``full`` run config check the whole table.
"""

import dagster as dg

from eos_assets.lib.checks.increment import Checked

# Evaluations looked back through for the latest passing one; past them, the whole table.
LOOKED_BACK = 50


class CheckConfig(dg.Config):
    """Run config of an incremental check."""

    full: bool = False
    """Check the whole table, not only what changed since the last passing evaluation."""


def last_checked(context: dg.AssetCheckExecutionContext, config: CheckConfig) -> Checked | None:
    """The snapshot this check's latest passing evaluation proved clean (None: check all)."""
    return Checked.from_metadata(last_passed(context, config))


def last_passed(
    context: dg.AssetCheckExecutionContext, config: CheckConfig
) -> dict[str, object] | None:
    """The metadata of this check's latest passing evaluation (None: check all)."""
    if config.full:
        return None
    (spec,) = context.check_specs
    return passed_metadata(context.instance, spec.key)


def passed_metadata(
    instance: dg.DagsterInstance, key: dg.AssetCheckKey
) -> dict[str, object] | None:
    """The metadata of check ``key``'s latest passing evaluation in ``instance`` (None: none)."""
    records = instance.event_log_storage.get_asset_check_execution_history(key, limit=LOOKED_BACK)
    passed = [r for r in records if r.status.value == "SUCCEEDED"][:1]
    if not passed or passed[0].event is None or passed[0].event.dagster_event is None:
        return None
    evaluation = passed[0].event.dagster_event.event_specific_data
    if not isinstance(evaluation, dg.AssetCheckEvaluation) or not evaluation.passed:
        return None
    return {k: v.value for k, v in evaluation.metadata.items()}
