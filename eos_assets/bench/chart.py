"""The bench's picture: every system's throughput and latency side by side (PNG).

The points come from the lines themselves: ``data["chart"]`` of a line lists
``{"panel", "system", "value"}``; the freshness line gives our latency (p50, p95).
"""

from collections.abc import Sequence
from pathlib import Path

from eos_assets.bench.report import Measurement

# panel -> title, unit and which way is better
PANELS = {
    "ingest": ("Kafka -> Delta, every record", "records/s", "higher is better"),
    "windows": ("Kafka -> final 5-min windows", "records/s", "higher is better"),
    "produce": ("Producing (transactional, idempotent)", "records/s", "higher is better"),
    "latency": ("Event -> result latency", "seconds", "lower is better"),
}
OURS = "eos_assets"


def chart_points(lines: Sequence[Measurement]) -> dict[str, list[tuple[str, float]]]:
    """``panel -> [(system, value)]`` in line order; a system's last value wins."""
    points: dict[str, dict[str, float]] = {}
    for line in lines:
        for p in line.data.get("chart", []):
            points.setdefault(str(p["panel"]), {})[str(p["system"])] = float(p["value"])
        if line.stage == "freshness" and line.data.get("p50") is not None:
            latency = points.setdefault("latency", {})
            latency[f"{OURS} event -> KPI in DuckDB, p50"] = float(line.data["p50"])
            latency[f"{OURS} event -> KPI in DuckDB, p95"] = float(line.data["p95"] or 0.0)
    return {k: list(v.items()) for k, v in points.items() if k in PANELS}


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

    panels = [k for k in PANELS if k in points]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 1.3 + 1.9 * len(panels)), squeeze=False)
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        title, unit, better = PANELS[panel]
        systems = [s for s, _ in points[panel]]
        values = [v for _, v in points[panel]]
        colours = ["tab:blue" if s.startswith(OURS) else "tab:gray" for s in systems]
        bars = ax.barh(systems, values, color=colours)
        ax.invert_yaxis()
        ax.bar_label(bars, labels=[f"{v:,.0f}" if v >= 100 else f"{v:.1f}" for v in values])
        arrow = "->" if better.startswith("higher") else "<-"
        ax.set_title(f"{title}  ({unit}, {better} {arrow})", loc="left", fontsize=10)
        ax.set_xlabel(unit)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.margins(x=0.2)
        if panel == "latency":
            ax.text(
                0.99, 0.05, "peers' latency not measured", transform=ax.transAxes,
                ha="right", fontsize=8, color="tab:gray",
            )  # fmt: skip
    fig.suptitle("eos_assets (blue) against what users would pick instead (grey), one run")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
