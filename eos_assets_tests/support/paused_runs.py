"""Ingests held at a fault point: started paused, released, and two writers let go at once
to race for one commit."""

from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from eos_assets.lib import faults
from eos_assets_tests.faults.harness import Run, finish, start_ingest, wait_for_files


def start_paused(
    bootstrap: str, topic: str, table: str, point: str, gate: Path, timeout: float, **options: Any
) -> Run:
    """Start an ingest armed to pause at ``point`` (its ready file in ``gate``) and wait up to
    ``timeout`` seconds until it waits there."""
    run = start_ingest(bootstrap, topic, table, pause_at=point, pause_dir=gate, **options)
    wait_for_files(gate, f"{point}-*.ready", 1, timeout, run)
    return run


def release(gate: Path, run: Run) -> Run:
    """Let every run paused at ``gate`` go on, and wait for ``run`` to end."""
    (gate / faults.RELEASE).touch()
    return finish(run)


def writers_at_the_gate(
    bootstrap: str,
    topic: str,
    table: str,
    gate: Path,
    caps: tuple[int | None, int | None],
    timeout: float,
    remote: str | None = None,
) -> list[Run]:
    """Two ingests of one table (``caps``: their record limits), both paused right before
    their Delta commit; nothing may be committed while they wait."""
    runs = [
        start_ingest(
            bootstrap,
            topic,
            table,
            pause_at=faults.BEFORE_COMMIT,
            pause_dir=gate,
            max_records=cap,
            remote=remote,
        )
        for cap in caps
    ]
    wait_for_files(gate, f"{faults.BEFORE_COMMIT}-*.ready", 2, timeout, *runs)
    assert DeltaTable(table).version() == 0, "nobody may commit before the gate opens"
    return runs


def one_commit_wins(gate: Path, runs: list[Run], table: str) -> dict[str, Any]:
    """Release the writers paused at ``gate`` together: both end well, one commits at its
    first attempt, the other's stale commit fails and it re-plans. The loser's outcome."""
    (gate / faults.RELEASE).touch()
    outcomes = []
    for run in map(finish, runs):
        assert run.returncode == 0 and run.outcome and run.outcome["ok"], run.tail()
        outcomes.append(run.outcome)

    winners = [o for o in outcomes if o["version"] is not None]
    assert len(winners) == 1 and winners[0]["attempts"] == 1, f"one commit wins: {outcomes}"
    loser = next(o for o in outcomes if o is not winners[0])
    assert loser["attempts"] > 1, f"the loser's stale commit must fail and re-plan: {loser}"
    assert DeltaTable(table).version() == 1
    return loser
