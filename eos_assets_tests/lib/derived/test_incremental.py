"""The shared incremental step on small delta-rs tables, without Spark: commit once, skip when
nothing is new, re-plan after a lost commit race, give up after MAX_ATTEMPTS, refuse first."""

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived import incremental
from eos_assets.lib.errors import EosError

APP = "eos:upstream:test/upstream"
ROWS = pa.table({"n": pa.array([1, 2, 3], pa.int64())})


@dataclass
class Outcome(incremental.Outcome):
    steps: int = 0


@pytest.fixture
def table(tmp_path: Path) -> incremental.Derived:
    upstream, target = str(tmp_path / "upstream"), str(tmp_path / "target")
    write_deltalake(upstream, ROWS)
    delta_io.ensure_table(target, ROWS.schema)
    return incremental.Derived("test/target", target, upstream, APP)


def _commit(attempt: incremental.Attempt, outcome: Outcome) -> None:
    outcome.steps += 1
    write_deltalake(
        attempt.target,
        ROWS,
        mode="append",
        commit_properties=delta_io.commit_properties(
            attempt.txns, attempt.metadata("test", rows=ROWS.num_rows), text_values=True
        ),
    )


def test_commits_the_increment_once_then_skips(table: incremental.Derived) -> None:
    first = incremental.run(table, Outcome, _commit)
    assert (first.version, first.attempts, first.steps) == (1, 1, 1)
    target = DeltaTable(table.uri)
    assert target.transaction_version(APP) == 0
    assert target.history(1)[0]["eos.upstream_versions"] == "[0, 0]"
    again = incremental.run(table, Outcome, _commit)
    assert (again.version, again.attempts, again.steps) == (None, 1, 0)
    assert DeltaTable(table.uri).version() == 1 and "total" in again.seconds
    assert (first.consumed, again.consumed) == ((0, 0), None)


def test_a_lost_race_replans_and_adds_nothing(table: incremental.Derived) -> None:
    def racing(attempt: incremental.Attempt, outcome: Outcome) -> None:
        if outcome.attempts == 1:
            rival = incremental.run(table, Outcome, _commit)
            assert rival.version == 1
        _commit(attempt, outcome)

    outcome = incremental.run(table, Outcome, racing)
    # The losing attempt's outcome is dropped; the second found nothing new.
    assert (outcome.version, outcome.attempts, outcome.steps) == (None, 2, 0)
    assert DeltaTable(table.uri).version() == 1


def test_gives_up_after_max_attempts(table: incremental.Derived) -> None:
    def always_beaten(attempt: incremental.Attempt, outcome: Outcome) -> None:
        # A rival commits first every time, and upstream moves on, so every re-plan finds
        # something new again.
        incremental.run(table, Outcome, _commit)
        write_deltalake(table.upstream_uri, ROWS, mode="append")
        _commit(attempt, outcome)

    with pytest.raises(EosError, match="lost 3 commit races"):
        incremental.run(table, Outcome, always_beaten)


def test_check_refuses_even_when_nothing_is_new(table: incremental.Derived) -> None:
    incremental.run(table, Outcome, _commit)

    def refuse(dt: DeltaTable) -> None:
        raise EosError(f"refused at version {dt.version()}")

    refusing = incremental.Derived(table.name, table.uri, table.upstream_uri, APP, check=refuse)
    with pytest.raises(EosError, match="refused at version 1"):
        incremental.run(refusing, Outcome, _commit)
