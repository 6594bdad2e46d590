"""Fixtures of the fault suite: a table per test, the product producer, the fault ledger, and
the bench that holds them."""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eos_assets.devkit.producer import ProduceOptions, ProduceSummary, produce, read_manifest
from eos_assets_tests.faults.harness import Ledger, stop_stragglers
from eos_assets_tests.support.fault_bench import Bench


@pytest.fixture(scope="session")
def ledger() -> Ledger:
    """Every fault injected in this session, printed at the end of the run."""
    return Ledger("exactly-once fault ledger")


@pytest.fixture(autouse=True)
def _no_stray_ingests() -> Iterator[None]:
    """Whatever a test asserted, no ingest process of it outlives it."""
    yield
    stop_stragglers()


@pytest.fixture
def table(lake_root: str) -> str:
    """Location of this test's bronze table (not created)."""
    return str(Path(lake_root) / "orders" / "bronze" / "raw_events")


@pytest.fixture
def produced(
    kafka_bootstrap: str, tmp_path: Path
) -> Callable[..., tuple[ProduceSummary, list[dict[str, Any]]]]:
    """Factory: ``produced(topic, count, seed, **options)`` runs the product producer.

    Returns its summary and its manifest lines (the oracle). Aborted transactions and
    malformed records are in the mix by default.
    """
    runs = iter(range(1_000_000))

    def make(
        topic: str, count: int, seed: int, bootstrap: str | None = None, **options: Any
    ) -> tuple[ProduceSummary, list[dict[str, Any]]]:
        mix = {"abort_ratio": 0.2, "malformed_ratio": 0.05, "transaction_size": 100}
        opts = ProduceOptions(topic=topic, count=count, seed=seed, **{**mix, **options})
        path = tmp_path / "manifests" / f"{topic}-{next(runs)}.jsonl"
        summary = produce(bootstrap or kafka_bootstrap, opts, path)
        return summary, read_manifest(path)

    return make


@pytest.fixture
def bench(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produced: Callable,
    table: str,
    ledger: Ledger,
) -> Bench:
    """The session's broker, this test's topics, producer and bronze table, and the ledger."""
    return Bench(kafka_bootstrap, table, ledger, make_topic, produced)
