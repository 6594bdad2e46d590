"""The whole graph once, in a process of its own, on a Spark Connect server.

``python -m eos_assets_tests.lake_s3.materialize_once --bootstrap B --topic T --lake ROOT
--warehouse FILE --remote sc://...`` materializes every asset of the orders stream with the
test resources (``support.graph``) and the lake's variables of its environment; exit code 0
when the run succeeded. A process of its own: a classic SparkSession of the test process
would refuse a Spark Connect one.
"""

import argparse
import os
import sys
from pathlib import Path

from dagster_pyspark import LazyPySparkResource

from eos_assets.lib import lake_store
from eos_assets.resources.lake import LakeResource
from eos_assets_tests.support import graph


def main(argv: list[str] | None = None) -> int:
    """Materialize the graph as told by ``argv``; return the exit code."""
    parser = argparse.ArgumentParser(prog="materialize_once")
    for name in ("--bootstrap", "--topic", "--lake", "--warehouse", "--remote"):
        parser.add_argument(name, required=True)
    parser.add_argument(
        "--window-minutes",
        type=float,
        default=1.0,
        help="size and grace of gold/window_aggregates (the KPI tables keep their declared "
        "periods)",
    )
    args = parser.parse_args(argv)
    res = graph.resources(args.bootstrap, args.topic, args.lake, Path(args.warehouse))
    options = lake_store.storage_options(args.lake, os.environ)
    res["lake"] = LakeResource(root=args.lake, storage_options=options)
    res["pyspark"] = LazyPySparkResource(spark_config={"spark.remote": args.remote})
    config = graph.window_config(args.window_minutes, args.window_minutes)
    graph.materialize(graph.ALL, res, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
