"""One outbound run in a process of its own, for the tests to kill at a crash point.

``python -m eos_assets_tests.outbound.run_once publish --table URI --bootstrap B --topic T``
publishes window revisions (``--transaction-timeout-ms`` sets the producer's
``transaction.timeout.ms``: long, so that a paused run's transaction cannot expire during a
test and only fencing can end it); ``... notify --kpi URI --ledger URI [--url U]`` delivers
the alerts of the orders stream's declared rules over its KPI window table at ``--kpi`` (delivery
policy from ``EOS_ALERT_*``). Prints one line ``EOS_OUTCOME <json>``; an
``EosError`` exits with code 3. No Spark is started.
"""

import argparse
import json
import sys
from dataclasses import asdict

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.contract.stream_shape import KpiSpec
from eos_assets.lib.errors import EosError
from eos_assets.lib.outbound.alert_rules import Rule, notify
from eos_assets.lib.outbound.outbound_publish import publish_windows
from eos_assets.settings import read_alert_policy

FAILED = 3
KPI_WINDOW = "kpi_window"


def kpi_window_rules(uri: str) -> list[tuple[KpiSpec, str, list[Rule]]]:
    """The orders stream's KPI window table at ``uri`` with the alert rules declared on it."""
    (spec,) = [s for s in ORDERS.kpi_specs if s.name == KPI_WINDOW]
    return [(spec, uri, [r for r in ORDERS.alerts if r.kpi == KPI_WINDOW])]


def main(argv: list[str] | None = None) -> int:
    """Run what ``argv`` says; return the exit code."""
    parser = argparse.ArgumentParser(prog="run_once")
    sub = parser.add_subparsers(dest="command", required=True)
    pub = sub.add_parser("publish")
    pub.add_argument("--table", required=True)
    pub.add_argument("--bootstrap", required=True)
    pub.add_argument("--topic", required=True)
    pub.add_argument("--max-records", type=int, default=10_000)
    pub.add_argument("--transaction-timeout-ms", type=int, default=None)
    alerts = sub.add_parser("notify")
    alerts.add_argument("--kpi", required=True)
    alerts.add_argument("--ledger", required=True)
    alerts.add_argument("--url", default=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "publish":
            config = {"bootstrap.servers": args.bootstrap}
            if args.transaction_timeout_ms is not None:
                config["transaction.timeout.ms"] = str(args.transaction_timeout_ms)
            result = asdict(
                publish_windows(ORDERS.windows, args.table, config, args.topic, 3, args.max_records)
            )
        else:
            policy = read_alert_policy()
            result = asdict(notify(kpi_window_rules(args.kpi), args.ledger, args.url, policy))
    except EosError as exc:
        print("EOS_OUTCOME " + json.dumps({"ok": False, "error": str(exc)}), flush=True)
        return FAILED
    print("EOS_OUTCOME " + json.dumps({"ok": True, **result}, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
