"""The systems users would pick instead, on the same broker and data, in the same run
(``--peers``): Spark Structured Streaming, Kafka Streams, and Kafka's producer perf tool.

Each line compares a peer's rate with ours and checks its output against ours; ``data["chart"]``
holds the points of the bench's chart (``chart.py``).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from eos_assets.bench import compare, kstreams, live, structured
from eos_assets.bench.lake import RunTimes
from eos_assets.bench.live import LatencyRun
from eos_assets.bench.report import Measurement, at_least
from eos_assets.bench.stream import BULK_LINGER_MS, BULK_TRANSACTION
from eos_assets.bench.structured import StreamRun
from eos_assets.lib.kafka import kafka_tools

SS_TARGET, SS_GOAL = 1.0, 1.5
PRODUCER_TARGET = 0.5  # our producer's records/s against kafka-producer-perf-test's
# The steps of our graph that take Kafka records to final windows.
TO_WINDOWS = ("raw_events", "orders__silver__events", "orders__gold__window_aggregates")


@dataclass(frozen=True)
class WindowedInput:
    """What the windowed peers read and are checked against: ``records`` events of ``topic``
    and our graph's final window counts of them (``gold``)."""

    client: Mapping[str, str]
    topic: str
    records: int
    gold: Mapping[compare.WindowKey, int]


def _point(panel: str, system: str, value: float) -> dict[str, object]:
    return {"panel": panel, "system": system, "value": value}


def ss_ingest_line(
    runs: Sequence[StreamRun], ingest_lines: Sequence[Measurement], bronze: Path, ss_table: Path
) -> Measurement:
    """Our best exactly-once pass against SS's best, and SS's records against bronze's."""
    passes = ingest_lines[0].data["passes"]
    eos = max((p["rate"] for p in passes if p["kind"] == "eos"), default=0.0)
    ceiling = ingest_lines[0].value or 0.0
    perf = ingest_lines[2].value or 0.0
    best = max(runs, key=lambda r: r.rate)
    ratio = eos / best.rate if best.rate else None
    cols = ["partition", "offset"]
    diff = compare.offset_diff(
        DeltaTable(str(bronze)).to_pyarrow_table(columns=cols),
        DeltaTable(str(ss_table)).to_pyarrow_table(columns=cols),
    )
    check = "same records as bronze" if diff.same else "NOT the same records as bronze"
    return Measurement(
        "peers", "our exactly-once ingest / Spark Structured Streaming", ratio, "x",
        f">= {SS_TARGET} (goal {SS_GOAL})", at_least(ratio, SS_TARGET),
        f"{eos:,.0f} vs {best.rate:,.0f} records/s (SS best of {len(runs)}: "
        + ", ".join(f"{r.rate:,.0f}" for r in runs) + "; Kafka source read_committed, Delta "
        f"sink, availableNow, {best.batches} batch(es)); {check}: {diff.theirs:,} rows vs "
        f"{diff.ours:,}, {diff.missing} missing, {diff.extra} extra, {diff.repeated} repeated",
        data={"runs": [vars(r) for r in runs], "diff": vars(diff), "chart": [
            _point("ingest", "consume loop (ceiling)", ceiling),
            _point("ingest", "kafka-consumer-perf-test", perf),
            _point("ingest", "eos_assets exactly-once", eos),
            _point("ingest", "Spark Structured Streaming", best.rate),
        ]},
    )  # fmt: skip


def ours_to_windows(times: RunTimes, records: int) -> tuple[float, float]:
    """Seconds of our steps from Kafka to final windows, and records per second."""
    seconds = sum(v for k, v in times.steps.items() if k.endswith(TO_WINDOWS))
    return seconds, records / seconds if seconds else 0.0


def ss_windows_line(
    spark: SparkSession, data: WindowedInput, table: Path, times: RunTimes
) -> Measurement:
    """SS dedup + windows from Kafka to Delta, against our graph's bronze, silver and windows."""
    run = structured.windows(spark, data.client, data.topic, table)
    diff = compare.window_diff(data.gold, structured.window_counts(spark, table))
    seconds, ours = ours_to_windows(times, data.records)
    ratio = ours / run.rate if run.rate else None
    return Measurement(
        "peers", "our Kafka to final windows / SS (dedup + windows)", ratio, "x",
        detail=f"ours {ours:,.0f} records/s ({seconds:.1f}s of bronze, silver/events, "
        f"window_aggregates steps), SS {run.rate:,.0f} ({run.records:,} in {run.seconds:.1f}s, "
        f"{run.batches} batches of <= {structured.WINDOW_BATCH:,}); against gold: "
        f"{diff.summary()} (SS drops events later than its watermark and never writes the "
        "windows still open at the end; gold restates windows for late events)",
        data={"run": vars(run), "diff": vars(diff), "chart": [
            _point("windows", "eos_assets graph (bronze+silver+windows)", ours),
            _point("windows", diff.label("Spark Structured Streaming"), run.rate),
        ]},
    )  # fmt: skip


