"""Checks run before `make demo`, `make test` and `make ui`: one line each when something is off."""

import argparse
import sys

from eos_assets.lib.errors import EosError
from eos_assets.lib.ports import port_free
from eos_assets.lib.spark import jars
from eos_assets.lib.spark.java import require_java


def main(argv: list[str] | None = None) -> int:
    """Exit 1 with one line saying what to do when Java or the Delta jars every Spark session
    loads are missing, or a port is busy."""
    parser = argparse.ArgumentParser(prog="python -m eos_assets.preflight")
    parser.add_argument("--port", type=int, action="append", default=[], help="must be free")
    args = parser.parse_args(argv)
    try:
        require_java()
        jars.jar_dir("delta")
    except EosError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for port in args.port:
        if not port_free(port):
            print(
                f"error: port {port} is busy: stop what uses it or pick another "
                "(e.g. DAGSTER_PORT=3001 make ui)",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
