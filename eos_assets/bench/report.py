"""Measurements of one bench run: each with its figure, its target and whether it met it."""

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Measurement:
    """One line of the result table.

    Attributes:
        stage: the stage that measured it (``ingest``, ``graph``...).
        name: what was measured.
        value: the figure that matters (often a ratio).
        unit: unit of ``value`` (``x`` for a ratio).
        target: the target as text (``>= 0.6``), empty when informational.
        met: whether ``value`` meets the target (None when informational).
        detail: the raw figures behind ``value``, one short line.
        data: everything measured, for the JSON file.
    """

    stage: str
    name: str
    value: float | None
    unit: str
    target: str = ""
    met: bool | None = None
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)


class Throughput:
    """The rate of a run that read ``records`` in ``seconds``: a base of the runs' dataclasses,
    each of which declares both fields (in its own order)."""

    records: int
    seconds: float

    @property
    def rate(self) -> float:
        """Records per second."""
        return self.records / self.seconds if self.seconds > 0 else 0.0


def at_least(value: float | None, bound: float) -> bool | None:
    """Whether ``value >= bound`` (None when nothing was measured)."""
    return None if value is None else value >= bound


def at_most(value: float | None, bound: float) -> bool | None:
    """Whether ``value <= bound`` (None when nothing was measured)."""
    return None if value is None else value <= bound


def time_ratio(
    stage: str, name: str, seconds: dict[str, float], over: str, under: str
) -> Measurement:
    """The line ``seconds[over] / seconds[under]`` (``x``), both times in its detail."""
    return Measurement(
        stage,
        name,
        round(float(seconds[over]) / float(seconds[under]), 2),
        "x",
        detail=f"{over} {float(seconds[over]):.1f} s, {under} {float(seconds[under]):.1f} s",
        data={"seconds": seconds},
    )


@dataclass
class BenchReport:
    """Everything one run measured, plus the machine and its load."""

    started: str
    machine: dict[str, Any]
    options: dict[str, Any]
    measurements: list[Measurement] = field(default_factory=list)
    finished: str = ""
    seconds: float = 0.0
    load_end: list[float] = field(default_factory=list)

    def add(self, measurement: Measurement) -> Measurement:
        """Record ``measurement`` and print its line at once (a long run shows progress)."""
        self.measurements.append(measurement)
        print(f"bench: {_row(measurement)}", flush=True)
        return measurement

    def to_json(self) -> str:
        """The whole report as JSON."""
        return json.dumps(asdict(self), indent=2, default=str) + "\n"

    def markdown(self) -> str:
        """The result table with a header line on the machine and its load."""
        m = self.machine
        load_start = ", ".join(f"{x:.2f}" for x in m.get("load_start", []))
        load_end = ", ".join(f"{x:.2f}" for x in self.load_end)
        lines = [
            f"Run of {self.started} ({self.seconds / 60:.1f} min) on {m.get('cpus')} cores, "
            f"{m.get('ram_gib', 0):.1f} GiB RAM, {m.get('cpu_model', '?')}; load average "
            f"(1, 5, 15 min) at start {load_start}, at end {load_end}.",
            "",
            "| stage | measurement | value | target | met | detail |",
            "|---|---|---|---|---|---|",
        ]
        lines += [f"| {_row(x)} |" for x in self.measurements]
        return "\n".join(lines) + "\n"

    def write(self, out: Path) -> tuple[Path, Path]:
        """Write ``<out>.json`` and ``<out>.md``; return both paths."""
        out.parent.mkdir(parents=True, exist_ok=True)
        json_path, md_path = out.with_suffix(".json"), out.with_suffix(".md")
        json_path.write_text(self.to_json())
        md_path.write_text(self.markdown())
        return json_path, md_path


def _row(m: Measurement) -> str:
    verdict = {True: "yes", False: "NO", None: "-"}[m.met]
    value = "n/a" if m.value is None else f"{m.value:,.3g} {m.unit}".strip()
    if m.value is not None and abs(m.value) >= 1000:
        value = f"{m.value:,.0f} {m.unit}".strip()
    cells = [m.stage, m.name, value, m.target or "-", verdict, m.detail or "-"]
    return " | ".join(cells)


def update_doc(doc: Path, table: str) -> bool:
    """Replace the table between the bench markers of ``doc``; False when it has none."""
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    if not doc.exists():
        return False
    text = doc.read_text()
    if begin not in text or end not in text:
        return False
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{begin}\n{table}{end}{tail}")
    return True
