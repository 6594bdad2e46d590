"""The ``eos-assets`` command: the embedded broker, the local Spark server, the demo producer,
the demo and the bench.

Each subcommand is one ``cmd_*`` function taking the parsed arguments and returning the exit
code; ``build_parser`` wires them up, so a new subcommand is a parser plus one function.
"""

import argparse
import re
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from eos_assets.bench.options import add_bench_arguments, bench_options
from eos_assets.demo import DemoOptions, run_demo
from eos_assets.devkit import broker
from eos_assets.devkit.producer import PLANNERS, ProduceOptions, produce
from eos_assets.lib.errors import EosError
from eos_assets.lib.spark import spark_cds, spark_server
from eos_assets.resources.kafka import bootstrap_servers
from eos_assets.settings import Settings

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except EosError as exc:
        print(f"eos-assets: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("eos-assets: interrupted", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of every subcommand; each sets ``handler`` to its ``cmd_*``."""
    parser = argparse.ArgumentParser(
        prog="eos-assets", description="Kafka topics into Delta tables, exactly once."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    brk = commands.add_parser("broker", help="the embedded Kafka broker for the demo and tests")
    actions = brk.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("up", help="start it (or find it running) and print its address")
    start.add_argument("--port", type=int, default=0, help="Kafka port (default: any free one)")
    start.set_defaults(handler=cmd_broker_up)
    actions.add_parser("down", help="stop it (its data is kept)").set_defaults(
        handler=cmd_broker_down
    )
    actions.add_parser("status", help="exit 0 when it runs, 1 when not").set_defaults(
        handler=cmd_broker_status
    )

    spk = commands.add_parser(
        "spark", help="the local Spark Connect server that runs use with EOS_SPARK_CONNECT=local"
    )
    actions = spk.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("up", help="start it (or find it running) and print its URL")
    start.add_argument("--port", type=int, default=0, help="port (default: the previous or any)")
    start.set_defaults(handler=cmd_spark_up)
    actions.add_parser("down", help="stop it").set_defaults(handler=cmd_spark_down)
    actions.add_parser("status", help="exit 0 when it runs, 1 when not").set_defaults(
        handler=cmd_spark_status
    )

    prod = commands.add_parser(
        "produce", help="produce demo events (orders or page views) transactionally"
    )
    defaults = ProduceOptions()
    prod.add_argument(
        "--stream", choices=list(PLANNERS), default=defaults.stream, help="whose demo events"
    )
    prod.add_argument("--topic", default=None, help="default: the stream's name")
    prod.add_argument("--count", type=int, default=defaults.count, help="records, all kinds")
    prod.add_argument("--rate", type=float, default=0.0, help="records/s (0: as fast as possible)")
    prod.add_argument("--partitions", type=int, default=defaults.partitions, help="if created")
    prod.add_argument("--seed", type=int, default=None, help="default: random, in the summary")
    prod.add_argument("--transaction-size", type=int, default=defaults.transaction_size)
    prod.add_argument("--duplicate-ratio", type=float, default=0.0, help="re-sent event ids")
    prod.add_argument("--late-ratio", type=float, default=0.0, help="events far in the past")
    prod.add_argument("--late-by", type=_duration, default=defaults.late_by, help="e.g. 2h, 90m")
    prod.add_argument("--abort-ratio", type=float, default=0.0, help="aborted transactions")
    prod.add_argument("--malformed-ratio", type=float, default=0.0, help="broken records")
    prod.add_argument("--start-time", type=_timestamp, default=None, help="ISO 8601, UTC")
    prod.add_argument(
        "--transactional-id",
        default=None,
        help="producer identity (default eos-producer-TOPIC): a restart fences the previous run",
    )
    prod.add_argument(
        "--transaction-timeout-ms",
        type=int,
        default=defaults.transaction_timeout_ms,
        help="the broker aborts a transaction left open this long",
    )
    prod.add_argument("--manifest", type=Path, default=None, help="JSON lines, one per record")
    prod.set_defaults(handler=cmd_produce)

    demo = commands.add_parser(
        "demo", help="broker, a demo stream, every asset through Dagster, then a summary"
    )
    demo.add_argument("--count", type=int, default=DemoOptions.count, help="records to produce")
    demo.add_argument("--partitions", type=int, default=DemoOptions.partitions)
    demo.add_argument("--seed", type=int, default=None, help="default: random")
    demo.add_argument(
        "--stream",
        default=DemoOptions.stream,
        help="a stream declared in eos_assets/streams, or an example of eos_assets/examples "
        "(page_views)",
    )
    demo.set_defaults(handler=cmd_demo)

    bench = commands.add_parser(
        "bench", help="measure speed against this machine's own ceiling (see BENCHMARKS.md)"
    )
    add_bench_arguments(bench)
    bench.set_defaults(handler=cmd_bench)

    commands.add_parser(
        "spark-archive",
        help="write this install's class archive of the Spark driver (runs start sooner)",
    ).set_defaults(handler=cmd_spark_archive)
    return parser


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo end to end and print its summary."""
    options = DemoOptions(
        count=args.count, partitions=args.partitions, seed=args.seed, stream=args.stream
    )
    print(run_demo(options))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark (or, with --profile, the profiles) and write the result files."""
    options = bench_options(args)
    if options.profile:
        from eos_assets.bench.profile import run_profile

        run_profile(options)
        return 0
    from eos_assets.bench.runner import run_bench

    run_bench(options)
    return 0


def cmd_spark_archive(args: argparse.Namespace) -> int:
    """Write the driver's class archive unless this install has it; print its path."""
    print(spark_cds.build())
    return 0


def cmd_broker_up(args: argparse.Namespace) -> int:
    """Start the embedded broker unless it runs; print its bootstrap address."""
    info = broker.up(_state_dir(), port=args.port)
    print(info.bootstrap)
    return 0


def cmd_broker_down(args: argparse.Namespace) -> int:
    """Stop the embedded broker; a broker that is not running is not an error."""
    return _stopped(broker.down(_state_dir()))


def cmd_broker_status(args: argparse.Namespace) -> int:
    """Print where the embedded broker runs; exit 1 when it does not."""
    info = broker.broker_status(_state_dir())
    if info is None:
        return _not_running("broker")
    print(f"running at {info.bootstrap} (pid {info.pid}, data {info.data_dir})")
    return 0


def cmd_spark_up(args: argparse.Namespace) -> int:
    """Start the local Spark Connect server unless it runs; print its URL."""
    settings = Settings.from_env()
    info = spark_server.up(Path(settings.state_dir), settings.spark_master, port=args.port)
    print(info.url)
    return 0


def cmd_spark_down(args: argparse.Namespace) -> int:
    """Stop the local Spark Connect server; a server that is not running is not an error."""
    return _stopped(spark_server.down(_state_dir()))


def cmd_spark_status(args: argparse.Namespace) -> int:
    """Print where the local Spark Connect server runs; exit 1 when it does not."""
    info = spark_server.server_status(_state_dir())
    if info is None:
        return _not_running("spark")
    print(f"running at {info.url} (pid {info.pid}, log {info.log})")
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    """Produce demo events and print a one-line summary."""
    settings = Settings.from_env()
    options = ProduceOptions(
        stream=args.stream,
        topic=args.topic or args.stream,
        count=args.count,
        rate=args.rate,
        partitions=args.partitions,
        seed=args.seed,
        transaction_size=args.transaction_size,
        duplicate_ratio=args.duplicate_ratio,
        late_ratio=args.late_ratio,
        late_by=args.late_by,
        abort_ratio=args.abort_ratio,
        malformed_ratio=args.malformed_ratio,
        start_time=args.start_time,
        transactional_id=args.transactional_id,
        transaction_timeout_ms=args.transaction_timeout_ms,
    )
    options.validate()  # before looking for a broker: a typo should not wait on the network
    manifest = args.manifest
    if manifest is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        manifest = Path(settings.state_dir) / "manifests" / f"{options.topic}-{stamp}.jsonl"
    bootstrap = bootstrap_servers(settings)
    # SIGTERM (a scheduler, `docker stop`) unwinds like Ctrl-C so the open transaction is
    # aborted at once instead of holding readers back until the broker's transaction timeout.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        s = produce(bootstrap, options, manifest, dict(settings.kafka_client))
    finally:
        signal.signal(signal.SIGTERM, previous)
    kinds = s.counts.get("committed", {})
    print(
        f"{s.records} records to {s.topic} ({s.partitions} partitions) in {s.seconds:.1f}s "
        f"({s.events_per_second:,.0f}/s): {s.committed} committed "
        f"({kinds.get('duplicate', 0)} duplicate, {kinds.get('late', 0)} late, "
        f"{kinds.get('malformed', 0)} malformed), {s.aborted} aborted in "
        f"{s.transactions_aborted} transactions; seed {s.seed}; manifest {manifest}"
    )
    return 0


def _duration(text: str) -> timedelta:
    match = _DURATION.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 30s, 90m, 2h)")
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def _timestamp(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from exc
    # A time without a zone is taken as UTC, the zone of every event time.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _state_dir() -> Path:
    return Path(Settings.from_env().state_dir)


def _stopped(stopped: bool) -> int:
    """The end of ``down`` of a local service (``broker``, ``spark``): it says whether it
    stopped one; a service that was not running is not an error."""
    print("stopped" if stopped else "not running")
    return 0


def _not_running(command: str) -> int:
    """The end of ``status`` of a local service found not running: how to start it, exit 1."""
    print(f"not running (start it with `eos-assets {command} up`)")
    return 1
