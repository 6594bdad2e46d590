"""The bench's picture: every system's throughput and latency side by side (PNG).

The points come from the lines themselves: ``data["chart"]`` of a line lists
``{"panel", "system", "value"}``; our latency comes from the ``p50`` and ``p95`` (and
``mode``) in the data of each freshness line. Throughput
panels stand in the left column (higher is better), the latency panel in the right one (lower
is better); a latency point's system ends in ``, p50`` or ``, p95``.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eos_assets.bench.report import Measurement

# panel -> title, unit and which way is better
PANELS = {
    "ingest": ("Kafka -> Delta, every record", "records/s", "higher is better"),
    "windows": ("Kafka -> final 5-min windows", "records/s", "higher is better"),
    "produce": ("Producing (transactional, idempotent)", "records/s", "higher is better"),
    "latency": ("Event -> result latency, steady stream", "seconds", "lower is better"),
}
OURS = "eos_assets"
STATS = ("p50", "p95")


def chart_points(lines: Sequence[Measurement]) -> dict[str, list[tuple[str, float]]]:
    """``panel -> [(system, value)]`` in line order; a system's last value wins."""
    points: dict[str, dict[str, float]] = {}
    for line in lines:
        ours = line.stage == "freshness"
        for p in line.data.get("chart", []):
            if not (ours and p["panel"] == "latency"):  # ours come from the data, below
                points.setdefault(str(p["panel"]), {})[str(p["system"])] = float(p["value"])
        if ours and line.data.get("p50") is not None:
            mode = line.data.get("mode")
            system = f"{OURS}: event -> KPI in DuckDB" + (f" ({mode})" if mode else "")
            latency = points.setdefault("latency", {})
            latency[f"{system}, p50"] = float(line.data["p50"])
            latency[f"{system}, p95"] = float(line.data["p95"] or 0.0)
    return {k: list(v.items()) for k, v in points.items() if k in PANELS}


def latency_rows(points: Sequence[tuple[str, float]]) -> list[tuple[str, dict[str, float]]]:
    """``[(system, {"p50": s, "p95": s})]`` from ``system, pNN`` points: ours first, then the
    others in first-seen order."""
    rows: dict[str, dict[str, float]] = {}
    for name, value in points:
        system, _, stat = name.rpartition(", ")
        rows.setdefault(system or name, {})[stat if stat in STATS else "p95"] = value
    return sorted(rows.items(), key=lambda row: not row[0].startswith(OURS))


def _label(v: float, unit: str) -> str:
    if unit == "seconds":
        return f"{v:,.1f} s" if v < 100 else f"{v:,.0f} s"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def _title(ax: Any, panel: str) -> None:
    title, unit, better = PANELS[panel]
    arrow = "->" if better.startswith("higher") else "<-"
    ax.set_title(f"{title}\n({unit}, {better} {arrow})", loc="left", fontsize=10)
    ax.set_xlabel(unit)
    ax.margins(x=0.25)


def _throughput(ax: Any, panel: str, points: Sequence[tuple[str, float]]) -> None:
    systems = [s for s, _ in points]
    values = [v for _, v in points]
    colours = ["tab:blue" if s.startswith(OURS) else "tab:gray" for s in systems]
    bars = ax.barh(systems, values, color=colours)
    ax.invert_yaxis()
    ax.bar_label(bars, labels=[_label(v, "records/s") for v in values])
    _title(ax, panel)


def _latency(ax: Any, points: Sequence[tuple[str, float]]) -> None:
    rows = latency_rows(points)
    height = 0.38
    for i, stat in enumerate(STATS):
        ys = [r + (i - 0.5) * height for r in range(len(rows))]
        values = [stats.get(stat, 0.0) for _, stats in rows]
        ours = ["tab:blue" if s.startswith(OURS) else "tab:gray" for s, _ in rows]
        bars = ax.barh(
            ys, values, height, color=ours, alpha=0.5 if stat == "p50" else 1.0,
            label=f"{stat} ({'lighter' if stat == 'p50' else 'darker'})",
        )  # fmt: skip
        ax.bar_label(bars, labels=[f"{stat} {_label(v, 'seconds')}" for v in values], fontsize=8)
    ax.set_yticks(range(len(rows)), [s.replace(": ", ":\n", 1) for s, _ in rows])
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    _title(ax, "latency")
    if not any(not s.startswith(OURS) for s, _ in rows):
        ax.text(
            0.99, 0.02, "peers' latency not measured in this run", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=8, color="tab:gray",
        )  # fmt: skip


def write_chart(lines: Sequence[Measurement], path: Path) -> Path | None:
    """Draw the panels that have points into ``path``; None when there is nothing to draw."""
    points = chart_points(lines)
    if not points:
        return None
    # Imported here: only the bench draws, and matplotlib takes a while to import.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    rates = [k for k in PANELS if k in points and k != "latency"]
    has_latency = "latency" in points
    rows, cols = max(1, len(rates)), 2 if has_latency and rates else 1
    fig = plt.figure(figsize=(9 + 7.5 * (cols - 1), 1.6 + 2.2 * rows))
    grid = fig.add_gridspec(rows, cols, width_ratios=[1.0, 0.85][:cols])
    for i, panel in enumerate(rates):
        ax = fig.add_subplot(grid[i, 0])
        _throughput(ax, panel, points[panel])
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    if has_latency:
        ax = fig.add_subplot(grid[:, cols - 1])
        _latency(ax, points["latency"])
    sides = (
        "throughput left (higher is better), latency right (lower is better)"
        if cols == 2
        else "latency, lower is better"
        if has_latency
        else "throughput, higher is better"
    )
    fig.suptitle(
        "eos_assets (blue) against what users would pick instead (grey), one run:\n" + sides,
        fontsize=11,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
