"""One bench run: the data it needs, then every selected stage, then the result files."""

import os
import shutil
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
from pyspark.sql import SparkSession

from eos_assets.bench import (
    chart,
    cluster_bench,
    compare,
    lake_s3,
    memory,
    peers,
    stages,
    structured,
)
from eos_assets.bench.freshness import continuous_stage, freshness_stage
from eos_assets.bench.lake import (
    BRONZE,
    DERIVED,
    UNCAPPED,
    BenchLake,
    RunTimes,
    run_checks,
    start_spark,
)
from eos_assets.bench.machine import machine_info
from eos_assets.bench.options import BenchOptions
from eos_assets.bench.report import BenchReport, Measurement, update_doc
from eos_assets.bench.stream import PARTITIONS, Stream, bench_kafka
from eos_assets.bench.warm_graph import warm_graph_lines
from eos_assets.devkit import broker


def run_bench(options: BenchOptions) -> BenchReport:
    """Run the selected stages in one process (plus the probes and producers it starts)."""
    began = time.monotonic()
    stamp = datetime.now(UTC)
    report = BenchReport(
        started=stamp.isoformat(timespec="seconds"),
        machine=machine_info(),
        options={k: str(v) for k, v in vars(options).items()},
    )
    work = options.work or options.out.parent / f"work-{stamp.strftime('%Y%m%dT%H%M%S')}"
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        with bench_kafka(work) as (bootstrap, client):
            if options.lake is not None:
                for line in lake_s3.lake_stage(options, work, bootstrap, client):
                    report.add(line)
            elif options.only == ("cluster",):
                for line in cluster_bench.cluster_stage(options, work, bootstrap, client):
                    report.add(line)
            elif options.only == ("continuous",):
                for line in continuous_stage(bootstrap, client, work / "freshness", options):
                    report.add(line)
            elif options.only != ("freshness",):
                _measured(options, report, work, bootstrap, client)
            if options.lake is None and options.runs("freshness"):
                for line in freshness_stage(bootstrap, client, work / "freshness", options):
                    report.add(line)
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    report.seconds = time.monotonic() - began
    report.finished = datetime.now(UTC).isoformat(timespec="seconds")
    report.load_end = list(os.getloadavg())
    json_path, md_path = report.write(options.out)
    png = chart.write_chart(report.measurements, json_path.with_suffix(".png"))
    print(report.markdown())
    print(f"bench: results in {json_path} and {md_path}" + (f", chart {png}" if png else ""))
    if options.update_doc is not None and update_doc(options.update_doc, report.markdown()):
        print(f"bench: table updated in {options.update_doc}")
        if png is not None:
            shutil.copyfile(png, options.update_doc.with_suffix(".png"))
    return report


def _measured(
    o: BenchOptions,
    report: BenchReport,
    work: Path,
    bootstrap: str,
    client: dict,
) -> None:
    spark = start_spark(o.master, structured.kafka_jars() if o.peers else ())
    slots = spark.sparkContext.defaultParallelism
    small = Stream(bootstrap, client, work, "main", o.producers)
    _produced(report, small, o.events)
    ceiling: float | None = None
    if o.runs("ingest"):
        ss = work / "ss-ingest"
        ss_runs: list[structured.StreamRun] = []
        if o.peers:  # one uncounted pass, as for ours
            structured.ingest(spark, client, small.topic, ss / "warm-up")

        def ss_round(i: int) -> None:
            ss_runs.append(structured.ingest(spark, client, small.topic, ss / f"ss-{i}"))

        lines = stages.ingest_stage(
            spark, client, small.topic, work / "ingest", o.repeats, small.produced,
            ss_round if o.peers else None,
        )  # fmt: skip
        for line in lines:
            report.add(line)
        ceiling = lines[0].value
        if ss_runs:
            bronze = work / "ingest" / "eos-0"
            report.add(peers.ss_ingest_line(ss_runs, lines, bronze, ss / "ss-0"))
    probe_small = None
    if o.runs("memory"):
        probe_small = memory.probe(
            bootstrap, small.topic, work / "memory-small", o.master, _memory_cap(o)
        )
    l1 = BenchLake(work / "lake-main", bootstrap, small.topic, o.master)
    first: RunTimes | None = None
    if o.runs("graph") or o.runs("peer") or o.runs("incremental") or o.peers:
        first = l1.materialize([*BRONZE, *DERIVED])
        for line in stages.graph_stage(first, small.produced, ceiling):
            if o.runs("graph"):
                report.add(line)
    if o.runs("peer") and first is not None:
        report.add(stages.peer_line(l1, first, slots))
        for line in warm_graph_lines(
            work, bootstrap, small.topic, small.produced, o.master, slots, o.repeats
        ):
            report.add(line)
    if o.peers and first is not None:
        _peers(o, report, work, spark, client, small, l1, first)
    inc_small: RunTimes | None = None
    if o.runs("incremental"):
        _produced(report, small, o.batch)
        inc_small = l1.materialize([*BRONZE, *DERIVED])
    if o.runs("incremental") or o.runs("memory") or o.runs("checks"):
        big = Stream(bootstrap, client, work, "big", o.producers)
        _produced(report, big, o.big)
        l5 = BenchLake(work / "lake-big", bootstrap, big.topic, o.master)
        if probe_small is not None:
            probe_big = memory.probe(bootstrap, big.topic, l5.root, o.master, _memory_cap(o))
            report.add(stages.memory_line(probe_small, probe_big))
        # The rest of the backlog in one uncapped run: the tables the next stages measure.
        l5.materialize(BRONZE, UNCAPPED)
        built = l5.materialize(DERIVED)
        report.add(
            Measurement(
                "graph",
                f"derived assets from empty at {big.produced:,} events",
                built.wall,
                "s",
                detail=", ".join(
                    f"{k.replace('__', '/')} {v:.1f}s" for k, v in built.steps.items()
                ),
                data={"steps": built.steps},
            )
        )
        # The checks' first evaluation reads whole tables; after the batch they start from it.
        checks = dg.DagsterInstance.ephemeral() if o.runs("checks") else None
        whole = run_checks(l5, checks) if checks is not None else None
        if inc_small is not None:
            _produced(report, big, o.batch)
            inc_big = l5.materialize([*BRONZE, *DERIVED])
            sizes = f"{big.produced - o.batch:,} vs {small.produced - o.batch:,} events"
            report.add(stages.increment_line(inc_small, inc_big, o.batch, sizes))
            report.add(stages.kpi_increment_line(inc_small, inc_big, o.batch, sizes))
        if checks is not None and whole is not None:
            since = run_checks(l5, checks, skip=stages.SCHEDULED)
            batch = o.batch if inc_small is not None else 0
            for line in stages.checks_stage(whole, since, big.produced, batch):
                report.add(line)