def kstreams_lines(
    data: WindowedInput, work: Path, partitions: int, ours: float
) -> list[Measurement]:
    """Kafka Streams windowed counts under exactly_once_v2 and at_least_once."""
    classes = kstreams.compile_peer(work / "classes")
    jobs = {
        g: kstreams.PeerJob(classes, data.client, data.topic, data.records, g, work, partitions)
        for g in kstreams.GUARANTEES
    }
    runs = {g: kstreams.run_peer(job) for g, job in jobs.items()}
    lines = []
    for g, run in runs.items():
        diff = compare.window_diff(data.gold, kstreams.final_counts(data.client, run.output_topic))
        lines.append(
            Measurement(
                "peers", f"Kafka Streams {g} windowed counts", run.rate, "records/s",
                detail=f"{run.records:,} records in {run.seconds:.1f}s (start to last count "
                f"update), ours / this {ours / run.rate if run.rate else 0:.2f}x; "
                f"dropped-records-total {run.dropped:,}; against gold: {diff.summary()}",
                data={"run": vars(run), "diff": vars(diff),
                      "chart": [_point("windows", diff.label(f"Kafka Streams {g}"), run.rate)]},
            )
        )  # fmt: skip
    eos, alo = runs["exactly_once_v2"].rate, runs["at_least_once"].rate
    lines.append(
        Measurement(
            "peers", "Kafka Streams exactly_once_v2 overhead vs at_least_once",
            1 - eos / alo if alo else None, "",
            detail=f"{eos:,.0f} vs {alo:,.0f} records/s (same commit interval, 100 ms)",
        )
    )  # fmt: skip
    return lines


def producer_perf_rate(client: Mapping[str, str], topic: str, records: int) -> float:
    """Records/s of Kafka's ``kafka-producer-perf-test`` (idempotent, transactional)."""
    props = [f"bootstrap.servers={client['bootstrap.servers']}", "acks=all",
             "enable.idempotence=true", "linger.ms=5"]  # fmt: skip
    out = kafka_tools.run_tool(
        kafka_tools.PRODUCER_PERF,
        ["--topic", topic, "--num-records", str(records), "--record-size", "250",
         "--throughput", "-1", "--transaction-duration-ms", "100",
         "--producer-props", *props],
    )  # fmt: skip
    last = [line for line in out.splitlines() if "records/sec" in line][-1]
    return float(last.split("(", 1)[0].split(",")[1].split()[0])


def producer_perf_line(
    ours: list[float], theirs: list[float], records: int, processes: int
) -> Measurement:
    """The producer ceiling: the best of our producer's rounds against the best of the perf
    test's, run alternately on the same broker."""
    best_ours, best_theirs = max(ours), max(theirs)
    ratio = best_ours / best_theirs if best_theirs else None
    each = ", ".join(f"{a:,.0f}/{b:,.0f}" for a, b in zip(ours, theirs, strict=True))
    return Measurement(
        "peers", "our producer / kafka-producer-perf-test", ratio, "x",
        f">= {PRODUCER_TARGET}", at_least(ratio, PRODUCER_TARGET),
        detail=f"{best_ours:,.0f} vs {best_theirs:,.0f} records/s, best of {len(ours)} "
        f"alternated rounds of {records:,} records each (ours/theirs: {each}); ours: "
        f"{processes} processes, the bench's event mix, a manifest line per record, "
        f"transactions of {BULK_TRANSACTION:,} records, linger.ms={BULK_LINGER_MS}, from the "
        "first process's first transaction to the last one's end; perf test: 250-byte "
        "records, idempotent, acks=all, linger.ms=5, transactions of 100 ms",
        data={"ours": ours, "theirs": theirs,
              "chart": [_point("produce", "eos_assets producer", best_ours),
                        _point("produce", "kafka-producer-perf-test", best_theirs)]},
    )  # fmt: skip


SS_LATENCY = "Spark Structured Streaming: event -> final window in Delta"
KS_LATENCY = "Kafka Streams exactly_once_v2: event -> count read read_committed"


def latency_lines(
    spark: SparkSession, bootstrap: str, client: Mapping[str, str], work: Path,
    partitions: int, rate: float, seconds: float,
) -> list[Measurement]:  # fmt: skip
    """Event -> result latency of SS (silver + windows) and Kafka Streams (exactly_once_v2)
    on a steady stream like the freshness stage's (``rate`` events/s for ``seconds``)."""
    count = max(1, int(rate * seconds))
    ss = live.ss_windows(spark, bootstrap, client, work / "ss", partitions, count, rate)
    ks = live.ks_windows(bootstrap, client, work / "ks", partitions, count, rate)
    return [
        _latency_line(
            SS_LATENCY, ss, rate,
            f"append mode, a micro-batch as soon as the last one ends (processingTime 0), "
            f"{ss.detail['batches']} batches; a window is written once the watermark (event "
            "time - 10 min) passes its end",
        ),
        ks_line(ks, rate),
    ]  # fmt: skip


def ks_line(ks: LatencyRun, rate: float) -> Measurement:
    """The Kafka Streams peer's event -> count latency line."""
    return _latency_line(
        KS_LATENCY, ks, rate,
        f"commit.interval.ms {ks.detail['commit_ms']} (its exactly_once_v2 default), other "
        f"settings its defaults; {ks.detail['updates']:,} count updates read; "
        f"dropped-records-total {ks.detail['dropped']:,}",
    )  # fmt: skip


def _latency_line(name: str, run: LatencyRun, rate: float, how: str) -> Measurement:
    lat = run.latencies
    st = lat.stats()
    p50, p95, worst = st["p50"], st["p95"], st["max"]
    visible = len(lat.seconds)
    return Measurement(
        "peers", f"{name}, p95", p95, "s",
        detail=f"p50 {p50 or 0:.1f}s, max {worst or 0:.1f}s over {visible:,} of {lat.events:,} "
        f"events ({rate:,.0f}/s for {run.produced_s:.0f}s); {lat.never_visible:,} never "
        f"visible; {how}",
        data={**st, "visible": visible, "never_visible": lat.never_visible,
              "events": lat.events, "produced_s": run.produced_s, **run.detail,
              "chart": [_point("latency", f"{name}, p50", p50 or 0.0),
                        _point("latency", f"{name}, p95", p95 or 0.0)]},
    )  # fmt: skip
