"""The scaling plot: measured points, fitted curve with its 90% band, ideal linear, node boundary.

Left: throughput (samples/s) against GPUs on log-log axes: the model's median and 90% band, the
requested predictions, the measured runs drawn on top, the ideal line (linear from the baseline)
and the naive guess (per-GPU throughput of the largest measured count held constant), a dotted
line where jobs leave one node and a dashed one at the largest measured count. Right: scaling
efficiency (model and measured) and, where the peak is known, MFU, in percent as the tables print
them. Third, where the prediction carries a step breakdown (advisor.scaling.breakdown): where the
median step goes at each requested count, as stacked bars of seconds per part (compute, recompute,
exposed intra- and inter-node communication, pipeline bubble, overhead), so a growing share of
communication is seen, not read off a table. GPU axes are labelled 8, 16, ..., 1,024; every axis
has labelled ticks (advisor.plot_axes).
matplotlib is imported lazily with the Agg backend (no display needed); the PNG is written atomically.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from advisor.fileio import atomic_write_bytes

if TYPE_CHECKING:
    from advisor.scaling.model import Prediction, ScalingModel


def plot_scaling(model: "ScalingModel", requested: "Prediction", path: str | Path,
                 baseline: tuple[int, int] | None = None, runs=None) -> None:
    """Write the scaling curve with its 90% band and efficiency to `path` (PNG). `baseline` (GPUs,
    nodes; default the model's) is where the curve starts and what efficiency is against, and
    `runs(gpus) -> bool array` keeps the curve to counts that can run (both from
    advisor.planning.runnable in the CLI): no curve is drawn where the job cannot run."""
    atomic_write_bytes(path, scaling_png(model, requested, baseline, runs))


def scaling_png(model: "ScalingModel", requested: "Prediction", baseline: tuple[int, int] | None = None,
                runs=None) -> bytes:
    """`plot_scaling`'s figure as PNG bytes (the HTML report embeds them)."""
    from dataclasses import replace

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b, bn = baseline or (model.baseline_gpus, model.baseline_nodes)
    top = max(float(requested.gpus.max()), float(model.record.extent.max_gpus), float(b))
    grid = np.unique(np.round(np.geomspace(b, top, 200)))
    if runs is not None and runs(grid.astype(np.int64)).any():
        grid = grid[runs(grid.astype(np.int64))]
    curve = model.predict(grid)
    if b != model.baseline_gpus:
        speedup = curve.throughput / float(model.predict(np.array([b]), np.array([bn])).throughput[0])
        curve = replace(curve, speedup=speedup, efficiency=speedup * b / grid)
    parts = _parts(requested)
    fig, axes = plt.subplots(1, 3 if parts else 2, figsize=(18 if parts else 12, 4.8))
    _throughput_panel(axes[0], model, requested, grid, curve)
    _efficiency_panel(axes[1], model, grid, curve, b)
    if parts:
        _breakdown_panel(axes[2], model, requested, parts)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _measured(model: "ScalingModel") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Measured runs: GPUs, throughput (samples/s), efficiency against the median at the baseline count
    (NaN, not plotted, where no run is at the baseline count: no median of nothing)."""
    d = model.record.problem.data
    throughput = d.batch / d.step
    at_base = throughput[d.gpus == model.baseline_gpus]
    if not at_base.size:
        return d.gpus, throughput, np.full(d.gpus.shape, np.nan)
    base = float(np.median(at_base))
    return d.gpus, throughput, (throughput / d.gpus) / (base / model.baseline_gpus)


def _gpu_axis(a, model: "ScalingModel", top: float) -> None:
    """GPUs across on a log-2 axis, plain labels (8, 16, ..., 1,024), the node boundary and the largest
    measured count as labelled vertical lines."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    from advisor.text import plural

    per_node = model.workload.cluster.gpus_per_node
    a.axvline(per_node, color="k", ls=":", lw=0.8, label=f"one node full ({plural(per_node, 'GPU')})")
    largest = model.record.extent.max_gpus
    if largest:
        a.axvline(largest, color="C3", ls="--", lw=0.8, label=f"largest measured ({plural(largest, 'GPU')})")
    a.set_xscale("log", base=2)
    low = min(model.baseline_gpus, per_node)
    ticks = [2.0**k for k in range(int(np.floor(np.log2(low))), int(np.ceil(np.log2(top))) + 1)]
    a.xaxis.set_major_locator(FixedLocator(ticks[:: -(-len(ticks) // 11)]))  # at most 11 labels: 1 ... 1,024
    a.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    a.xaxis.set_minor_formatter(NullFormatter())
    a.set_xlabel("GPUs")
    a.grid(alpha=0.3)


def _throughput_panel(ax, model, requested, grid, curve) -> None:
    from advisor.plot_axes import padded, set_log_axis

    gpus, throughput, _ = _measured(model)
    ax.fill_between(grid, curve.throughput_low, curve.throughput_high, alpha=0.25, label="90% interval")
    ax.plot(grid, curve.throughput, label=f"model ({model.family})", zorder=2)
    ax.plot(grid, curve.throughput[0] * grid / grid[0], "k:", lw=1, label="ideal linear")
    ax.plot(grid, curve.naive_throughput, color="grey", ls="--", lw=1, label="naive (per-GPU throughput held)")
    ax.scatter(requested.gpus, requested.throughput, marker="x", s=30, color="C2", zorder=4,
               label="predicted (requested)")
    ax.scatter(gpus, throughput, s=28, color="C3", edgecolors="black", linewidths=0.6, zorder=6, label="measured")
    _gpu_axis(ax, model, float(grid.max()))
    ax.set_yscale("log")
    values = np.concatenate([curve.throughput_low, curve.throughput_high, throughput, requested.throughput])
    low, high = padded(float(values.min()), float(values.max()))
    ax.set_ylim(low, high)
    set_log_axis(ax.yaxis, low, high)
    ax.set_ylabel("samples/s (throughput)")
    ax.set_title(f"{model.workload.name}: throughput, 90% interval")
    ax.legend(fontsize=7, loc="upper left")


def _efficiency_panel(ax2, model, grid, curve, base: int | None = None) -> None:
    from advisor.plot_axes import percent_axis
    from advisor.text import plural

    gpus, _, efficiency = _measured(model)
    ax2.plot(grid, curve.efficiency, label=f"efficiency vs {plural(base or model.baseline_gpus, 'GPU')} (model)")
    ax2.scatter(gpus, efficiency, s=28, color="C3", edgecolors="black", linewidths=0.6, zorder=6,
                label="efficiency measured")
    if curve.mfu is not None:
        ax2.plot(grid, curve.mfu, label="MFU (model)")
    _gpu_axis(ax2, model, float(grid.max()))
    shown = [curve.efficiency, efficiency] + ([curve.mfu] if curve.mfu is not None else [])
    ax2.set_ylim(0, max(1.05, float(np.nanmax(np.concatenate(shown))) * 1.05))  # an MFU above 100% stays visible
    percent_axis(ax2.yaxis)
    ax2.set_ylabel("efficiency, MFU (%)")
    ax2.set_title("efficiency and MFU")
    ax2.legend(fontsize=7, loc="lower left")


def _parts(requested: "Prediction") -> list[str]:
    """The breakdown parts with any time at the requested counts, in advisor.scaling.breakdown.PARTS' order."""
    from advisor.scaling.breakdown import PARTS

    return [k for k in PARTS if k in requested.breakdown and np.nansum(requested.breakdown[k]) > 0]


def _breakdown_panel(ax3, model, requested, parts) -> None:
    """Stacked bars: seconds of each part of the median step at each requested count (they sum to it)."""
    x = np.arange(requested.gpus.size)
    bottom = np.zeros(x.size)
    for i, k in enumerate(parts):
        v = np.nan_to_num(np.asarray(requested.breakdown[k], float))
        ax3.bar(x, v, bottom=bottom, color=f"C{i}", label=k.replace("_", " "))
        bottom = bottom + v
    ax3.set_xticks(x, [f"{g:,.0f}" for g in requested.gpus])
    ax3.set_xlabel("GPUs (requested)")
    ax3.set_ylabel("seconds per step (median)")
    ax3.set_ylim(0, float(bottom.max()) * 1.25 if bottom.max() > 0 else 1.0)
    ax3.set_title("where the step goes (communication: what compute does not hide)", fontsize=9)
    ax3.grid(axis="y", alpha=0.3)
    ax3.legend(fontsize=7, loc="upper left", ncol=2)
