"""The scaling plot: measured points, fitted curve with its 90% band, ideal linear, node boundary.

Left: throughput (samples/s) against GPUs on log-log axes: the model's median and 90% band, the
measured runs, the ideal line (linear from the baseline) and the naive guess (per-GPU
throughput of the largest measured count held constant), a dotted line where jobs leave one node and a dashed one at the
largest measured count. Right: scaling efficiency and, where the peak is known, MFU. matplotlib
is imported lazily with the Agg backend (no display needed); the PNG is written atomically.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from advisor.fileio import atomic_write_bytes

if TYPE_CHECKING:
    from advisor.scaling.model import Prediction, ScalingModel


def plot_scaling(model: "ScalingModel", requested: "Prediction", path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = model.workload
    top = max(float(requested.gpus.max()), float(model.max_gpus_measured))
    grid = np.unique(np.round(np.geomspace(model.baseline_gpus, top, 200)))
    curve = model.predict(grid)
    d = model.data

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    ax.fill_between(grid, curve.throughput_low, curve.throughput_high, alpha=0.25, label="90% interval")
    ax.plot(grid, curve.throughput, label=f"model ({model.family})")
    base = curve.throughput[0]
    ax.plot(grid, base * grid / grid[0], "k:", lw=1, label="ideal linear")
    ax.plot(grid, curve.naive_throughput, color="grey", ls="--", lw=1, label="naive (per-GPU throughput held)")
    ax.scatter(d.gpus, d.batch / d.step, s=12, color="C3", zorder=3, label="measured")
    ax.scatter(requested.gpus, requested.throughput, marker="x", color="C2", zorder=4, label="requested")
    for a in (ax, ax2):
        a.axvline(w.cluster.gpus_per_node, color="k", ls=":", lw=0.8)
        a.axvline(model.max_gpus_measured, color="C3", ls="--", lw=0.8)
        a.set_xscale("log", base=2)
        a.set_xlabel("GPUs")
        a.grid(alpha=0.3)
    ax.text(w.cluster.gpus_per_node, 0.98, f" {w.cluster.gpus_per_node} GPUs: one node full", rotation=90, va="top",
            fontsize=8, transform=ax.get_xaxis_transform())
    ax.text(model.max_gpus_measured, 0.02, " largest measured", rotation=90, va="bottom", fontsize=8, color="C3",
            transform=ax.get_xaxis_transform())
    ax.set_yscale("log")
    ax.set_ylabel("throughput (samples/s)")
    ax.set_title(f"{w.name}: throughput")
    ax.legend(fontsize=8, loc="lower right")

    ax2.plot(grid, curve.efficiency, label=f"efficiency vs {model.baseline_gpus} GPU(s)")
    if curve.mfu is not None:
        ax2.plot(grid, curve.mfu, label="MFU")
    ax2.set_ylim(0, max(1.05, float(np.nanmax(curve.efficiency)) * 1.05))
    ax2.set_title("efficiency and MFU (dashed red: largest measured count)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
