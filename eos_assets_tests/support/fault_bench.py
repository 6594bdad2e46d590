"""The stage of a bronze fault test: the session's broker, topics of the test's own, the
product producer, this test's bronze table, ingests in this process or in processes of their
own, and the fault ledger."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from eos_assets.defs.stream import ORDERS
from eos_assets.devkit.producer import ProduceSummary
from eos_assets.lib.ingest.ingest import IngestOutcome, ingest_bronze
from eos_assets_tests.faults.harness import Ledger, Run, run_ingest, score
from eos_assets_tests.faults.oracle import Verdict
from eos_assets_tests.support.paused_runs import start_paused

Manifest = list[dict[str, Any]]


@dataclass(frozen=True)
class Bench:
    """What a fault test of the bronze ingest runs against (the ``bench`` fixture)."""

    bootstrap: str
    table: str
    ledger: Ledger
    make_topic: Callable[..., str]
    produced: Callable[..., tuple[ProduceSummary, Manifest]]
    remote: str | None = None  # the Spark Connect server of every ingest process, if any

    def topic(self, partitions: int) -> str:
        """A new topic of this test with ``partitions`` partitions."""
        return self.make_topic(partitions=partitions)

    def produce(
        self, topic: str, count: int, seed: int, **options: Any
    ) -> tuple[ProduceSummary, Manifest]:
        """Run the product producer (aborts and malformed records in the mix by default);
        its summary and its manifest lines."""
        return self.produced(topic, count=count, seed=seed, **options)

    def topic_with(
        self, partitions: int, count: int, seed: int, **options: Any
    ) -> tuple[str, ProduceSummary, Manifest]:
        """A new topic and ``count`` records the producer sent to it (:meth:`produce`): the
        topic, the producer's summary and its manifest lines."""
        topic = self.topic(partitions)
        summary, manifest = self.produce(topic, count, seed, **options)
        return topic, summary, manifest

    def ingest(self, spark: SparkSession, topic: str) -> IngestOutcome:
        """One ingest of ``topic`` into the table, in this process."""
        config = {"bootstrap.servers": self.bootstrap}
        return ingest_bronze(spark, self.table, [topic], config, contract=ORDERS.contract)

    def run(self, topic: str, **options: Any) -> Run:
        """An ingest of ``topic`` in a process of its own, waited for."""
        return run_ingest(self.bootstrap, topic, self.table, remote=self.remote, **options)

    def crash(self, topic: str, point: str) -> Run:
        """An ingest of ``topic`` in a process of its own, armed to die at ``point``; it must
        have died there (SIGKILL)."""
        run = self.run(topic, crash_at=point)
        assert run.killed, f"the ingest did not die at {point}: {run.tail()}"
        return run

    def start_paused(
        self, topic: str, point: str, gate: Path, timeout: float, **options: Any
    ) -> Run:
        """Start an ingest of ``topic`` that pauses at ``point``; return once it waits there."""
        return start_paused(
            self.bootstrap, topic, self.table, point, gate, timeout, remote=self.remote, **options
        )

    def score(self, fault: str, manifest: Manifest, note: str = "") -> Verdict:
        """The table judged against ``manifest``; ``fault`` recorded in the ledger."""
        return score(self.ledger, fault, self.table, manifest, note)
