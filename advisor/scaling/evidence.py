"""What the evidence behind a fitted model says about its answers: what the measurements span
(`Extent`) and the caveats shown with every prediction and plan (`fit_warnings`,
`extrapolation_warnings`; advisor.step_model.StepTimeModel.warnings joins them).

The caveats name what the data could not pin, each with the fix: no run or probe across nodes
(the inter-node terms are the declared link at the prior's achieved share); fewer than 3 measured
counts (the prior carries the rest); fewer out-of-sample residuals than the noise prior's weight
(the interval leans on an assumed run-to-run noise); a coefficient at its physical bound (the data
asked for more than physics allows: a wrong peak_flops or link speed); a collective probe far
below (NCCL over TCP sockets reaches ~10-25% of an InfiniBand link) or above the declared link;
and predicting far past the largest measured count or past the largest measured node count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from advisor.scaling.priors import LINK_TOLERANCE
from advisor.text import plural
from advisor.topology.collectives import bus_bandwidth

if TYPE_CHECKING:
    from advisor.scaling.features import MemoryPressure
    from advisor.scaling.fitting import FitData, FittedFamily
    from advisor.scaling.intervals import NoiseModel

#: Warn when predicting past this multiple of the largest measured GPU count.
EXTRAPOLATION_WARN = 4.0

#: Warn when a collective probe's bus bandwidth is below this fraction of the declared link: far
#: below is a misconfiguration (NCCL over TCP sockets instead of RDMA reaches ~10-25% of an
#: InfiniBand link), not a slow network.
BUSBW_WARN_FRACTION = 0.25

#: Warn when a fitted coefficient sits within this factor of its physical bound (the fit leans on it).
BOUND_WARN = 1.02

#: Share of the GPU's memory above which a measured peak is "near capacity": the caching allocator
#: starts to free and retry (cudaMalloc retries, `num_alloc_retries` in torch.cuda.memory_stats) and
#: steps slow. A judgement: PyTorch's fragmentation typically leaves 5-10% of the device unusable.
#: advisor.calibrate.quality warns at the same share.
MEMORY_NEAR = 0.9


@dataclass(frozen=True, kw_only=True)
class Extent:
    """What the measured runs span: the reference count of speedup and efficiency with its node
    count (the smallest measured, see `of`), the largest count and the largest node count. Nothing measured: a
    baseline of 1 GPU on 1 node and largest counts of 0."""

    baseline_gpus: int = 1
    baseline_nodes: int = 1
    max_gpus: int = 0
    max_nodes: int = 0

    @classmethod
    def of(cls, data: "FitData") -> "Extent":
        """The baseline is the smallest count unless a measurement is superlinear beyond the noise
        (advisor.scaling.ceiling.Ceiling.reference_count): then the count with the best per-GPU
        throughput, so that no efficiency reads above 100% against a slowed small run."""
        from advisor.scaling.ceiling import Ceiling

        if data.empty:
            return cls()
        baseline = Ceiling.of(data).reference_count() or int(data.gpus.min())
        return cls(baseline_gpus=baseline, baseline_nodes=int(data.nodes[data.gpus == baseline].min()),
                   max_gpus=int(data.gpus.max()), max_nodes=int(data.nodes.max()))

    @property
    def measured(self) -> bool:
        return self.max_gpus > 0

    def distance(self, gpus, nodes) -> np.ndarray:
        """How far past the data each placement is: max(N / largest count, nodes / largest node
        count), >= 1 (1 everywhere when nothing was measured); the interval widens with it."""
        if not self.measured:
            return np.ones_like(np.asarray(gpus, float))
        return np.maximum(np.maximum(gpus / self.max_gpus, nodes / self.max_nodes), 1.0)


def extrapolation_warnings(extent: Extent, gpus, nodes) -> list[str]:
    """Predicting far past the largest measured count, or past the largest measured node count."""
    if not extent.measured:
        return []
    out = []
    far = gpus > EXTRAPOLATION_WARN * extent.max_gpus
    if far.any():
        out.append(f"extrapolating to {int(gpus[far].max())} GPUs, "
                   f"{gpus[far].max() / extent.max_gpus:.0f}x the largest measured count "
                   f"({extent.max_gpus}): treat as an estimate, see the interval")
    wide = nodes > extent.max_nodes
    if wide.any():
        out.append(f"predicting up to {plural(int(nodes[wide].max()), 'node')}, "
                   f"past the largest measured node count ({extent.max_nodes})")
    return out


def fit_warnings(fitted: "FittedFamily", noise: "NoiseModel", calibrated: bool) -> list[str]:
    """The fit's own caveats (module docstring), in the order the output has always shown them."""
    problem = fitted.problem
    w = problem.workload
    if not calibrated and not problem.probes:
        return [(f"uncalibrated: no measurement of {w.name}; every number is the prior's first estimate "
                 "from the spec (MFU, achieved bandwidth and overlap as seen across published jobs), "
                 "with wide intervals; run `advisor calibrate` or pass --calibration/--measurements")]
    if not calibrated:
        measured = ", ".join(sorted(k for k, v in term_sources(fitted).items() if v != "prior")) or "nothing"
        return [(f"uncalibrated: no step of {w.name} measured, only "
                 f"{plural(len(problem.probes), 'collective probe')}: they measure {measured}; compute "
                 "(MFU), per-step constants and overlap are the prior's, with wide intervals; add step times "
                 "(`advisor calibrate`, `advisor import torchtitan`, --measurements FILE.csv) to pin them"),
                *bound_warnings(fitted), *busbw_warnings(w, problem.probes)]
    out = []
    crossed = problem.coverage.steps_crossed_nodes or problem.coverage.probes_crossed_nodes
    if fitted.family.has_overlap and not crossed:
        out.append(f"no measurement crossed nodes: the inter-node terms come from the declared "
                   f"inter_node_bandwidth ({w.cluster.inter_node_bandwidth / 1e9:g} GB/s per node) and "
                   f"inter_node_latency ({w.cluster.inter_node_latency * 1e6:g} us) with the prior's achieved "
                   "share, not a measurement; calibrating across >= 3 nodes is what makes extrapolation work")
    n_counts = np.unique(problem.data.gpus).size
    if n_counts < 3:
        out.append(f"{plural(n_counts, 'measured GPU count')}: the prior carries what the data cannot pin; "
                   "3+ counts across 2+ nodes narrow the interval")
    if noise.prior_dominated:
        few = ("no out-of-sample residual" if noise.n_residuals == 0
               else f"only {plural(noise.n_residuals, 'out-of-sample residual')}")
        out.append(f"{few}: intervals lean on an assumed {noise.prior_noise:.0%} run-to-run noise")
    return out + bound_warnings(fitted) + busbw_warnings(w, problem.probes)


