"""The ``eos-assets`` command: the embedded broker, the local Spark server, the demo producer,
the local S3 server, the local schema registry, the demo, the bench and the Java parts (``jars``).

Each subcommand is one ``cmd_*`` function taking the parsed arguments and returning the exit
code; ``build_parser`` wires them up, so a new subcommand is a parser plus one function. The
local services (the broker, the Spark server, the S3 server, the schema registry) share ``up``,
``down`` and ``status``: each is a ``LocalService`` the parser hands to ``cmd_up``, ``cmd_down``
and ``cmd_status``.
"""

import argparse
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from eos_assets.bench.options import add_bench_arguments, bench_options
from eos_assets.demo_options import DemoOptions
from eos_assets.devkit import broker, cluster, cluster_security, registry, s3server
from eos_assets.devkit.producer import FORMATS, PLANNERS, ProduceOptions, produce
from eos_assets.lib.errors import ConfigError, EosError
from eos_assets.lib.schema_registry import RegistryConfig
from eos_assets.settings import Settings, read_jars_root

# The demo (Dagster, the asset graph) and Spark's modules take seconds to import: they are
# imported by the commands that use them, so `produce` and `broker` start at once.

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class LocalService:
    """What ``eos-assets <name> up|down|status`` runs: ``start`` (settings, port; 0: any) gives
    its address, ``stop`` (state folder) whether one ran, ``where`` its line or None."""

    name: str
    start: Callable[[Settings, int], str]
    stop: Callable[[Path], bool]
    where: Callable[[Path], str | None]


def _broker_where(state_dir: Path) -> str | None:
    info = broker.broker_status(state_dir)
    return info and f"running at {info.bootstrap} (pid {info.pid}, data {info.data_dir})"


def _spark_up(settings: Settings, port: int) -> str:
    from eos_assets.lib.spark import spark_server

    return spark_server.up(Path(settings.state_dir), settings.spark_master, port=port).url


def _spark_down(state_dir: Path) -> bool:
    from eos_assets.lib.spark import spark_server

    return spark_server.down(state_dir)


def _spark_where(state_dir: Path) -> str | None:
    from eos_assets.lib.spark import spark_server

    info = spark_server.server_status(state_dir)
    return info and f"running at {info.url} (pid {info.pid}, log {info.log})"


def _broker_down(state_dir: Path) -> bool:
    # A cluster first: its record names every node, the one-node record only the first.
    return cluster.down(state_dir) or broker.down(state_dir)


BROKER = LocalService(
    "broker",
    lambda settings, port: broker.up(Path(settings.state_dir), port=port).bootstrap,
    _broker_down,
    _broker_where,
)
SPARK = LocalService("spark", _spark_up, _spark_down, _spark_where)


def _s3_where(state_dir: Path) -> str | None:
    info = s3server.server_status(state_dir)
    return info and f"running at {info.endpoint} (pid {info.pid}, data {info.data_dir})"


def _s3_exports(settings: Settings, port: int) -> str:
    """``export`` lines of the variables that put the lake on the local S3 server."""
    info = s3server.up(Path(settings.state_dir), port=port)
    return "\n".join(f"export {name}={value}" for name, value in info.env().items())


S3 = LocalService("s3", _s3_exports, s3server.down, _s3_where)


def _registry_where(state_dir: Path) -> str | None:
    info = registry.registry_status(state_dir)
    return info and f"running at {info.url} (pid {info.pid}, data {info.data_dir})"


