"""Two ingests on one table at once, without the Dagster pool: no range is committed twice.

Both writers pause right before their Delta commit (after the skip-replays check), so both
have read their ranges and both try to commit them; only the snapshot conflict check of
delta-rs stands between them and a double commit.
"""

from collections.abc import Callable
from pathlib import Path

from deltalake import DeltaTable

from eos_assets.defs.stream import ORDERS
from eos_assets.lib import faults
from eos_assets.lib.contract.schema import bronze_schema
from eos_assets.lib.delta import delta_io
from eos_assets_tests.faults.harness import Ledger, Run, finish, start_ingest, wait_for_files
from eos_assets_tests.faults.oracle import ingest_ranges, judge, overlaps

READY = f"{faults.BEFORE_COMMIT}-{{pid}}.ready"
BRONZE = bronze_schema(ORDERS.contract)


def two_writers_at_the_gate(
    bootstrap: str, topic: str, table: str, gate: Path, caps: tuple[int | None, int | None]
) -> list[Run]:
    runs = [
        start_ingest(
            bootstrap, topic, table, pause_at=faults.BEFORE_COMMIT, pause_dir=gate, max_records=cap
        )
        for cap in caps
    ]
    wait_for_files(gate, READY.format(pid="*"), 2, 180, *runs)
    assert DeltaTable(table).version() == 0, "nobody may commit before the gate opens"
    return runs


def test_two_writers_released_together_commit_once(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produced: Callable,
    table: str,
    tmp_path: Path,
    ledger: Ledger,
) -> None:
    """Same ranges, released at once: one commit wins, the other fails and finds nothing left."""
    topic = make_topic(partitions=3)
    summary, manifest = produced(topic, count=1200, seed=31)
    delta_io.ensure_table(table, BRONZE)  # as the asset's first run would have
    runs = two_writers_at_the_gate(kafka_bootstrap, topic, table, tmp_path, (None, None))
    (tmp_path / faults.RELEASE).touch()
    outcomes = []
    for run in map(finish, runs):
        assert run.returncode == 0 and run.outcome and run.outcome["ok"], run.tail()
        outcomes.append(run.outcome)

    winners = [o for o in outcomes if o["version"] is not None]
    assert len(winners) == 1 and winners[0]["attempts"] == 1, f"one commit wins: {outcomes}"
    loser = next(o for o in outcomes if o is not winners[0])
    assert loser["attempts"] > 1, f"the loser's stale commit must fail and re-plan: {loser}"
    assert DeltaTable(table).version() == 1
    verdict = judge(table, manifest)
    ledger.record(
        "2 writers released together, no pool",
        1,
        verdict.lost,
        verdict.doubled,
        f"loser re-planned ({loser['attempts']} attempts), committed nothing",
    )
    assert verdict.exact, f"two writers: {verdict}"
    assert not overlaps(table), overlaps(table)
    assert summary.committed == verdict.found


def test_a_stale_writer_commits_only_what_the_winner_left(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produced: Callable,
    table: str,
    tmp_path: Path,
    ledger: Ledger,
) -> None:
    """A capped writer commits first; the uncapped one, holding a stale plan of the same
    offsets, must fail its commit, re-plan from the winner's positions and commit the rest."""
    topic = make_topic(partitions=3)
    summary, manifest = produced(topic, count=1200, seed=32)
    delta_io.ensure_table(table, BRONZE)
    capped, stale = two_writers_at_the_gate(kafka_bootstrap, topic, table, tmp_path, (300, None))
    (tmp_path / f"{faults.RELEASE}-{capped.proc.pid}").touch()
    first = finish(capped)
    assert first.outcome and first.outcome["version"] == 1, first.tail()
    (tmp_path / faults.RELEASE).touch()
    second = finish(stale)
    assert second.returncode == 0 and second.outcome and second.outcome["ok"], second.tail()
    assert second.outcome["attempts"] == 2 and second.outcome["version"] == 2, second.outcome

    for (_, partition), ranges in ingest_ranges(table).items():
        assert len(ranges) == 2, f"partition {partition}: capped range, then the rest: {ranges}"
    verdict = judge(table, manifest)
    ledger.record(
        "stale writer commits after a winner, no pool",
        1,
        verdict.lost,
        verdict.doubled,
        "loser re-planned (2 attempts), committed only the rest",
    )
    assert not overlaps(table), overlaps(table)
    assert verdict.exact, f"stale writer: {verdict}"
    assert summary.committed == verdict.found
