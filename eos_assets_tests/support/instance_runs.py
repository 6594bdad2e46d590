"""Runs in progress written into a Dagster instance by hand: a started run, and the
materializations it reported so far."""

from collections.abc import Set as AbstractSet

import dagster as dg
from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData
from dagster._core.utils import make_new_run_id


def started_run(
    instance: dg.DagsterInstance,
    job_name: str,
    assets: AbstractSet[dg.AssetKey] | None = None,
    checks: AbstractSet[dg.AssetCheckKey] | None = None,
) -> dg.DagsterRun:
    """A run of ``job_name`` recorded as STARTED; it names the ``assets`` and ``checks`` it
    selects when ``checks`` is given, else no selection at all."""
    run = dg.DagsterRun(
        job_name=job_name,
        run_id=make_new_run_id(),
        status=dg.DagsterRunStatus.STARTED,
        asset_selection=frozenset(assets or ()) if checks is not None else None,
        asset_check_selection=frozenset(checks) if checks is not None else None,
    )
    return instance.add_run(run)


def materialized_in(instance: dg.DagsterInstance, run: dg.DagsterRun, key: dg.AssetKey) -> None:
    """Report a materialization of ``key`` as an event of ``run``."""
    event = DagsterEvent(
        event_type_value=DagsterEventType.ASSET_MATERIALIZATION.value,
        job_name=run.job_name,
        event_specific_data=StepMaterializationData(dg.AssetMaterialization(key)),
    )
    instance.report_dagster_event(event, run_id=run.run_id)
