"""What a plan costs: job steps, wall hours and dollars for every (GPU count, billing tier).

The step time comes from any `StepTimeModel` (advisor.scaling.model's ScalingModel is one); everything
here is arithmetic on numpy arrays, one row per tier and one column per GPU count, so a sweep over
65,536 counts and every tier costs a few milliseconds (benchmarks/recommend_sweep.py).

The formulas (DESIGN.md §6):

- steps: `job.steps`, or `ceil(job.samples / global_batch(N))` (fixed-per-gpu: the global batch
  grows with N, so steps shrink). With `batch.gradient_noise_scale` B_noise declared, the job is
  read as "the progress the declared job makes at the reference batch B_0" (the global batch at
  the baseline count) and steps follow S(B) = S_min·(1 + B_noise/B) (McCandlish et al. 2018, "An
  Empirical Model of Large-Batch Training", eq. 2.11), i.e. S(N) = S_0·(1 + B_noise/B(N)) /
  (1 + B_noise/B_0): a larger batch saves fewer steps than linearly. Under fixed-global the batch
  does not change with N and the factor is 1.
- compute hours: h = steps · T(N) / 3600.
- preemptible tiers (`preemptions_per_node_hour` > 0): a synchronous job stops when any of its n
  nodes goes, so its interruption rate is Λ = rate · n per hour. With checkpoint time δ and the
  Young/Daly interval τ = sqrt(2δ/Λ) (Young 1974; Daly 2006, first order), the expected wall time
  is h · (1 + δ/τ + Λ·(τ/2 + restart)) = h · (1 + sqrt(2Λδ) + Λ·restart): checkpoint writes, lost
  work since the last checkpoint (τ/2 on average) and restarts. Every wall hour is billed (the
  surviving nodes wait through a restart).
- `min_hours` (reserved): billed hours = max(wall hours, min_hours).
- cost = N · billed hours · usd_per_gpu_hour. `max_gpus` on a tier (and the cluster's) caps N.

GPU counts considered (`gpu_counts`): powers of two inside one node (1, 2, 4, ... up to
gpus_per_node, and gpus_per_node itself), then whole nodes (every multiple of gpus_per_node) up to
cluster.max_gpus. Nodes are filled: n = ceil(N / gpus_per_node). Left out as impossible: under
fixed-global, a count above the global batch (under one sample per GPU); and a count whose GPUs
cannot hold the model states, 16 bytes per parameter (bf16/fp16 weights and gradients plus fp32
Adam master weights, momentum and variance: Rajbhandari et al. 2020, "ZeRO", §3.1; fp32 training
needs the same 4 + 4 + 8), sharded over N under FSDP (ZeRO-3), whole on every GPU under DDP,
against the catalog's GPU memory (activations come on top, so this is a lower bound).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Protocol, Sequence

if TYPE_CHECKING:
    import numpy as np

    from advisor.spec import Tier, Workload


class StepTimeModel(Protocol):
    """Anything that predicts seconds per optimizer step at N GPUs over n nodes.

    `step_time(gpus, nodes)` takes equal-length integer arrays and returns (median, low, high):
    arrays of seconds, low/high a 90% interval. A model may also carry `baseline_gpus` and
    `baseline_nodes` (the smallest measured count and its placement), the reference for speedup
    and efficiency, and `extrapolation_warnings(gpus, nodes) -> list[str]`, shown with the choice.
    """

    def step_time(self, gpus: "np.ndarray", nodes: "np.ndarray") -> tuple["np.ndarray", "np.ndarray", "np.ndarray"]: ...


def gpu_counts(gpus_per_node: int, max_gpus: int) -> "np.ndarray":
    """Candidate GPU counts: powers of two within a node, then every whole node, up to max_gpus."""
    import numpy as np

    inside = [1 << i for i in range(gpus_per_node.bit_length()) if (1 << i) < gpus_per_node and (1 << i) <= max_gpus]
    whole = np.arange(gpus_per_node, max_gpus + 1, gpus_per_node, dtype=np.int64)
    return np.concatenate([np.asarray(inside, dtype=np.int64), whole])


#: Bytes of model state per parameter in mixed-precision Adam training (ZeRO §3.1: 2 + 2 + 12).
STATE_BYTES_PER_PARAM = 16


def fits_memory(w: "Workload", gpus: "np.ndarray") -> "np.ndarray":
    """Whether N GPUs can hold the model states (True everywhere when the GPU's memory is unknown)."""
    import numpy as np

    from advisor.catalog import find_gpu

    gpu = find_gpu(w.cluster.gpu)
    states = STATE_BYTES_PER_PARAM * w.model.params
    per_gpu = states / gpus if w.parallelism.strategy == "fsdp" else states + 0 * gpus
    return np.ones(gpus.shape, dtype=bool) if gpu is None else per_gpu <= gpu.memory_bytes


def job_steps(w: "Workload", gpus: "np.ndarray", reference_gpus: int) -> "np.ndarray":
    """Optimizer steps the job takes at each GPU count (see module docstring); float array."""
    import numpy as np

    gpus = np.asarray(gpus)
    batch = np.asarray(w.global_batch(gpus), dtype=float)
    noise = w.batch.gradient_noise_scale
    if noise is None:
        if w.job.steps is not None:
            return np.full(gpus.shape, float(np.ceil(w.job.steps)))
        return np.ceil(w.job.samples / batch)
    reference_batch = float(w.global_batch(reference_gpus))
    reference_steps = w.job.steps if w.job.steps is not None else w.job.samples / reference_batch
    return np.ceil(reference_steps * (1 + noise / batch) / (1 + noise / reference_batch))


def preemption_factor(rate_per_node_hour, nodes, checkpoint_seconds, restart_seconds):
    """Expected wall time per compute hour under preemption: 1 + sqrt(2Λδ) + Λ·restart.

    Λ = rate · nodes (per hour); checkpoint δ and restart given in seconds. Broadcasts (tiers x counts).
    """
    import numpy as np

    rate = rate_per_node_hour * nodes
    return 1 + np.sqrt(2 * rate * checkpoint_seconds / 3600) + rate * restart_seconds / 3600


def checkpoint_interval_hours(rate_per_node_hour, nodes, checkpoint_seconds):
    """Young/Daly checkpoint interval τ = sqrt(2δ/Λ) in hours (inf without preemptions)."""
    import numpy as np

    rate = rate_per_node_hour * np.asarray(nodes, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rate > 0, np.sqrt(2 * (np.asarray(checkpoint_seconds) / 3600) / rate), np.inf)


@dataclass(frozen=True)
class Sweep:
    """Every (tier, GPU count) priced. Arrays are (tiers, counts) unless noted; `available` is
    False where a cap, the batch or memory rules the plan out. Index 0/1/2 of a leading axis of 3:
    median, low, high (the model's 90% interval)."""

    tiers: tuple["Tier", ...]
    gpus: "np.ndarray"            # (counts,)
    nodes: "np.ndarray"           # (counts,)
    steps: "np.ndarray"           # (counts,)
    step_seconds: "np.ndarray"    # (3, counts): median, low, high
    compute_hours: "np.ndarray"   # (3, counts): steps x step time, no tier overhead
    factor: "np.ndarray"          # wall hours per compute hour (preemption overhead)
    wall_hours: "np.ndarray"      # (3, tiers, counts)
    cost_usd: "np.ndarray"        # (3, tiers, counts)
    available: "np.ndarray"       # (tiers, counts) bool
    fits_batch: "np.ndarray"      # (counts,) at least one sample per GPU
    fits_memory: "np.ndarray"     # (counts,) the model states fit in GPU memory
    baseline_gpus: int
    baseline_hours: float         # compute hours at the baseline count: the speedup reference
    statistical_efficiency: bool  # steps depend on N through the gradient noise scale

    @functools.cached_property
    def speedup(self) -> "np.ndarray":
        """How many times sooner than the baseline count (median), preemption losses included."""
        return self.baseline_hours / self.wall_hours[0]

    @functools.cached_property
    def efficiency(self) -> "np.ndarray":
        """Speedup per GPU relative to the baseline: speedup · baseline / N."""
        return self.speedup * self.baseline_gpus / self.gpus

    def billed_floor_usd(self) -> "np.ndarray":
        """(tiers, counts): the least a plan can cost whatever its step time (min_hours)."""
        import numpy as np

        prices = np.array([t.usd_per_gpu_hour for t in self.tiers])[:, None]
        floors = np.array([t.min_hours for t in self.tiers])[:, None]
        return self.gpus * prices * floors


def sweep(
    w: "Workload",
    model: StepTimeModel,
    tiers: Optional[Sequence["Tier"]] = None,
    baseline_gpus: Optional[int] = None,
    gpus: Optional["np.ndarray"] = None,
) -> Sweep:
    """Price every candidate GPU count on every tier (default: all of the workload's tiers).

    `baseline_gpus` (default: the model's, else the smallest calibration count) is the reference
    for speedup and for the gradient-noise-scale batch. `gpus` (ascending) overrides the candidate counts.
    """
    import numpy as np

    tiers = tuple(w.tiers if tiers is None else tiers)
    if baseline_gpus is None:
        baseline_gpus = getattr(model, "baseline_gpus", None) or min(w.calibration.gpus)
    counts = gpu_counts(w.cluster.gpus_per_node, w.cluster.max_gpus) if gpus is None else np.asarray(gpus, dtype=np.int64)
    nodes = np.asarray(w.nodes(counts), dtype=np.int64)

    fits_batch = w.per_gpu_batch(counts) >= 1
    fits = fits_memory(w, counts)
    caps = np.array([min(t.max_gpus or w.cluster.max_gpus, w.cluster.max_gpus) for t in tiers])[:, None]
    available = (counts[None, :] <= caps) & fits_batch[None, :] & fits[None, :]

    median, low, high = (np.asarray(a, dtype=float) for a in model.step_time(counts, nodes))
    step_seconds = np.stack([median, low, high])
    steps = job_steps(w, counts, baseline_gpus)
    compute_hours = steps * step_seconds / 3600

    base = np.array([baseline_gpus], dtype=np.int64)
    base_nodes = np.array([getattr(model, "baseline_nodes", None) or w.nodes(baseline_gpus)], dtype=np.int64)
    base_step = float(np.asarray(model.step_time(base, base_nodes)[0])[0])
    baseline_hours = float(job_steps(w, base, baseline_gpus)[0]) * base_step / 3600

    column = lambda attr: np.array([getattr(t, attr) for t in tiers], dtype=float)[:, None]  # noqa: E731
    factor = preemption_factor(column("preemptions_per_node_hour"), nodes[None, :], column("checkpoint"), column("restart"))
    wall = compute_hours[:, None, :] * factor[None, :, :]
    billed = np.maximum(wall, column("min_hours")[None, :, :])
    cost = counts[None, None, :] * billed * column("usd_per_gpu_hour")[None, :, :]

    varies = w.batch.gradient_noise_scale is not None and w.batch.policy == "fixed-per-gpu"
    return Sweep(tiers, counts, nodes, steps, step_seconds, compute_hours, factor, wall, cost, available, fits_batch,
                 fits, int(baseline_gpus), baseline_hours, varies)
