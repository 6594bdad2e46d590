"""Randomized soak: produce while the ingest is started and killed again and again.

The schedule (kill moments, crash points, run caps) comes from one seeded ``random.Random``,
so a failing seed can be replayed; how far each run got before its kill depends on timing.
After every cycle bronze may lag behind the producer but must never hold a record twice, an
aborted record, or anything not produced; after a final clean run it must be exact.
"""

import json
import random
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit.producer import read_manifest
from eos_assets.lib import faults
from eos_assets.lib.ingest.ingest import ingest_bronze
from eos_assets_tests.faults.harness import Ledger, finish, kill_group, start_ingest, wait_ready
from eos_assets_tests.faults.oracle import judge, overlaps

# Seed 117's four cycles: crash points mid_read and after_commit, two external kills 3.9 and
# 3.2 s after Spark is up, two runs capped at 300 records; the producer writes throughout (40 s),
# so runs plan and read while transactions are open and aborted. The crash points one by one
# are crash_points.py's; this test adds kills at random moments.
SEED = 117
MAX_CYCLES = 4
MIN_KILLS = 3  # fewer (a machine far too slow) proves too little: the test fails
LOOP_BUDGET_S = 120.0  # hard stop of the kill loop
PRODUCE = {"count": 2400, "rate": 60.0, "transaction_size": 40, "abort_ratio": 0.15}


def finished_lines(path: Path) -> list[dict[str, Any]]:
    """Manifest lines already on disk, without a line the producer is still writing."""
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


@pytest.mark.slow
def test_random_kills_while_producing_lose_and_double_nothing(
    spark: SparkSession,
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produced: Callable,
    table: str,
    tmp_path: Path,
    ledger: Ledger,
    record_property: Callable[[str, object], None],
) -> None:
    topic = make_topic(partitions=3)
    rng = random.Random(SEED)
    outcome: dict[str, Any] = {}

    def producer() -> None:
        try:
            outcome["summary"], outcome["manifest"] = produced(topic, seed=SEED, **PRODUCE)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=producer, name="soak-producer", daemon=True)
    thread.start()
    manifest = tmp_path / "manifests" / f"{topic}-0.jsonl"
    tally = {"external kill": 0, "crash point": 0, "completed": 0}
    began = time.monotonic()
    cycles = 0
    while cycles < MAX_CYCLES and time.monotonic() - began < LOOP_BUDGET_S:
        cycles += 1
        cap = rng.choice([None, None, 300])
        if rng.random() < 0.3:
            point = rng.choice(faults.POINTS)
            run = finish(
                start_ingest(kafka_bootstrap, topic, table, crash_at=point, max_records=cap)
            )
            if run.killed:
                tally["crash point"] += 1
        else:
            # Counted from Spark being up: plan, read (~3 s in a fresh process), commit, advise.
            delay = rng.uniform(0.0, 7.0)
            run = start_ingest(kafka_bootstrap, topic, table, max_records=cap)
            if wait_ready(run):
                try:
                    run.proc.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    kill_group(run)
            run = finish(run)
            if run.killed:
                tally["external kill"] += 1
        if not run.killed:
            assert run.returncode == 0 and run.outcome, f"cycle {cycles}: {run.tail()}"
            tally["completed"] += 1
        # Bronze may lag, but never doubles, never shows an aborted or unknown record.
        interim = judge(table, finished_lines(manifest)) if Path(table).exists() else None
        assert interim is None or not (interim.doubled or interim.aborted or interim.foreign), (
            f"seed {SEED}, cycle {cycles}: {interim}"
        )

    commits_while_killing = DeltaTable(table).version() if Path(table).exists() else 0
    thread.join(timeout=120)
    assert not thread.is_alive() and "error" not in outcome, outcome.get("error")
    ingest_bronze(
        spark, table, [topic], {"bootstrap.servers": kafka_bootstrap}, contract=ORDERS.contract
    )
    verdict = judge(table, read_manifest(manifest))
    kills = tally["external kill"] + tally["crash point"]
    record_property("soak_seed", SEED)
    record_property("soak_cycles", cycles)
    record_property("soak_tally", json.dumps(tally))
    note = (
        f"seed {SEED}: {cycles} cycles, {tally['completed']} runs completed, "
        f"{commits_while_killing} commits made between kills"
    )
    for kind in ("external kill", "crash point"):
        ledger.record(f"soak: {kind}", tally[kind], verdict.lost, verdict.doubled, note)
    record_property("soak_commits_between_kills", commits_while_killing)
    print(f"soak seed {SEED}: {cycles} kill/restart cycles {tally}; {note}; {verdict}")
    assert verdict.exact, f"seed {SEED}, {cycles} cycles {tally}: {verdict}"
    assert not overlaps(table), overlaps(table)
    assert kills >= MIN_KILLS, f"too few kills in {LOOP_BUDGET_S:.0f}s to mean anything: {tally}"
    assert outcome["summary"].committed == verdict.found
