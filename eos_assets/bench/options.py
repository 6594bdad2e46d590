"""What a bench run measures and at which sizes."""

import argparse
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from eos_assets.lib.errors import ConfigError

# In the order they run; each can be selected alone with --only.
STAGES = ("ingest", "memory", "graph", "peer", "incremental", "checks", "freshness")
# Stages that run only when named, and alone (``cluster_bench.py``: a 3-node cluster of its own;
# ``continuous``: the freshness stage's continuous streams and Kafka Streams, nothing else).
ALONE = ("cluster", "continuous")


@dataclass(frozen=True)
class BenchOptions:
    """Sizes and stages of one bench run (defaults: ``make bench``).

    Attributes:
        events: events of the main stream (ingest, graph from empty, peer).
        big: events of the large stream (memory, incremental on a large table, checks).
        batch: events of the incremental batch added on top of each.
        freshness_s: how long the steady stream of the freshness stage lasts.
        rate: events per second of that stream.
        fast_rate: events per second of the continuous stream's second, shorter run (0: none).
        backlog: events of the freshness stage's timed run and of its demo.
        producers: producer processes for the bulk streams.
        repeats: passes of each ingest variant (best one counts).
        master: Spark master; its task slots are the ceiling's parallelism.
        only: the stages to run (default all).
        out: result files stem (``.json`` and ``.md`` are added).
        work: scratch folder (broker data, lakes); default a folder next to ``out``.
        keep: keep the scratch folder.
        update_doc: replace the table in this Markdown file (between the bench markers).
        profile: profile one ingest and the derived assets instead of measuring.
        peers: also run the systems users would pick instead (Spark Structured Streaming,
            Kafka Streams, kafka-producer-perf-test) on the same data (``peers.py``).
        lake: an ``s3://`` lake root: measure ingest and the graph from empty there against
            the local disk instead of the stages (``lake_s3.py``).
    """

    events: int = 1_000_000
    big: int = 5_000_000
    batch: int = 100_000
    freshness_s: float = 180.0
    rate: float = 2000.0
    fast_rate: float = 20000.0
    backlog: int = 20_000
    producers: int = 2
    repeats: int = 3
    master: str = "local[2]"
    only: tuple[str, ...] = STAGES
    out: Path = Path("bench-results/bench")
    work: Path | None = None
    keep: bool = False
    update_doc: Path | None = None
    profile: bool = False
    peers: bool = False
    lake: str | None = None

    def runs(self, stage: str) -> bool:
        """True when ``stage`` is selected."""
        return stage in self.only


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``eos-assets bench``."""
    d = BenchOptions()
    add = parser.add_argument
    add("--events", type=int, default=d.events, help="events of the main stream")
    add("--big", type=int, default=d.big, help="events of the large stream")
    add("--batch", type=int, default=d.batch, help="events of the incremental batch")
    add("--freshness-seconds", type=float, default=d.freshness_s, help="steady stream length")
    add("--rate", type=float, default=d.rate, help="events/s of the steady stream")
    add("--fast-rate", type=float, default=d.fast_rate,
        help="events/s of the continuous stream's second run (0: skip it)")  # fmt: skip
    add("--backlog", type=int, default=d.backlog, help="events of the timed run and the demo")
    add("--producers", type=int, default=d.producers, help="producer processes for bulk data")
    add("--repeats", type=int, default=d.repeats, help="passes of each ingest variant")
    add("--spark-master", default=d.master, help="its task slots set the ceiling's processes")
    add(
        "--only",
        default=",".join(STAGES),
        help=f"comma-separated stages: {', '.join(STAGES)}; or, alone, {', '.join(ALONE)}",
    )
    add("--out", type=Path, default=None, help="result stem (default bench-results/bench-<time>)")
    add("--work", type=Path, default=None, help="scratch folder (default: next to --out)")
    add("--keep", action="store_true", help="keep the scratch folder (broker data, lakes)")
    add("--update-doc", type=Path, default=None, help="replace the table in this Markdown file")
    add("--profile", action="store_true", help="profile one ingest and the derived assets")
    add("--peers", action="store_true", help="also run SS and Kafka Streams peers")
    add("--lake", default=None, help="s3://bucket/prefix: S3 against the local disk only")


def bench_options(args: argparse.Namespace) -> BenchOptions:
    """``BenchOptions`` from parsed arguments.

    Raises:
        ConfigError: an unknown stage or a size below 1.
    """
    only = tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = sorted(set(only) - set(STAGES) - set(ALONE))
    if unknown:
        known = ", ".join((*STAGES, *ALONE))
        raise ConfigError(f"unknown stage(s) {', '.join(unknown)}: choose from {known}")
    alone = [s for s in only if s in ALONE]
    if alone and len(only) > 1:
        raise ConfigError(f"--only {','.join(only)}: {alone[0]} runs alone")
    if min(args.events, args.big, args.batch, args.backlog, args.producers, args.repeats) < 1:
        raise ConfigError(
            "--events, --big, --batch, --backlog, --producers and --repeats must be >= 1"
        )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return BenchOptions(
        events=args.events,
        big=args.big,
        batch=args.batch,
        freshness_s=args.freshness_seconds,
        rate=args.rate,
        fast_rate=args.fast_rate,
        backlog=args.backlog,
        producers=args.producers,
        repeats=args.repeats,
        master=args.spark_master,
        only=only,
        out=args.out or Path("bench-results") / f"bench-{stamp}",
        work=args.work,
        keep=args.keep,
        update_doc=args.update_doc,
        profile=args.profile,
        peers=args.peers,
        lake=args.lake,
    )
