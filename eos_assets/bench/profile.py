"""``eos-assets bench --profile``: one ingest and every derived asset under pyinstrument.

Spark runs the heavy work in the JVM and in Python workers, out of reach of a profiler of
the driver; what the driver profile shows is which product line waits on which Spark action.
The ingest's task code (read one range, parse, write one Parquet file) is therefore also
profiled on its own, in this process, for one partition. Each profile is written as HTML and
text, and the lines of ``eos_assets`` that account for most of the time are summarized.
"""

import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pyinstrument import Profiler
from pyinstrument.frame import Frame

from eos_assets.bench.ingest import topic_ranges
from eos_assets.bench.lake import BRONZE, DERIVED, BenchLake, start_spark
from eos_assets.bench.options import BenchOptions
from eos_assets.bench.stream import Stream, bench_kafka
from eos_assets.defs.stream import ORDERS
from eos_assets.lib.ingest.reader import read_range_to_file, reader_config

TOP = 8


def run_profile(options: BenchOptions) -> Path:
    """Produce ``options.events`` events and profile; return the folder of the profiles."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = options.out.parent / f"profile-{stamp}"
    folder.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="eos-bench-profile-", dir=options.work))
    summary: list[str] = []
    with bench_kafka(work) as (bootstrap, client):
        stream = Stream(bootstrap, client, work, "profile", options.producers)
        stream.extend(options.events)
        start_spark(options.master)
        lake = BenchLake(work / "lake", bootstrap, stream.topic, options.master)
        first = topic_ranges(client, stream.topic, 1)[0]
        scratch = work / "task-files"
        scratch.mkdir()

        def task() -> None:
            read_range_to_file(first, ORDERS.contract, reader_config(client), str(scratch), 300.0)

        summary += _profiled(folder, "ingest_task", task)
        summary += _profiled(folder, "bronze", lambda: lake.materialize(BRONZE))
        for asset in DERIVED:
            name = asset.node_def.name
            summary += _profiled(folder, name, lambda a=asset: lake.materialize([a]))
    (folder / "summary.txt").write_text("\n".join(summary) + "\n")
    print("\n".join(summary))
    print(f"bench: profiles in {folder}")
    return folder


def _profiled(folder: Path, name: str, step: Callable[[], object]) -> list[str]:
    profiler = Profiler(interval=0.005)
    began = time.monotonic()
    profiler.start()
    try:
        step()
    finally:
        profiler.stop()
    seconds = time.monotonic() - began
    (folder / f"{name}.html").write_text(profiler.output_html())
    (folder / f"{name}.txt").write_text(profiler.output_text(unicode=True, show_all=False))
    root = profiler.last_session.root_frame() if profiler.last_session else None
    lines = [f"{name}: {seconds:.1f}s"]
    if root is None:
        return lines
    spots = _hot_lines(root)
    total = sum(spots.values()) or 1.0
    for where, spent in sorted(spots.items(), key=lambda kv: -kv[1])[:TOP]:
        lines.append(f"  {100 * spent / total:5.1f}%  {where}")
    return lines


def _hot_lines(root: Frame) -> dict[str, float]:
    """Time of every sample, charged to the innermost ``eos_assets`` function above it and
    the outside call it made (``silver_events._step -> DataFrame.count``).

    A function that waits on Spark is so charged the time spent in py4j below the Spark
    action it called; time outside product code is charged to ``(outside eos_assets)``.
    """
    spent: dict[str, float] = {}
    stack: list[tuple[Frame, str, str]] = [(root, "(outside eos_assets)", "")]
    while stack:
        frame, owner, callee = stack.pop()
        path = frame.file_path or ""
        if "eos_assets/" in path and "eos_assets/bench/" not in path:
            owner, callee = f"{path.rsplit('eos_assets/', 1)[1]} {frame.function}", ""
        elif not callee and owner != "(outside eos_assets)" and not frame.is_synthetic:
            callee = f"{frame.class_name + '.' if frame.class_name else ''}{frame.function}"
        where = f"{owner} -> {callee}" if callee else owner
        spent[where] = spent.get(where, 0.0) + frame.total_self_time
        stack += [(child, owner, callee) for child in frame.children]
    return spent
