"""Peak memory of an ingest: the bronze asset run in a fresh process, sampled from ``/proc``.

A fresh process per measurement, so that neither the JVM heap nor the Python workers carry
memory over from an earlier run. ``python -m eos_assets.bench.memory`` is the probe itself.
"""

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from eos_assets.bench.lake import BRONZE, BenchLake, start_spark
from eos_assets.bench.machine import RssPeaks, RssSampler
from eos_assets.lib.errors import EosError


@dataclass
class ProbeResult:
    """What one probe ingested, how long it took and its peak memory."""

    records: int
    seconds: float
    peaks: RssPeaks


def probe(
    bootstrap: str, topic: str, root: Path, master: str, max_records: int | None = None
) -> ProbeResult:
    """Run the bronze asset into ``root`` in a child process and sample its memory tree."""
    command = [sys.executable, "-m", "eos_assets.bench.memory", bootstrap, topic, str(root)]
    command += ["--master", master]
    if max_records is not None:
        command += ["--max-records", str(max_records)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with RssSampler(proc.pid) as sampler:
        out, err = proc.communicate()
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise EosError(f"memory probe failed: {' '.join(tail)}")
    done = json.loads(out.decode().strip().splitlines()[-1])
    return ProbeResult(done["records"], done["seconds"], sampler.peaks)


def main() -> None:
    """Materialize bronze/raw_events once with the default run config (or a cap)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("root", type=Path)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--max-records", type=int, default=None)
    args = parser.parse_args()
    start_spark(args.master)
    lake = BenchLake(args.root, args.bootstrap, args.topic, args.master)
    times = lake.materialize(BRONZE, args.max_records)
    records = times.metadata["orders/bronze/raw_events"]["records"]
    print(json.dumps({"records": records, "seconds": times.steps["orders__bronze__raw_events"]}))


if __name__ == "__main__":
    main()
