"""PNG of the cost-time trade-off: every plan as a point (tiers coloured), the frontier, the choice.

One panel per workload, log-log axes (hours across, dollars up, labelled as the table's columns),
the cost-time frontier as a line through the plans nothing beats on both, each frontier plan
labelled with its GPU count, the chosen plan ringed, and budget/deadline as dashed lines when they
fall among the plans (named in the legend otherwise, so a far-off limit does not squash the
plans). Every axis carries at least three labelled ticks (advisor.plot_axes). matplotlib is
imported here only, with the Agg backend (no display needed); the file is written atomically.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.fileio import atomic_write_bytes

if TYPE_CHECKING:
    from advisor.planning.recommend import Recommendation


def plot_frontier(recs: Sequence["Recommendation"], path: str | Path,
                  measured: Mapping[str, Sequence[int]] | None = None) -> None:
    """Write the plot of one or more recommendations to `path` (PNG); `measured` (workload name ->
    GPU counts with measured step times) marks the plans whose step time was measured, not predicted."""
    atomic_write_bytes(path, frontier_png(recs, measured))


def frontier_png(recs: Sequence["Recommendation"], measured: Mapping[str, Sequence[int]] | None = None) -> bytes:
    """`plot_frontier`'s figure as PNG bytes (the HTML report embeds them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(len(recs), 2)
    rows = math.ceil(len(recs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7 * cols, 5 * rows), squeeze=False)
    for ax in axes.flat[len(recs):]:
        ax.set_visible(False)
    for ax, rec in zip(axes.flat, recs, strict=False):
        _panel(ax, rec, (measured or {}).get(rec.workload, ()))
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _panel(ax, rec: "Recommendation", measured: Sequence[int] = ()) -> None:
    import numpy as np

    from advisor.plot_axes import padded, set_log_axis
    from advisor.text import plural

    sw = rec.sweep
    hours, cost = sw.wall_hours[0], sw.cost_usd[0]
    ax.set_title(f"{rec.workload}: {rec.objective}")
    if not sw.available.any():  # every count ruled out (memory, batch, tier caps): say so, plot nothing
        ax.text(0.5, 0.5, "no plan: every GPU count is ruled out\n(see the table's notes)", ha="center",
                va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    for t, tier in enumerate(sw.tiers):
        keep = sw.available[t]
        ax.scatter(hours[t, keep], cost[t, keep], s=10, alpha=0.6, label=tier.name, zorder=2)
    if rec.frontier:
        fh = [hours[t, c] for t, c in rec.frontier]
        fc = [cost[t, c] for t, c in rec.frontier]
        ax.plot(fh, fc, color="black", linewidth=1, label="cost-time frontier", zorder=3)
    _measured(ax, rec, measured, hours, cost)
    if rec.chosen is not None:
        t, c = rec.chosen
        ax.scatter([hours[t, c]], [cost[t, c]], s=180, facecolors="none", edgecolors="red", linewidths=2,
                   label=f"chosen: {plural(int(sw.gpus[c]), 'GPU')} ({plural(int(sw.nodes[c]), 'node')}), "
                         f"{sw.tiers[t].name}", zorder=5)
    shown = sw.available
    x_lo, x_hi = padded(float(hours[shown].min()), float(hours[shown].max()))
    y_lo, y_hi = padded(float(cost[shown].min()), float(cost[shown].max()))
    _limit(ax, "budget", rec.budget_usd, (y_lo, y_hi), horizontal=True)
    _limit(ax, "deadline", rec.deadline_hours, (x_lo, x_hi), horizontal=False)
    _label_counts(ax, rec, hours, cost, np.log10(x_hi / x_lo), np.log10(y_hi / y_lo))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    set_log_axis(ax.xaxis, x_lo, x_hi)
    set_log_axis(ax.yaxis, y_lo, y_hi)
    ax.set_xlabel("hours (expected wall time)")
    ax.set_ylabel("$ (expected cost, USD)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)


def _measured(ax, rec, measured: Sequence[int], hours, cost) -> None:
    """Plans at a measured GPU count (their step time is a measurement, not an extrapolation), drawn
    on top of the tiers' points."""
    import numpy as np

    sw = rec.sweep
    at = np.isin(sw.gpus, np.asarray(measured, dtype=sw.gpus.dtype)) & sw.available
    if at.any():
        ax.scatter(hours[at], cost[at], s=28, facecolors="none", edgecolors="black", linewidths=0.9, zorder=4,
                   label="measured GPU count")


def _limit(ax, name: str, value, span: tuple[float, float], horizontal: bool) -> None:
    """Budget (a horizontal line) or deadline (vertical), drawn only inside the data's span: a limit
    far beyond every plan would squash the plans into a corner, so it is named in the legend instead."""
    from advisor.text import hours as fmt_hours
    from advisor.text import usd as fmt_usd

    if value is None:
        return
    text = fmt_usd(value) if horizontal else fmt_hours(value)
    if span[0] <= value <= span[1]:
        line = ax.axhline if horizontal else ax.axvline
        line(value, color="grey", linestyle="--" if horizontal else ":", linewidth=1, label=f"{name} {text}")
    else:
        where = "above" if value > span[1] else "below"
        if not horizontal:
            where = "after" if value > span[1] else "before"
        ax.plot([], [], " ", label=f"{name} {text}: {where} every plan")


def _label_counts(ax, rec, hours, cost, x_decades: float, y_decades: float) -> None:
    """GPU counts beside the frontier's plans (and the chosen one), skipping a label that would sit
    on a placed one (within 8% of the axes across and 5% up: a label is wider than tall)."""
    import math

    sw = rec.sweep
    chosen = [rec.chosen] if rec.chosen else []  # placed first: its neighbours make way for it
    points = chosen + sorted((p for p in rec.frontier if p != rec.chosen), key=lambda p: hours[p])
    placed: list[tuple[float, float]] = []
    for t, c in points:
        x, y = math.log10(hours[t, c]) / x_decades, math.log10(cost[t, c]) / y_decades
        if any(abs(x - px) < 0.08 and abs(y - py) < 0.05 for px, py in placed) and (t, c) != rec.chosen:
            continue
        placed.append((x, y))
        ax.annotate(f"{int(sw.gpus[c]):,}", (hours[t, c], cost[t, c]), xytext=(3, 4), textcoords="offset points",
                    fontsize=7, zorder=6)
