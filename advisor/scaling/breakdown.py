"""Where the step goes: the predicted median step split into the parts a performance engineer reads.

`breakdown(model, gpus, nodes, batch)` returns seconds per part at each placement, summing to the
median step (`ScalingModel.step_time`):

- compute: the model's FLOPs at the fitted 1/MFU (`features.compute_parts`);
- recompute: what activation recomputation repeats (`features.recompute_flops_per_sample`);
- bubble: the pipeline's idle share, the `bubble_*` columns (Megatron-LM SC21 §2.2);
- overhead: per-step constants, host contention and memory-pressure stalls (the `overhead`, `contention*`,
  `small_batch` and `memory_pressure` columns), and the time the host's kernel launches add above the
  device's step where they bound it (advisor.topology.launch: a tiny model's step is its launches);
- intra_node_comm, inter_node_comm: communication *not hidden* under compute. The model is
  T = (Tc^γ + Ts^γ)^(1/γ) + Te (docs/model.md): the traffic no compute hides (the `exposed_*`
  columns) goes to its link whole; of the traffic that can hide, the exposed part is
  (Tc^γ + Ts^γ)^(1/γ) - Tc, shared between the links in proportion to each link's terms in Ts (its
  bandwidth, latency and sync columns).

The parts of the fitted step are then scaled by one factor to the device's median, which carries
the anchoring at measured counts, the drift past them and the MFU <= 100% floor, so the parts keep
their proportions; with the launch-bound time in overhead they sum to the median exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from advisor.scaling import features as F
from advisor.scaling.estimator import combine, tie

if TYPE_CHECKING:
    from advisor.scaling.model import ScalingModel

#: The parts, in the order they are printed.
PARTS = ("compute", "recompute", "intra_node_comm", "inter_node_comm", "bubble", "overhead")

#: Which link each communication column belongs to; `sync` (no run crossed nodes) goes to the link
#: the placement uses.
_LINK = {"intra_sync": "intra_node_comm", "intra_bandwidth": "intra_node_comm", "intra_latency": "intra_node_comm",
         "inter_sync": "inter_node_comm", "inter_bandwidth": "inter_node_comm", "inter_latency": "inter_node_comm"}


def breakdown(model: "ScalingModel", gpus, nodes, batch, median, device=None) -> dict[str, np.ndarray]:
    """Seconds per part (PARTS) at each placement, summing to `median` (the model's median step there):
    the device's parts scaled to `device` (its median on the device alone; None: `median`), and what the
    host's kernel launches add above it (advisor.topology.launch) in `overhead`."""
    w = model.workload
    gpus, nodes, batch = (np.asarray(a, float) for a in (gpus, nodes, batch))
    fitted = model.record.fitted
    d = fitted.design(gpus, nodes, batch)
    est = fitted.estimator
    coef, nc = tie(np.asarray(est.coef_, float), d.tied), d.n_compute
    end = len(d.columns) - d.n_exposed
    names = [c.name for c in d.columns]
    source = {col: names[src] for col, src in d.tied}
    parts = {p: np.zeros_like(gpus) for p in PARTS}
    tc = np.maximum(d.X[:, :nc] @ coef[:nc], 0.0)
    if "compute" in names:
        theta = coef[names.index("compute")]
        work, redo = F.compute_parts(w, gpus, batch)
        parts["compute"], parts["recompute"] = theta * work, theta * redo
    rest = tc - parts["compute"] - parts["recompute"]
    parts["overhead"] = np.where(rest > 1e-9 * tc, rest, 0.0)  # rounding of the subtraction is not overhead
    terms = d.X * coef
    links = {p: np.zeros_like(gpus) for p in ("intra_node_comm", "inter_node_comm")}

    def link_of(name):
        return _LINK.get(name) or np.where(nodes > 1, "inter_node_comm", "intra_node_comm")

    if nc < end:
        ts = np.maximum(terms[:, nc:end].sum(axis=1), 0.0)
        hidden_exposed = np.maximum(combine(tc, ts, est.gamma_) - tc, 0.0)
        safe = np.where(ts > 0, ts, 1.0)
        for j in range(nc, end):
            for p in links:
                links[p] = links[p] + np.where(link_of(names[j]) == p, hidden_exposed * terms[:, j] / safe, 0.0)
    for j in range(end, len(names)):
        if names[j].startswith("bubble_"):
            parts["bubble"] = parts["bubble"] + terms[:, j]
            continue
        if names[j] == F.PRESSURE_COLUMN:  # allocator stalls near memory capacity: per-step overhead
            parts["overhead"] = parts["overhead"] + terms[:, j]
            continue
        for p in links:
            links[p] = links[p] + np.where(link_of(source.get(j, names[j])) == p, terms[:, j], 0.0)
    parts.update(links)
    total = sum(parts.values())
    device = np.asarray(median if device is None else device, float)
    scale = np.where(total > 0, device / np.where(total > 0, total, 1.0), 0.0)
    out = {p: v * scale for p, v in parts.items()}
    out["overhead"] = out["overhead"] + np.where(total > 0, median - device, median)  # launch-bound time
    return out
