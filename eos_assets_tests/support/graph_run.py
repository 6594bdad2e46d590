"""A test's run of the orders graph on real services (the ``orders_graph`` fixture): its topic
on the session's broker, its lake and DuckDB file, the product producer sending to the topic,
and materializations with real resources."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets_tests.support import graph


@dataclass
class OrdersGraph:
    """The orders graph of one test, over ``topic`` and the lake at ``lake_root``."""

    bootstrap: str
    topic: str
    lake_root: str
    warehouse: Path
    folder: Path  # the test's own folder: the producer's manifests
    resources: dict[str, Any] = field(init=False)

    @classmethod
    def in_folder(cls, bootstrap: str, topic: str, folder: Path) -> "OrdersGraph":
        """The graph over ``topic`` with its lake, DuckDB file and manifests in ``folder``."""
        return cls(bootstrap, topic, str(folder / "lake"), folder / "serving.duckdb", folder)

    def __post_init__(self) -> None:
        self.resources = graph.resources(self.bootstrap, self.topic, self.lake_root, self.warehouse)

    def send(self, name: str, **options: Any) -> list[dict[str, Any]]:
        """Run the product producer on the topic with ``options``; its manifest lines (the
        oracle's input), kept as ``name``.jsonl in the test's folder."""
        path = self.folder / f"{name}.jsonl"
        produce(self.bootstrap, ProduceOptions(topic=self.topic, **options), path)
        return read_manifest(path)

    def materialize(
        self, assets: Sequence[Any], run_config: Mapping[str, Any]
    ) -> dg.ExecuteInProcessResult:
        """Materialize ``assets`` on the real resources (``graph.materialize``); must succeed."""
        return graph.materialize(assets, self.resources, run_config)
