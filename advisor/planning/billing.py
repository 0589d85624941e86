"""What a plan costs: job steps, wall hours and dollars for every (GPU count, billing tier).

The step time comes from any `advisor.step_model.StepTimeModel` (advisor.scaling.model's
ScalingModel is one); everything here is arithmetic on numpy arrays, one row per tier and one
column per GPU count, so a sweep over 65,536 counts and every tier costs a few milliseconds
(benchmarks/recommend_sweep.py).

- steps: `job.steps`, or `ceil(job.samples / B(N))` with the global batch B(N) of
  advisor.batch (fixed-per-gpu: B grows with N, capped by `batch.max_global_samples`).
  With `batch.gradient_noise_scale` B_noise the job is read as "the progress the declared job makes
  at the reference batch B_0" (the global batch at the baseline count) and steps follow
  S(B) = S_min·(1 + B_noise/B) (McCandlish et al. 2018, "An Empirical Model of Large-Batch
  Training", eq. 2.11), i.e. S(N) = S_0·(1 + B_noise/B(N)) / (1 + B_noise/B_0).
- compute hours: h = steps · T(N) / 3600.
- preemptible tiers (`preemptions_per_node_hour` > 0): a synchronous job stops when any of its n
  nodes goes, so its interruption rate is Λ = rate · n per hour, exponential inter-arrival times.
  `Preemption` holds the exponential model of Daly 2006 ("A higher order estimate of the optimum
  checkpoint interval for restart dumps", FGCS 22(3), eq. 20: failures strike during work,
  checkpoint writes and restarts alike): with checkpoint δ, restart R and compute τ between
  checkpoints, expected wall time per compute hour is
      F = e^{ΛR} · (e^{Λ(τ+δ)} − 1) / (Λτ).
  τ minimises F exactly: Λτ = 1 + W₀(−e^{−(1+Λδ)}) (W₀ the principal Lambert W; dF/dτ = 0 gives
  e^{Λ(τ+δ)}(1 − Λτ) = 1), solved numerically (`optimal_exposure`). First-order Young/Daly,
  1 + sqrt(2Λδ) + ΛR, agrees only while
  Λ·(τ + R) is small. The wall time is random: each τ+δ segment ends after a geometric number of
  failures, each costing the lost part of the segment and a restart (itself retried on failure);
  `Preemption.cv` is the resulting coefficient of variation of the whole job's wall time (sum over
  its compute/τ independent segments), which `recommend` carries into P(meet). Every wall hour is
  billed (the surviving nodes wait through a restart).
- billing (`TierBilling`, the one place each tier kind's rule lives): cost = N · price ·
  max(wall hours, min_hours); its floor (N · price · min_hours, whatever the step time); and its
  inverse (the most wall hours a budget buys). `instance_gpus` prices only whole instances and
  `max_gpus` caps a tier.

GPU counts considered (`gpu_counts`): powers of two inside one node (1, 2, 4, ... up to
gpus_per_node, and gpus_per_node itself), then whole nodes up to cluster.max_gpus; n = ceil(N /
gpus_per_node). Left out before pricing: counts the batch rules out (advisor.batch: under
one sample per GPU, or not dividing a fixed global batch) and counts where the parallel layout does
not fit (advisor.topology.layouts.Layout.fits: degrees that cannot split the count, or a footprint,
state + activations corrected by a calibration's measured peak, above the GPU's memory).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.step_model import StepTimeModel

if TYPE_CHECKING:
    import numpy as np

    from advisor.planning.layout_choice import LayoutChoice
    from advisor.spec import Tier, Workload
    from advisor.topology.layouts import Layout
    from advisor.topology.memory import MeasuredPeak


#: Whole-node counts up to this many nodes are every one a candidate; past it `gpu_counts` thins them to
#: COUNTS_PER_DOUBLING a doubling (successive counts ~0.3% apart, finer than any price or step time the
#: model tells apart): every node of 2^20 single-GPU nodes was a 2^20-count sweep that did not finish in
#: 10 minutes, and 65,536 took 12 s and 1.3 GB.
DENSE_NODES = 4096
COUNTS_PER_DOUBLING = 256


def gpu_counts(gpus_per_node: int, max_gpus: int) -> "np.ndarray":
    """Candidate GPU counts: powers of two within a node, then every whole node up to DENSE_NODES nodes and
    COUNTS_PER_DOUBLING whole-node counts a doubling past it, up to max_gpus (the largest whole node count
    included)."""
    import numpy as np

    inside = [1 << i for i in range(gpus_per_node.bit_length()) if (1 << i) < gpus_per_node and (1 << i) <= max_gpus]
    most = max_gpus // gpus_per_node
    nodes = np.arange(1, min(most, DENSE_NODES) + 1, dtype=np.int64)
    if most > DENSE_NODES:
        points = int(np.ceil(np.log2(most / DENSE_NODES) * COUNTS_PER_DOUBLING)) + 1
        nodes = np.union1d(nodes, np.rint(np.geomspace(DENSE_NODES, most, points)).astype(np.int64))
    return np.concatenate([np.asarray(inside, dtype=np.int64), nodes * gpus_per_node])


def job_steps(w: "Workload", gpus: "np.ndarray", reference_gpus: int) -> "np.ndarray":
    """Optimizer steps the job takes at each GPU count (see module docstring); float array."""
    import numpy as np

    from advisor.batch import global_batch

    gpus = np.asarray(gpus)
    batch = np.maximum(global_batch(w, gpus), 1e-300)
    noise = w.batch.gradient_noise_scale
    if noise is None:
        if w.job.steps is not None:
            return np.full(gpus.shape, float(np.ceil(w.job.steps)))
        return np.ceil(w.job.samples / batch)
    reference_batch = float(global_batch(w, np.array([reference_gpus]))[0])
    reference_steps = w.job.steps if w.job.steps is not None else w.job.samples / reference_batch
    return np.ceil(reference_steps * (1 + noise / batch) / (1 + noise / reference_batch))


#: Below this Λ·(τ + restart) the first-order Young/Daly factor is within a few percent of the
#: exponential model (its error is second order in Λ·(τ + R)); above it the output says so.
SMALL_EXPOSURE = 0.1

#: Shortest checkpoint interval used when checkpoints are free (δ = 0 makes τ → 0): 1e-9 of the
#: mean time between preemptions, where the model has converged to its limit e^{ΛR}.
_TINY = 1e-9


def _truncated_exponential_moments(rate, length):
    """E[U] and E[U²] of the time U to a failure, given one strikes within `length` (rate Λ)."""
    import numpy as np

    x = rate * length
    small = x < 1e-4
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = -np.expm1(-x)
        e = np.exp(-x)
        m1 = 1 / rate - length * e / q
        m2 = (2 / rate**2 - e * (length**2 + 2 * length / rate + 2 / rate**2)) / q
    # below 1e-4 the cancellation above loses digits; the failure time is then uniform on [0, length]
    return np.where(small, length / 2, m1), np.where(small, length**2 / 3, m2)


def _retried_moments(rate, length, cost_mean, cost_var):
    """Mean and variance of the time to finish `length` of failure-free work when each failure
    costs a random C (mean, variance) on top of the lost part of the attempt: a geometric number of
    failures F (success probability e^{-Λ·length}), X = length + sum over F of (U + C)."""
    import numpy as np

    u1, u2 = _truncated_exponential_moments(rate, length)
    per_fail_mean = u1 + cost_mean
    per_fail_var = (u2 - u1**2) + cost_var
    fails = np.expm1(rate * length)  # E[F] = (1 - p) / p
    fails_var = fails * (fails + 1)  # Var F = (1 - p) / p²
    return length + fails * per_fail_mean, fails * per_fail_var + fails_var * per_fail_mean**2


def optimal_exposure(c) -> "np.ndarray":
    """Λτ minimising (e^{Λτ + c} − 1)/(Λτ) for c = Λδ >= 0: 1 + W₀(−e^{−(1+c)}).

    Solved as u = ln(1 − Λτ) from h(u) = u − (e^u − 1) + c = 0 by Newton's method: h is increasing and
    concave for u < 0, so from a start left of the root (h < 0; u0 = −(sqrt(2c) + c) is) Newton rises
    monotonically to it; 3 steps reach 1e-10 over c in [1e-14, 1e3], 6 are taken. Vectorised and real:
    scipy's complex lambertw is ~30x slower over 200k plans (tests compare with it).
    """
    import numpy as np

    c = np.asarray(c, dtype=float)
    h = lambda u: u - np.expm1(u) + c  # noqa: E731
    guess = -(np.sqrt(2 * c) + c)
    u = np.where(h(guess) <= 0, guess, -(1 + c))
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(6):
            step = h(u) / -np.expm1(u)
            u = np.where(np.isfinite(step), u - step, u)
    return np.where(c > 0, -np.expm1(u), 0.0)


@dataclass(frozen=True)
class Preemption:
    """The exponential preemption model (module docstring) for rates Λ per hour, checkpoint δ and
    restart R in hours; every field broadcasts (tiers x counts)."""

    rate: "np.ndarray"  # Λ, preemptions per hour of the whole job
    checkpoint: "np.ndarray"  # δ, hours
    restart: "np.ndarray"  # R, hours

    @classmethod
    def of(cls, rate_per_node_hour, nodes, checkpoint_seconds, restart_seconds) -> "Preemption":
        import numpy as np

        rate = np.asarray(rate_per_node_hour, dtype=float) * np.asarray(nodes, dtype=float)
        delta = np.asarray(checkpoint_seconds, dtype=float) / 3600 + 0 * rate
        return cls(rate, delta, np.asarray(restart_seconds, dtype=float) / 3600 + 0 * rate)

    def _active(self, kernel, inactive: float, *more) -> "np.ndarray":
        """`kernel(Λ, δ, R, *more)` evaluated where Λ > 0 only (tiers without preemptions get `inactive`)."""
        import numpy as np

        out = np.full(self.rate.shape, inactive, dtype=float)
        on = self.rate > 0
        if on.any():
            extra = (np.broadcast_to(np.asarray(m, dtype=float), self.rate.shape)[on] for m in more)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                out[on] = kernel(self.rate[on], self.checkpoint[on], self.restart[on], *extra)
        return out

    @functools.cached_property
    def interval_hours(self) -> "np.ndarray":
        """Compute τ between checkpoints minimising the expected wall time (inf without preemptions; 0 if δ = 0)."""
        return self._active(_interval, float("inf"))

    @functools.cached_property
    def factor(self) -> "np.ndarray":
        """Expected wall hours per compute hour: e^{ΛR}·(e^{Λ(τ+δ)} − 1)/(Λτ) (1 without preemptions)."""
        return self._active(_factor, 1.0)

    @functools.cached_property
    def first_order_factor(self) -> "np.ndarray":
        """Young/Daly to first order, 1 + sqrt(2Λδ) + ΛR: what the exponential model replaces."""
        import numpy as np

        return 1 + np.sqrt(2 * self.rate * self.checkpoint) + self.rate * self.restart

    @functools.cached_property
    def exposure(self) -> "np.ndarray":
        """Λ·(τ + R): expected preemptions per checkpoint interval plus restart (small: first order holds)."""
        return self._active(lambda lam, delta, restart: lam * (_interval(lam, delta, restart) + restart), 0.0)

    def cv(self, compute_hours) -> "np.ndarray":
        """Coefficient of variation (std / mean) of the wall time of a job of `compute_hours`."""
        return self._active(_cv, 0.0, compute_hours)


def _interval(lam, delta, restart):
    import numpy as np

    return np.where(delta > 0, optimal_exposure(lam * delta) / lam, 0.0)


def _tau(lam, delta, restart):
    """τ, floored where checkpoints are free (δ = 0 makes the optimum τ → 0, where the model converges)."""
    import numpy as np

    return np.maximum(_interval(lam, delta, restart), _TINY / lam)


def _factor(lam, delta, restart):
    import numpy as np

    tau = _tau(lam, delta, restart)
    return np.exp(lam * restart) * np.expm1(lam * (tau + delta)) / (lam * tau)


def _cv(lam, delta, restart, compute_hours):
    import numpy as np

    tau = _tau(lam, delta, restart)
    # a restart of length R is itself retried: failures during it cost only its lost part
    y_mean, y_var = _retried_moments(lam, restart, 0.0, 0.0)
    seg_mean, seg_var = _retried_moments(lam, tau + delta, y_mean, y_var)
    out = np.sqrt(seg_var / (compute_hours / tau)) / seg_mean
    return np.where(np.isfinite(out), out, 0.0)


@dataclass(frozen=True)
class TierBilling:
    """How each tier bills, as (tiers, 1) columns: the forward rule, its floor and its inverse."""

    price: "np.ndarray"  # USD per GPU-hour
    min_hours: "np.ndarray"  # billed at least this long (reserved)
    instance: "np.ndarray"  # GPUs per rentable instance (1: any count)
    cap: "np.ndarray"  # most GPUs on the tier

    @classmethod
    def of(cls, tiers: Sequence["Tier"], cluster_max: int) -> "TierBilling":
        import numpy as np

        column = lambda values: np.array(values, dtype=float)[:, None]  # noqa: E731
        return cls(
            column([t.usd_per_gpu_hour for t in tiers]),
            column([t.min_hours for t in tiers]),
            column([t.instance_gpus or 1 for t in tiers]),
            column([min(t.max_gpus or cluster_max, cluster_max) for t in tiers]),
        )

    def offers(self, gpus) -> "np.ndarray":
        """(tiers, counts): the tier rents this many GPUs (whole instances, within its cap)."""
        import numpy as np

        gpus = np.asarray(gpus, dtype=float)[None, :]
        return (gpus <= self.cap) & (np.mod(gpus, self.instance) == 0)

    def cost(self, gpus, wall_hours) -> "np.ndarray":
        """Dollars for `wall_hours` (..., tiers, counts) at N GPUs: N · price · max(wall, min_hours)."""
        import numpy as np

        with np.errstate(over="ignore"):  # a preemption factor that overflows is an infinitely dear plan
            return np.asarray(gpus, dtype=float) * self.price * np.maximum(wall_hours, self.min_hours)

    def floor(self, gpus) -> "np.ndarray":
        """(tiers, counts): the least a plan can cost whatever its step time (min_hours billed)."""
        return self.cost(gpus, 0.0)

    def affordable_hours(self, gpus, budget: float) -> "np.ndarray":
        """(tiers, counts): the most wall hours `budget` buys (inf on a free tier, -inf below the floor)."""
        import numpy as np

        per_hour = np.asarray(gpus, dtype=float) * self.price
        with np.errstate(divide="ignore"):
            hours = np.where(per_hour > 0, budget / per_hour, np.inf)
        return np.where(self.floor(gpus) > budget, -np.inf, hours)


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """Every (tier, GPU count) priced. Arrays are (tiers, counts) unless noted; `available` is
    False where a tier, the batch or memory rules the plan out. Index 0/1/2 of a leading axis of 3:
    median, low, high (the model's 90% interval)."""

    tiers: tuple["Tier", ...]
    billing: TierBilling
    preemption: Preemption  # (tiers, counts)
    gpus: "np.ndarray"  # (counts,)
    nodes: "np.ndarray"  # (counts,)
    steps: "np.ndarray"  # (counts,)
    global_batch: "np.ndarray"  # (counts,) samples per optimizer step
    step_seconds: "np.ndarray"  # (3, counts): median, low, high
    compute_hours: "np.ndarray"  # (3, counts): steps x step time, no tier overhead
    wall_hours: "np.ndarray"  # (3, tiers, counts)
    cost_usd: "np.ndarray"  # (3, tiers, counts)
    available: "np.ndarray"  # (tiers, counts) bool
    offered: "np.ndarray"  # (tiers, counts) the tier rents this count (instances, caps)
    fits_batch: "np.ndarray"  # (counts,) whole samples per GPU, dividing a fixed global batch
    fits_memory: "np.ndarray"  # (counts,) the footprint fits in GPU memory
    memory_bytes: "np.ndarray"  # (counts,) footprint per GPU (measured peak applied where there is one)
    gpu_memory: float | None  # bytes per GPU (None: unknown, nothing ruled out)
    baseline_gpus: int
    baseline_hours: float  # compute hours at the baseline count: the speedup reference
    statistical_efficiency: bool  # steps depend on N through the gradient noise scale
    #: The layout of each count and why it was chosen (advisor.planning.layout_choice.sweep sets it).
    layouts: LayoutChoice | None = None

    @property
    def factor(self) -> "np.ndarray":
        """(tiers, counts) expected wall hours per compute hour (preemption overhead; 1 elsewhere)."""
        return self.preemption.factor

    @functools.cached_property
    def wall_cv(self) -> "np.ndarray":
        """(tiers, counts) coefficient of variation of the wall time from preemptions (at the median)."""
        return self.preemption.cv(self.compute_hours[0][None, :])

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
        return self.billing.floor(self.gpus)


def _step_times(model: StepTimeModel, gpus, nodes, batch):
    """The model's (median, low, high) step seconds at the sweep's global batch, stacked."""
    import numpy as np

    return np.stack([np.asarray(a, dtype=float) for a in model.step_time(gpus, nodes, global_batch=batch)])


def sweep(
    w: "Workload",
    model: StepTimeModel,
    tiers: Sequence["Tier"] | None = None,
    baseline_gpus: int | None = None,
    gpus: "np.ndarray" | None = None,
    peaks: Sequence["MeasuredPeak"] = (),
    layout: "Layout | None" = None,
    measured: "Workload | None" = None,
) -> Sweep:
    """Price every candidate GPU count on every tier (default: all of the workload's tiers).

    `baseline_gpus` (default: the model's, else the smallest calibration count) is the reference
    for speedup and for the gradient-noise-scale batch. `gpus` (ascending) overrides the candidate
    counts; `peaks` are a calibration's measured memory peaks (advisor.topology.memory.measured_peaks),
    measured in the layout of `measured` (default `w`). `layout` is the parallel layout over the counts
    (default: the spec's own; advisor.planning.layout_choice passes each candidate's): its memory per
    GPU and whether it fits (`Layout.fits`).
    """
    import numpy as np

    from advisor import batch
    from advisor.topology.layouts import build
    from advisor.topology.memory import gpu_memory_bytes

    tiers = tuple(w.tiers if tiers is None else tiers)
    if baseline_gpus is None:
        baseline_gpus = model.baseline_gpus or min(w.calibration.gpus)
    counts = (
        gpu_counts(w.cluster.gpus_per_node, w.cluster.max_gpus) if gpus is None else np.asarray(gpus, dtype=np.int64)
    )
    nodes = np.asarray(w.nodes(counts), dtype=np.int64)
    billing = TierBilling.of(tiers, w.cluster.max_gpus)
    layout = layout or build(w, counts, nodes)
    memory = layout.memory_bytes(w, peaks, measured)
    fits_batch = batch.divides(w, counts)
    fits = layout.fits(w, memory_bytes=memory)
    offered = billing.offers(counts)
    global_batch = batch.global_batch(w, counts)
    step_seconds = _step_times(model, counts, nodes, global_batch)
    steps = job_steps(w, counts, baseline_gpus)
    compute_hours = steps * step_seconds / 3600
    preemption = _preemption(tiers, nodes)
    wall, cost, finite = _priced(billing, preemption, counts, compute_hours)
    return Sweep(
        tiers=tiers, billing=billing, preemption=preemption, gpus=counts, nodes=nodes,
        steps=steps, global_batch=global_batch, step_seconds=step_seconds,
        compute_hours=compute_hours, wall_hours=wall, cost_usd=cost,
        available=offered & fits_batch[None, :] & fits[None, :] & finite, offered=offered, fits_batch=fits_batch,
        # GPU memory unknown: nothing is left out for memory, so no memory sentence is written without a
        # capacity to name (it crashed on tiny-cpu --layouts auto, where layouts the count cannot run
        # made `fits` false)
        fits_memory=fits if gpu_memory_bytes(w) is not None else np.ones_like(fits),
        memory_bytes=memory, gpu_memory=gpu_memory_bytes(w),
        baseline_gpus=int(baseline_gpus), baseline_hours=_baseline_hours(w, model, baseline_gpus),
        statistical_efficiency=w.batch.gradient_noise_scale is not None and w.batch.policy == "fixed-per-gpu",
    )


def _priced(billing: "TierBilling", preemption: Preemption, counts, compute_hours):
    """(wall hours, cost, finishes) per (bound, tier, count): compute hours stretched by each tier's
    preemptions, their price, and whether the job finishes at all. Preemptions so frequent that the
    expected wall time overflows, or passes the longest deadline advisor accepts, make no plan (60
    preemptions per node-hour against a 1 h restart priced 16 GPUs at 2e107 hours, a 100-digit figure
    recommended as "worth its cost")."""
    import numpy as np

    with np.errstate(over="ignore"):  # a factor so large it overflows: the job never finishes
        wall = compute_hours[:, None, :] * preemption.factor[None, :, :]
    cost = billing.cost(counts, wall)
    return wall, cost, finishes(wall, cost)


def finishes(wall: "np.ndarray", cost: "np.ndarray") -> "np.ndarray":
    """(tiers, counts) from (bound, tiers, counts) wall hours and cost: where the plan finishes, with every
    bound's wall time and cost finite and the median within MAX_DEADLINE_HOURS (outlasts). The one test of
    which plans a tier's preemptions stall (the sweep leaves them out; advisor.planning.explain says so)."""
    import numpy as np

    return np.isfinite(wall).all(axis=0) & np.isfinite(cost).all(axis=0) & ~outlasts(wall[0])


def outlasts(hours: "np.ndarray") -> "np.ndarray":
    """Where a plan never finishes: an expected wall time (median) above MAX_DEADLINE_HOURS, a century,
    the longest deadline advisor accepts (NaN counts as never). A preemptible tier's model puts it there
    when each restart is itself preempted (e^{ΛR} grows without bound); any tier when the job alone
    outlasts it (160B tokens at 1e17: 4.8 million hours on 1,024 H100s, priced at $9.4 billion and
    recommended). Such a plan is left out, not priced."""
    import numpy as np

    from advisor.planning.limits import MAX_DEADLINE_HOURS

    with np.errstate(invalid="ignore"):
        return ~(np.asarray(hours) <= MAX_DEADLINE_HOURS)


def _preemption(tiers: Sequence["Tier"], nodes: "np.ndarray") -> Preemption:
    """Each tier's preemption model (tiers, counts) at each count's node count."""
    import numpy as np

    column = lambda attr: np.array([getattr(t, attr) for t in tiers], dtype=float)[:, None]  # noqa: E731
    return Preemption.of(column("preemptions_per_node_hour"), nodes[None, :], column("checkpoint"), column("restart"))


def _baseline_hours(w: "Workload", model: StepTimeModel, baseline_gpus: int) -> float:
    """Compute hours at the baseline count (on its measured placement): the speedup reference."""
    import numpy as np

    from advisor.batch import global_batch

    base = np.array([baseline_gpus], dtype=np.int64)
    own = model.baseline_nodes if baseline_gpus == model.baseline_gpus else None
    base_nodes = np.array([own or w.nodes(baseline_gpus)], dtype=np.int64)
    base_step = float(_step_times(model, base, base_nodes, global_batch(w, base))[0, 0])
    return float(job_steps(w, base, baseline_gpus)[0]) * base_step / 3600
