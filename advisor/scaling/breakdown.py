"""Where the step goes: the predicted median step split into the parts a performance engineer reads.

`breakdown(model, gpus, nodes, batch)` returns seconds per part at each placement, summing to the
median step (`ScalingModel.step_time`):

- compute: the model's FLOPs at the fitted 1/MFU (`features.compute_parts`);
- recompute: what activation recomputation repeats (`features.recompute_flops_per_sample`);
- bubble: the pipeline's idle share, compute x (1/(1 - bubble) - 1) (Megatron-LM SC21 §2.2);
- overhead: per-step constants and host contention (the `overhead`, `contention*` columns);
- intra_node_comm, inter_node_comm: communication *not hidden* under compute. The model overlaps
  compute Tc and communication Ts as (Tc^γ + Ts^γ)^(1/γ) (docs/model.md), so the exposed part is
  T - Tc, shared between the links in proportion to each link's terms in Ts (its bandwidth,
  latency and sync columns).

The parts of the fitted step are then scaled by one factor to the median, which carries the
anchoring at measured counts and the MFU <= 100% floor, so the parts keep their proportions and
sum to the median exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from advisor.scaling import features as F
from advisor.scaling.estimator import combine

if TYPE_CHECKING:
    from advisor.scaling.model import ScalingModel

#: The parts, in the order they are printed.
PARTS = ("compute", "recompute", "intra_node_comm", "inter_node_comm", "bubble", "overhead")

#: Which link each communication column belongs to; `sync` (no run crossed nodes) goes to the link
#: the placement uses.
_LINK = {"intra_sync": "intra_node_comm", "intra_bandwidth": "intra_node_comm", "intra_latency": "intra_node_comm",
         "inter_sync": "inter_node_comm", "inter_bandwidth": "inter_node_comm", "inter_latency": "inter_node_comm"}


def breakdown(model: "ScalingModel", gpus, nodes, batch, median) -> dict[str, np.ndarray]:
    """Seconds per part (PARTS) at each placement, summing to `median` (the model's median step there)."""
    w = model.workload
    gpus, nodes, batch = (np.asarray(a, float) for a in (gpus, nodes, batch))
    fitted = model.record.fitted
    d = fitted.design(gpus, nodes, batch)
    est = fitted.estimator
    coef, nc = np.asarray(est.coef_, float), d.n_compute
    names = [c.name for c in d.columns]
    parts = {p: np.zeros_like(gpus) for p in PARTS}
    tc = np.maximum(d.X[:, :nc] @ coef[:nc], 0.0)
    if "compute" in names:
        theta = coef[names.index("compute")]
        work, redo = F.compute_parts(w, gpus, batch)
        piped = d.X[:, names.index("compute")]  # the topology family's compute is over 1 - bubble
        parts["compute"], parts["recompute"] = theta * work, theta * redo
        parts["bubble"] = np.maximum(theta * (piped - work - redo), 0.0)
    rest = tc - parts["compute"] - parts["recompute"] - parts["bubble"]
    parts["overhead"] = np.where(rest > 1e-9 * tc, rest, 0.0)  # rounding of the subtraction is not overhead
    if nc < len(names):
        terms = d.X[:, nc:] * coef[nc:]
        ts = np.maximum(terms.sum(axis=1), 0.0)
        exposed = np.maximum(combine(tc, ts, est.gamma_) - tc, 0.0)
        share = {p: np.zeros_like(gpus) for p in ("intra_node_comm", "inter_node_comm")}
        for j, name in enumerate(names[nc:]):
            link = _LINK.get(name) or np.where(nodes > 1, "inter_node_comm", "intra_node_comm")
            for p in share:
                share[p] = share[p] + np.where(link == p, terms[:, j], 0.0)
        for p in share:
            parts[p] = np.where(ts > 0, exposed * share[p] / np.where(ts > 0, ts, 1.0), 0.0)
    total = sum(parts.values())
    scale = np.where(total > 0, median / np.where(total > 0, total, 1.0), 0.0)
    return {p: v * scale for p, v in parts.items()}
