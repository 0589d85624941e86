"""PNG of the cost-time trade-off: every plan as a point (tiers coloured), the frontier, the choice.

One panel per workload, log-log axes (hours across, dollars up), the cost-time frontier as a line
through the plans nothing beats on both, the chosen plan ringed, and budget/deadline as dashed
lines. matplotlib is imported here only, with the Agg backend (no display needed); the file is
written atomically.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from advisor.fileio import atomic_write_bytes

if TYPE_CHECKING:
    from advisor.planning.recommend import Recommendation


def plot_frontier(recs: Sequence["Recommendation"], path: str | Path) -> None:
    """Write the plot of one or more recommendations to `path` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(len(recs), 2)
    rows = math.ceil(len(recs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7 * cols, 5 * rows), squeeze=False)
    for ax in axes.flat[len(recs):]:
        ax.set_visible(False)
    for ax, rec in zip(axes.flat, recs):
        _panel(ax, rec)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def _panel(ax, rec: "Recommendation") -> None:
    from matplotlib.ticker import FuncFormatter, NullFormatter

    sw = rec.sweep
    hours, cost = sw.wall_hours[0], sw.cost_usd[0]
    for t, tier in enumerate(sw.tiers):
        keep = sw.available[t]
        ax.scatter(hours[t, keep], cost[t, keep], s=10, alpha=0.6, label=tier.name)
    if rec.frontier:
        fh = [hours[t, c] for t, c in rec.frontier]
        fc = [cost[t, c] for t, c in rec.frontier]
        ax.plot(fh, fc, color="black", linewidth=1, label="cost-time frontier")
    if rec.chosen is not None:
        t, c = rec.chosen
        ax.scatter([hours[t, c]], [cost[t, c]], s=180, facecolors="none", edgecolors="red", linewidths=2,
                   label=f"chosen: {int(sw.gpus[c])} GPUs, {sw.tiers[t].name}", zorder=5)
    if rec.budget_usd is not None:
        ax.axhline(rec.budget_usd, color="grey", linestyle="--", linewidth=1, label="budget")
    if rec.deadline_hours is not None:
        ax.axvline(rec.deadline_hours, color="grey", linestyle=":", linewidth=1, label="deadline")
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):  # plain numbers; minor labels crowd a short log range
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("expected wall time (hours)")
    ax.set_ylabel("expected cost (USD)")
    ax.set_title(f"{rec.workload}: {rec.objective}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