def bound_warnings(fitted: "FittedFamily") -> list[str]:
    """Say when the fit leans on a physical bound: the data asked for more than physics allows."""
    est = fitted.estimator
    lo = dict(est.lower)
    out = []
    for j, col in enumerate(fitted.columns):
        if j not in lo or col.name.endswith("_latency") or est.coef_[j] > BOUND_WARN * lo[j]:
            continue
        if col.name == "compute":
            out.append("the fit leans on MFU <= 100%: measured steps are as fast as the declared peak_flops "
                       f"({fitted.workload.peak_flops:.3g} FLOP/s) allows; check peak_flops and the model's FLOPs")
        else:
            link = col.name.split("_")[0]
            out.append(f"the fit leans on the {link}-node link bound: it asked for a link faster than declared "
                       f"(> {1 + LINK_TOLERANCE:.2f}x); check {link}_node_bandwidth")
    return out


def busbw_warnings(w, probes) -> list[str]:
    """A probe (the largest message per op, placement and algorithm) far below its declared link (a
    misconfiguration) or above what its algorithm can reach on it (the declaration is wrong): busbw
    against the algorithm's ceiling (advisor.imports.algorithm; a 2-node tree all-reduce reports up to
    2(N-1)/N x the NICs' rate, NVIDIA/nccl#946)."""
    from advisor.imports.algorithm import busbw_ceiling_factor, expected_algorithm

    out = []
    largest: dict[tuple, object] = {}
    for p in probes:
        key = (p.op, p.gpus, p.nodes, getattr(p, "algorithm", None))
        if key not in largest or p.bytes > largest[key].bytes:
            largest[key] = p
    for (op, gpus, nodes, algo), p in sorted(largest.items(), key=lambda kv: str(kv[0])):
        declared = float(bus_bandwidth(w, np.array([nodes]))[0]) / 1e9
        ceiling = busbw_ceiling_factor(algo, op, gpus, nodes) * declared
        link = "inter-node" if nodes > 1 else "intra-node"
        where = f"{op} ({algo or expected_algorithm(op, nodes)}) on {plural(gpus, 'GPU')} over {plural(nodes, 'node')}"
        if p.busbw < BUSBW_WARN_FRACTION * ceiling:
            out.append(f"{where} reached {p.busbw:.3g} GB/s bus bandwidth, {p.busbw / ceiling:.0%} of the "
                       f"{ceiling:.3g} GB/s it reaches on the declared {link} {declared:.3g} GB/s: likely a "
                       "misconfiguration (e.g. NCCL falling back to TCP) or a wrong declared bandwidth")
        elif p.busbw > (1 + LINK_TOLERANCE) * ceiling:
            out.append(f"{where} measured {p.busbw:.3g} GB/s bus bandwidth, above the {ceiling:.3g} GB/s it "
                       f"reaches on the declared {link} {declared:.3g} GB/s: the declaration contradicts the "
                       "measurement; raise the declared bandwidth")
    return out