REGISTRY = LocalService(
    "registry",
    lambda settings, port: registry.up(Path(settings.state_dir), port=port).url,
    registry.down,
    _registry_where,
)


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

    broker_up = _service_parser(
        commands,
        BROKER,
        "the embedded Kafka broker for the demo and tests",
        (
            "start it (or find it running) and print its address",
            "Kafka port (default: any free one)",
        ),
        "stop it (its data is kept)",
    )
    broker_up.add_argument(
        "--nodes",
        type=int,
        choices=(1, 3),
        default=1,
        help="3: a replicated cluster (RF 3, min ISR 2, no unclean election) on 127.0.0.1",
    )
    broker_up.add_argument(
        "--secure",
        action="store_true",
        help="with --nodes 3: a SASL_SSL listener (SCRAM-SHA-512, a local CA, ACLs); prints "
        "the EOS_KAFKA_* exports of the product's user",
    )
    _service_parser(
        commands,
        SPARK,
        "the local Spark Connect server that runs use with EOS_SPARK_CONNECT=local",
        ("start it (or find it running) and print its URL", "port (default: the previous or any)"),
        "stop it",
    )

    _service_parser(
        commands,
        S3,
        "a local S3 server (S3Proxy) for a lake on object storage",
        (
            "start it (or find it running) and print the variables of a lake on it "
            '(eval "$(eos-assets s3 up)")',
            "port (default: any free one)",
        ),
        "stop it (its data is kept)",
    )
    _service_parser(
        commands,
        REGISTRY,
        "a local schema registry (Apicurio Registry, Confluent-compatible API; Java 21+)",
        ("start it (or find it running) and print its URL", "port (default: the previous or any)"),
        "stop it (its schemas are kept)",
    )

    prod = commands.add_parser(
        "produce", help="produce demo events (orders or page views) transactionally"
    )
    defaults = ProduceOptions()
    prod.add_argument(
        "--stream", choices=list(PLANNERS), default=defaults.stream, help="whose demo events"
    )
    prod.add_argument("--topic", default=None, help="default: the stream's name")
    prod.add_argument(
        "--bootstrap",
        default=None,
        help="the broker (default: EOS_KAFKA_BOOTSTRAP, else the embedded one); a stream that "
        "declares kafka.bootstrap_servers reads its topics there",
    )
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
    prod.add_argument(
        "--format",
        choices=FORMATS,
        default="json",
        help="json values, or avro records framed for the schema registry (the same events)",
    )
    prod.add_argument(
        "--registry",
        default=None,
        help="the schema registry of --format avro (default: EOS_SCHEMA_REGISTRY_URL, else the "
        "local one of `eos-assets registry up`)",
    )
    prod.set_defaults(handler=cmd_produce)

    demo = commands.add_parser(
        "demo", help="broker, a demo stream, every asset through Dagster, then a summary"
    )
    # Defaults None: DemoOptions' own (see cmd_demo).
    demo.add_argument("--count", type=int, default=None, help="records to produce (20,000)")
    demo.add_argument("--partitions", type=int, default=None, help="if created (6)")
    demo.add_argument("--seed", type=int, default=None, help="default: random")
    demo.add_argument(
        "--stream",
        default=None,
        help="a stream declared in eos_assets/streams (default orders), or an example of "
        "eos_assets/examples (page_views)",
    )
    demo.add_argument(
        "--continuous",
        type=float,
        default=None,
        metavar="SECONDS",
        help="run the stream's continuous loop (as if declared mode: continuous) while a "
        "paced producer sends --rate events/s for SECONDS, then list its batches",
    )
    demo.add_argument("--rate", type=float, default=None, help="with --continuous (1,000)")
    demo.set_defaults(handler=cmd_demo)

    run = commands.add_parser(
        "run",
        help="run one declared stream's graph by name (its job <stream>__ingest_and_refresh)",
    )
    run.add_argument(
        "--stream",
        required=True,
        help="a stream declared in the Dagster project of this folder (its pyproject.toml), "
        "else in eos_assets/streams",
    )
    run.set_defaults(handler=cmd_run)

    bench = commands.add_parser(
        "bench", help="measure speed against this machine's own ceiling (see BENCHMARKS.md)"
    )
    add_bench_arguments(bench)
    bench.set_defaults(handler=cmd_bench)

    fetch = commands.add_parser(
        "jars",
        help="fetch the Java parts from Maven Central with Maven (Apache Kafka, Delta for "
        "Spark) into EOS_JARS_DIR, a checkout's .jars or ~/.cache/eos_assets/jars",
    )
    fetch.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where (default: EOS_JARS_DIR, a checkout's .jars, else ~/.cache/eos_assets/jars)",
    )
    fetch.add_argument(
        "--s3", action="store_true", help="also those of a lake on S3 (about 690 MB) and S3Proxy"
    )
    fetch.add_argument(
        "--peers", action="store_true", help="also the bench's peers (Spark's Kafka source, "
        "Kafka Streams)"
    )  # fmt: skip
    fetch.add_argument(
        "--registry", action="store_true", help="also the local schema registry (about 160 MB)"
    )
    fetch.set_defaults(handler=cmd_jars)

    commands.add_parser(
        "spark-archive",
        help="write this install's class archive of the Spark driver (runs start sooner)",
    ).set_defaults(handler=cmd_spark_archive)
    return parser


