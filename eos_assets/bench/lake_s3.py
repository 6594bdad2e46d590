"""The lake on object storage against the local disk: ingest and the graph from empty on the
same stream, once into a local lake and once into the lake of ``--lake s3://...``, in one run.

The store is configured by the variables of a lake on S3 (README, "The lake on object
storage"). After one uncounted pass into a third local lake (the JVM's warm-up), the runs
alternate (local ingest, S3 ingest, local graph, S3 graph) in one Spark session that has the
s3a jars, so both lakes see the same warm JVM.
"""

import os
import uuid
from pathlib import Path

from eos_assets.bench.lake import BRONZE, DERIVED, UNCAPPED, BenchLake, start_spark
from eos_assets.bench.options import BenchOptions
from eos_assets.bench.report import Measurement, time_ratio
from eos_assets.bench.stream import Stream
from eos_assets.lib import lake_store
from eos_assets.lib.errors import ConfigError


def lake_stage(o: BenchOptions, work: Path, bootstrap: str, client: dict) -> list[Measurement]:
    """Ingest and the graph from empty at ``o.events`` events, on S3 and on the local disk.

    Raises:
        ConfigError: ``o.lake`` is not an S3 URI, or its variables cannot work (one line).
    """
    root = o.lake or ""
    if not lake_store.is_s3(root):
        raise ConfigError(f"--lake {root!r} is not an s3:// URI: give s3://<bucket>/<prefix>")
    if problem := lake_store.problem(root, os.environ):
        raise ConfigError(problem)
    os.environ["EOS_LAKE_ROOT"] = root  # the bench's session gets the s3a jars and settings
    start_spark(o.master)
    stream = Stream(bootstrap, client, work, "lake", o.producers)
    stream.extend(o.events)
    local = BenchLake(work / "lake-local", bootstrap, stream.topic, o.master)
    remote = BenchLake(
        work / "lake-s3",
        bootstrap,
        stream.topic,
        o.master,
        lake=f"{root.rstrip('/')}/bench-{uuid.uuid4().hex[:8]}",
    )
    # One uncounted pass first: whichever lake ran first would pay the cold JVM's class loading
    # and compilation (at 5,000 events without it the local disk came out 3-5x slower than S3).
    warm = BenchLake(work / "lake-warm-up", bootstrap, stream.topic, o.master)
    warm.materialize([*BRONZE, *DERIVED], UNCAPPED)
    ingest = {name: lake.materialize(BRONZE, UNCAPPED).wall for name, lake in _both(local, remote)}
    graph = {name: lake.materialize(DERIVED).wall for name, lake in _both(local, remote)}
    return [
        time_ratio(
            "ingest",
            f"ingest from empty on S3 / local disk at {o.events:,} events",
            ingest,
            "s3",
            "local",
        ),
        time_ratio(
            "graph",
            f"derived assets from empty on S3 / local disk at {o.events:,}",
            graph,
            "s3",
            "local",
        ),
    ]


def _both(local: BenchLake, remote: BenchLake) -> list[tuple[str, BenchLake]]:
    return [("local", local), ("s3", remote)]