def term_sources(fitted: "FittedFamily") -> dict[str, str]:
    """Per fitted column (and `gamma`): what pinned it, "steps", "probes", "steps+probes" or "prior".
    A column is measured when a measured step's or probe's design row reaches it (non-zero); in a
    staged fit (advisor.scaling.fitting.fit_staged) only one-node rows and probes reach the one-node
    columns; γ when a step mixed compute with communication. The rest is the prior's (docs/model.md)."""
    from advisor.scaling.features import PRESSURE_COLUMN
    from advisor.scaling.fitting import INTER_COLUMNS, staged

    problem, fam, cols = fitted.problem, fitted.family, fitted.columns
    d, probes = problem.data, list(problem.probes)
    steps = problem.data_design(fam, d.gpus, d.nodes, d.batch).X if not d.empty else np.zeros((0, len(cols)))
    probe_X, _ = fam.probe_design(problem.workload, probes, problem.coverage)
    probe_X = probe_X if probe_X.size else np.zeros((0, len(cols)))
    if staged(fam, problem):
        local = np.array([c.name not in (*INTER_COLUMNS, PRESSURE_COLUMN) for c in cols])
        steps, probe_X = steps.copy(), probe_X.copy()
        steps[np.ix_(d.nodes > 1, local)] = 0.0
        probe_X[np.ix_(np.array([p.nodes > 1 for p in probes], bool), local)] = 0.0
    out = {}
    for j, c in enumerate(cols):
        by = [k for k, X in (("steps", steps), ("probes", probe_X)) if X.shape[0] and np.any(X[:, j] != 0)]
        out[c.name] = "+".join(by) or "prior"
    if fam.has_overlap:
        nc = fitted.estimator.n_compute
        mixed = steps.shape[0] and np.any((steps[:, :nc] != 0).any(axis=1) & (steps[:, nc:] != 0).any(axis=1))
        out["gamma"] = "steps" if mixed else "prior"
    return out


def memory_pressed(data: "FitData", peaks, w, flagged=()) -> np.ndarray:
    """Per grouped row: whether it ran near memory capacity, by its count's full-model peak
    (advisor.topology.memory.MeasuredPeak) above MEMORY_NEAR of the GPU's memory (the spec's or the
    catalog's), or by its source's own flag (`flagged`: the (gpus, nodes, global batch) of runs marked
    `memory_bound`, advisor.measurements). Such a row runs slower than its count would with memory to
    spare: its efficiency is a lower bound, not the level of the counts where sharding frees memory
    (issue 21: a series whose only small row ran memory-bound was projected at that rate to every
    scale, -34%). The spec's footprint estimate alone flags nothing: on the corpus it puts rows that ran
    at 97-656% of their GPU's memory (mpt-13b-a100-roce 8 GPUs: 6.6x; gpt3-5b-nemo 1.4x), so only its
    change between counts is read (features.MemoryPressure)."""
    from advisor.topology.memory import gpu_memory_bytes

    out = np.zeros(data.gpus.shape, bool)
    if data.empty:
        return out
    if flagged:
        keys = np.column_stack([data.gpus, data.nodes, data.batch])
        out |= (keys[:, None, :] == np.asarray(flagged, float)[None, :, :]).all(axis=2).any(axis=1)
    capacity = gpu_memory_bytes(w)
    if peaks and capacity:
        near = sorted({p.gpus for p in peaks if p.peak_bytes > MEMORY_NEAR * capacity})
        out |= np.isin(data.gpus, near)
    return out


