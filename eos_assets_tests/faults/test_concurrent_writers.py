"""Two ingests on one table at once, without the Dagster pool: no range is committed twice.

Both writers pause right before their Delta commit (after the skip-replays check), so both
have read their ranges and both try to commit them; only the snapshot conflict check of
delta-rs stands between them and a double commit.
"""

from pathlib import Path

from eos_assets.defs.stream import ORDERS
from eos_assets.lib import faults
from eos_assets.lib.contract.schema import bronze_schema
from eos_assets.lib.delta import delta_io
from eos_assets_tests.faults.harness import finish
from eos_assets_tests.faults.oracle import ingest_ranges, overlaps
from eos_assets_tests.support.fault_bench import Bench
from eos_assets_tests.support.paused_runs import one_commit_wins, writers_at_the_gate

BRONZE = bronze_schema(ORDERS.contract)


def test_two_writers_released_together_commit_once(bench: Bench, tmp_path: Path) -> None:
    """Same ranges, released at once: one commit wins, the other fails and finds nothing left."""
    table = bench.table
    topic, summary, manifest = bench.topic_with(partitions=3, count=1200, seed=31)
    delta_io.ensure_table(table, BRONZE)  # as the asset's first run would have
    runs = writers_at_the_gate(bench.bootstrap, topic, table, tmp_path, (None, None), 180)
    loser = one_commit_wins(tmp_path, runs, table)
    verdict = bench.score(
        "2 writers released together, no pool",
        manifest,
        f"loser re-planned ({loser['attempts']} attempts), committed nothing",
    )
    assert verdict.exact, f"two writers: {verdict}"
    assert not overlaps(table), overlaps(table)
    assert summary.committed == verdict.found


def test_a_stale_writer_commits_only_what_the_winner_left(bench: Bench, tmp_path: Path) -> None:
    """A capped writer commits first; the uncapped one, holding a stale plan of the same
    offsets, must fail its commit, re-plan from the winner's positions and commit the rest."""
    table = bench.table
    topic, summary, manifest = bench.topic_with(partitions=3, count=1200, seed=32)
    delta_io.ensure_table(table, BRONZE)
    capped, stale = writers_at_the_gate(bench.bootstrap, topic, table, tmp_path, (300, None), 180)
    (tmp_path / f"{faults.RELEASE}-{capped.proc.pid}").touch()
    first = finish(capped)
    assert first.outcome and first.outcome["version"] == 1, first.tail()
    (tmp_path / faults.RELEASE).touch()
    second = finish(stale)
    assert second.returncode == 0 and second.outcome and second.outcome["ok"], second.tail()
    assert second.outcome["attempts"] == 2 and second.outcome["version"] == 2, second.outcome

    for (_, partition), ranges in ingest_ranges(table).items():
        assert len(ranges) == 2, f"partition {partition}: capped range, then the rest: {ranges}"
    verdict = bench.score(
        "stale writer commits after a winner, no pool",
        manifest,
        "loser re-planned (2 attempts), committed only the rest",
    )
    assert not overlaps(table), overlaps(table)
    assert verdict.exact, f"stale writer: {verdict}"
    assert summary.committed == verdict.found