def _service_parser(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
    service: LocalService,
    about: str,
    up: tuple[str, str],
    down: str,
) -> argparse.ArgumentParser:
    """``eos-assets <service> up|down|status``; ``up`` is its help and its port's. Returns
    the parser of ``up``."""
    actions = commands.add_parser(service.name, help=about).add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    start = actions.add_parser("up", help=up[0])
    start.add_argument("--port", type=int, default=0, help=up[1])
    start.set_defaults(handler=cmd_up, service=service)
    actions.add_parser("down", help=down).set_defaults(handler=cmd_down, service=service)
    actions.add_parser("status", help="exit 0 when it runs, 1 when not").set_defaults(
        handler=cmd_status, service=service
    )
    return start


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo end to end and print its summary."""
    from eos_assets.demo import run_demo

    given = {
        "count": args.count, "partitions": args.partitions, "stream": args.stream,
        "rate": args.rate,
    }  # fmt: skip
    options = DemoOptions(seed=args.seed, **{k: v for k, v in given.items() if v is not None})
    if args.continuous is not None:
        from eos_assets.demo_continuous import run_continuous_demo

        if args.continuous <= 0 or options.rate <= 0:
            raise ConfigError("--continuous and --rate must be > 0 (seconds, events per second)")
        print(run_continuous_demo(options, args.continuous))
        return 0
    print(run_demo(options))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run one declared stream's job in this process and print what it materialized."""
    from eos_assets.run_stream import run_stream

    print(run_stream(args.stream))
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


def cmd_jars(args: argparse.Namespace) -> int:
    """Fetch the jars that are missing or whose pom changed; print where they are."""
    from eos_assets.devkit import maven

    root = (args.dir or read_jars_root()).resolve()
    fetched = maven.fetch(maven.wanted(args.s3, args.peers, args.registry), root)
    print(f"{root} ({'fetched ' + ', '.join(fetched) if fetched else 'up to date'})")
    return 0


def cmd_spark_archive(args: argparse.Namespace) -> int:
    """Write the driver's class archive unless this install has it; print its path."""
    from eos_assets.lib.spark import spark_cds

    print(spark_cds.build())
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    """Start a local service unless it runs; print its address."""
    secure = getattr(args, "secure", False)
    if secure and getattr(args, "nodes", 1) == 1:
        raise EosError("--secure needs a cluster: `eos-assets broker up --nodes 3 --secure`")
    if getattr(args, "nodes", 1) > 1:
        info = cluster.up(_state_dir(), args.nodes, secure)
        if not info.secure_bootstrap:
            print(info.bootstrap)
            return 0
        folder = Path(info.nodes[0].data_dir).parent
        password = cluster_security.local_users(folder)[cluster_security.PRODUCT]
        print(f"# admin (super user) {cluster_security.ADMIN}: password in {folder}/users.json")
        print(f"# plaintext listener (administration only): {info.bootstrap}")
        print("\n".join(cluster_security.exports(info.secure_bootstrap, info.ca_pem, password)))
        return 0
    print(args.service.start(Settings.from_env(), args.port))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    """Stop a local service; one that is not running is not an error."""
    print("stopped" if args.service.stop(_state_dir()) else "not running")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print where a local service runs; exit 1, saying how to start it, when it does not."""
    line = args.service.where(_state_dir())
    if line is None:
        print(f"not running (start it with `eos-assets {args.service.name} up`)")
        return 1
    print(line)
    return 0


def _registry(url: str | None, settings: Settings) -> RegistryConfig:
    """The registry ``--registry`` names, else the one the streams read through."""
    from eos_assets.resources.kafka import registry_config

    if url:
        user, password = settings.schema_registry_username, settings.schema_registry_password
        return RegistryConfig(url, user, password)
    return registry_config(settings)


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
        format=args.format,
        registry=_registry(args.registry, settings) if args.format == "avro" else None,
    )
    options.validate()  # before looking for a broker: a typo should not wait on the network
    manifest = args.manifest
    if manifest is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        manifest = Path(settings.state_dir) / "manifests" / f"{options.topic}-{stamp}.jsonl"
    # As the Kafka resource finds it (resources/kafka.py), without importing Dagster.
    bootstrap = (
        args.bootstrap
        or settings.kafka_bootstrap
        or broker.embedded_bootstrap(Path(settings.state_dir))
    )
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
        + (
            f"; {s.transactions_sent_again} transactions sent again after a broker failure"
            if s.transactions_sent_again
            else ""
        )
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
