"""What `eos-assets run` says when a step fails: the step's own line, not Dagster's; and whose
definitions it runs: those of the Dagster project in the current folder."""

from pathlib import Path

import dagster as dg
import pytest

from eos_assets.lib.errors import ConfigError
from eos_assets.run_stream import definitions_module, failure_line, project_definitions


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


def test_the_definitions_are_those_of_the_project_in_the_folder(tmp_path: Path) -> None:
    assert definitions_module(tmp_path) == "eos_assets.definitions"  # no pyproject.toml
    assert definitions_module(Path(__file__).resolve().parents[1]) == "eos_assets.definitions"
    (tmp_path / "pyproject.toml").write_text(
        '[tool.dg]\ndirectory_type = "project"\n[tool.dg.project]\nroot_module = "shop"\n'
    )
    assert definitions_module(tmp_path) == "shop.definitions"  # create-dagster's layout
    with pytest.raises(ConfigError, match=r"shop.definitions cannot be imported .*pip install"):
        project_definitions(tmp_path)
