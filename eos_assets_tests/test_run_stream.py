"""What `eos-assets run` says when a step fails: the step's own line, not Dagster's."""

import dagster as dg

from eos_assets.run_stream import failure_line


@dg.op
def denied() -> None:
    raise dg.Failure(description="user bob is not authorized for topic orders: grant READ")


@dg.op
def broken() -> None:
    raise ValueError("the table is gone")


@dg.job
def denied_job() -> None:
    denied()


@dg.job
def broken_job() -> None:
    broken()


def first_failure(job: dg.JobDefinition) -> dg.DagsterEvent:
    result = job.execute_in_process(raise_on_error=False)
    return next(e for e in result.all_events if e.is_failure)


def test_a_failed_step_is_told_by_its_own_line() -> None:
    assert failure_line(first_failure(denied_job)) == (
        "user bob is not authorized for topic orders: grant READ"
    )
    assert "the table is gone" in failure_line(first_failure(broken_job))