def _peers(
    o: BenchOptions,
    report: BenchReport,
    work: Path,
    spark: SparkSession,
    client: dict,
    stream: Stream,
    lake: BenchLake,
    first: RunTimes,
) -> None:
    """SS silver + windows, Kafka Streams and the producer ceiling, against the main lake;
    then SS's and Kafka Streams' event -> result latency."""
    gold = compare.gold_counts(lake.uri("orders", "gold", "window_aggregates"))
    data = peers.WindowedInput(client, stream.topic, stream.produced, gold)
    report.add(peers.ss_windows_line(spark, data, work / "ss-windows" / "windows", first))
    _, ours = peers.ours_to_windows(first, stream.produced)
    for line in peers.kstreams_lines(data, work / "kstreams", PARTITIONS, ours):
        report.add(line)
    # On a steady stream like the freshness stage's (--rate for --freshness-seconds).
    for line in peers.latency_lines(
        spark, stream.bootstrap, client, work / "latency", PARTITIONS, o.rate, o.freshness_s
    ):
        report.add(line)
    report.add(_producer_rounds(o, work, client, stream.bootstrap))


def _producer_rounds(o: BenchOptions, work: Path, client: dict, bootstrap: str) -> Measurement:
    """Our producer and kafka-producer-perf-test alternated, ``--repeats`` rounds of
    ``--events`` records each into fresh topics of the same (by now warm) broker; the best
    of each counts."""
    ours: list[float] = []
    theirs: list[float] = []
    processes = 1
    for i in range(o.repeats):
        rate = Stream(bootstrap, client, work, f"producer-{i}", o.producers).extend(o.events)
        ours.append(rate["sending_per_s"])
        processes = int(rate["processes"])
        topic = f"bench-producer-perf-{uuid.uuid4().hex[:6]}"
        broker.ensure_topic(bootstrap, topic, PARTITIONS, client)
        theirs.append(peers.producer_perf_rate(client, topic, o.events))
    return peers.producer_perf_line(ours, theirs, o.events, processes)


def _memory_cap(o: BenchOptions) -> int:
    """The per-run cap of both memory probes: half the main stream, so that both backlogs
    exceed it and only the backlog differs between them."""
    return max(1, o.events // 2)


def _produced(report: BenchReport, stream: Stream, count: int) -> None:
    """Produce ``count`` more events and report the rate."""
    rate = stream.extend(count)
    report.add(
        Measurement(
            "data",
            f"produce {int(rate['events']):,} events ({stream.name} stream)",
            rate["events_per_s"],
            "events/s",
            detail=f"project producer, {int(rate['processes'])} processes, "
            f"{rate['seconds']:.1f}s; topic now {stream.produced:,} events",
        )
    )