def memory_pressure(data: "FitData", pressed: np.ndarray, peaks, w, measured, flagged=()) -> "MemoryPressure | None":
    """The rule that says which placements run near capacity (advisor.scaling.features.MemoryPressure),
    from the grouped rows' flags (`memory_pressed`), the measured peaks and the workload `w` whose
    footprint is estimated (`measured`: the layout the rows ran); None when no row is pressed (the fit
    is then what it was before memory pressure was modelled, bit for bit) or the GPU's memory is unknown."""
    from advisor.scaling.features import MemoryPressure
    from advisor.topology.memory import MeasuredPeak, gpu_memory_bytes

    capacity = gpu_memory_bytes(w)
    if not pressed.any() or not capacity:
        return None
    has_peak = {p.gpus for p in peaks}
    implied = tuple(MeasuredPeak(int(g), capacity, None, "a row its source flags as memory-bound")
                    for g in np.unique(data.gpus[pressed]) if int(g) not in has_peak)
    return MemoryPressure(placements=np.column_stack([data.gpus, data.nodes, data.batch]), flags=pressed.copy(),
                          peaks=tuple(peaks) + implied, measured=measured, capacity=float(capacity), near=MEMORY_NEAR,
                          severity=pressure_severity(data, pressed, peaks, capacity, flagged))


def pressure_severity(data: "FitData", pressed: np.ndarray, peaks, capacity: float, flagged=()) -> float:
    """How sure the flags are that memory slowed the pressed rows, 0..1 (the share of its full spread the
    memory-pressure prior gets, advisor.scaling.features.pressure_prior_sd): 1 for a row its source flags
    as memory-bound; for a peak, the square of its height above MEMORY_NEAR as a share of the rest of the
    memory, ((peak / capacity - MEMORY_NEAR) / (1 - MEMORY_NEAR))^2: the expected stall is the chance that
    an allocation finds no free block times what the flush and retry cost, and both grow from nothing at
    the threshold to certain and whole at capacity (a judgement; no source measures either). A peak that
    crosses the threshold then moves the fit continuously: torchtitan's Llama 3.1 8B at 92% of 96 GB
    weighs 0.05 (its 8-GPU row was not slowed: the faster per GPU of the published two), 95% 0.25. The
    most sure pressed row decides."""
    keys = np.column_stack([data.gpus, data.nodes, data.batch])
    if flagged and (keys[pressed][:, None, :] == np.asarray(flagged, float)[None, :, :]).all(axis=2).any():
        return 1.0
    at = set(np.unique(data.gpus[pressed]).tolist())
    shares = [(p.peak_bytes / capacity - MEMORY_NEAR) / (1 - MEMORY_NEAR) for p in peaks if p.gpus in at]
    return float(np.clip(max(shares, default=1.0), 0.0, 1.0) ** 2)


def memory_warnings(data: "FitData", pressed: np.ndarray, modelled: bool) -> list[str]:
    """Say which counts ran near memory capacity and what the fit did with them (`modelled`: the
    memory-pressure column explains their extra time, advisor.scaling.model.fit_record)."""
    if not pressed.any():
        return []
    counts = ", ".join(f"N={int(g)}" for g in np.unique(data.gpus[pressed]))
    near = f"near memory capacity (peak > {MEMORY_NEAR:.0%}, or marked memory-bound)"
    if not pressed.all():
        return [f"{counts} ran {near}, where the allocator frees and retries: read as a lower bound on efficiency, "
                "the fit's memory-pressure term takes the extra time, and only counts whose estimated memory stays "
                "near capacity carry it (their level and per-GPU ceiling included)"]
    if modelled:
        return [f"every measured count ({counts}) ran {near}: the memory-pressure term and compute share their "
                "time by their priors, so where sharding frees memory MFU comes partly from the prior; measure a "
                "count with memory to spare"]
    return [f"every measured count ({counts}) ran with peak memory near capacity (> {MEMORY_NEAR:.0%}): the "
            "fitted MFU is a lower bound, and counts whose sharding frees memory may run faster than predicted; "
            "measure a count with memory to spare"]
