"""Materialize silver/gold assets once, in a process of its own (for crash tests).

``python -m eos_assets_tests.support.derived_once --lake DIR --warehouse FILE
--asset silver/events``;
with ``EOS_FAULT_CRASH_AT`` set, the process dies with SIGKILL at that point.
"""

import argparse

import dagster as dg
from dagster_pyspark import LazyPySparkResource

from eos_assets.lib.spark.spark_env import spark_config
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.warehouse import WarehouseResource
from eos_assets_tests.support import graph


def main() -> int:
    """Materialize the chosen assets; exit 0 when the run succeeded."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--lake", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--asset", action="append", required=True, help="layer/table")
    parser.add_argument("--window-minutes", type=float, default=5.0)
    parser.add_argument("--grace-minutes", type=float, default=10.0)
    args = parser.parse_args()
    wanted = {dg.AssetKey.from_user_string(a) for a in args.asset}
    assets = [a for a in graph.DERIVED if set(a.keys) & wanted]
    resources = {
        "lake": LakeResource(root=args.lake),
        "pyspark": LazyPySparkResource(spark_config=spark_config("local[2]")),
        "warehouse": WarehouseResource(path=args.warehouse),
    }
    config = graph.window_config(args.window_minutes, args.grace_minutes)
    used = {"ops": {k: v for k, v in config["ops"].items() if any(a.op.name == k for a in assets)}}
    result = dg.materialize(assets, resources=resources, run_config=used, raise_on_error=False)
    return 0 if result.success else 1


if __name__ == "__main__":
    raise SystemExit(main())
