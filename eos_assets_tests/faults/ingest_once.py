"""One bronze ingest in a process of its own, for the fault tests to kill.

``python -m eos_assets_tests.faults.ingest_once --bootstrap B --topic T --table URI`` starts a
local[2] SparkSession, runs ``ingest_bronze`` once and prints one JSON line: the outcome
(``"ok": true``) or the one-line ``EosError`` (``"ok": false``, exit code 3); a line
``EOS_SPARK_READY`` comes first, when Spark is up and the ingest proper begins. The crash points
and the pause point of ``eos_assets.lib.faults`` are armed through the environment. With
``--remote sc://...`` the session is a Spark Connect one of that server instead, with the
product's retry bound (``spark_modes.bound_retries``).
"""

import argparse
import json
import sys

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.errors import EosError
from eos_assets.lib.ingest.ingest import IngestOptions, ingest_bronze

FAILED = 3
READY = "EOS_SPARK_READY"  # printed once Spark is up: the ingest proper starts now


def main(argv: list[str] | None = None) -> int:
    """Run one ingest as told by ``argv``; return the exit code."""
    parser = argparse.ArgumentParser(prog="ingest_once")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", action="append", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--max-records", type=int, default=None)
    parser.add_argument("--read-timeout", type=float, default=60.0)
    parser.add_argument("--remote", default=None, help="a Spark Connect URL")
    args = parser.parse_args(argv)
    try:
        session = _spark(args.remote)
        print(READY, flush=True)
        outcome = ingest_bronze(
            session,
            args.table,
            args.topic,
            {"bootstrap.servers": args.bootstrap},
            IngestOptions(max_records=args.max_records, read_timeout_s=args.read_timeout),
            contract=ORDERS.contract,
        )
    except EosError as exc:
        _say({"ok": False, "kind": type(exc).__name__, "error": str(exc)})
        return FAILED
    _say(
        {
            "ok": True,
            "version": outcome.version,
            "records": outcome.records,
            "malformed": outcome.malformed,
            "attempts": outcome.attempts,
            "advisory_committed": outcome.advisory_committed,
            "ranges": outcome.ranges(),
        }
    )
    session.stop()
    return 0


def _spark(remote: str | None = None):
    from pyspark.sql import SparkSession

    if remote is not None:
        from eos_assets.lib.spark.spark_modes import bound_retries

        return bound_retries(SparkSession.builder.remote(remote).getOrCreate())
    from eos_assets.lib.spark.java import require_java
    from eos_assets.lib.spark.spark_env import spark_config, use_this_python

    require_java()
    use_this_python()
    builder = SparkSession.builder
    for key, value in spark_config("local[2]", app_name="eos_fault_ingest").items():
        builder = builder.config(key, value)
    return builder.config("spark.ui.enabled", "false").getOrCreate()


def _say(payload: dict) -> None:
    print("EOS_OUTCOME " + json.dumps(payload), flush=True)


if __name__ == "__main__":
    sys.exit(main())
