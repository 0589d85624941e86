"""Fit one model family to one problem: the workload, its measured runs grouped by placement, its
probes, what they span and the priors; then the estimator, with the bounds and priors of each column.

`Problem` is the one object the fitting, selection and interval functions take (instead of the
same workload, data, probes and coverage threaded through each). `constraints` holds, by column
name, the physics the estimator must respect: 1/MFU >= 1 when the peak is known (MFU <= 100%), a
link no faster than declared beyond `priors.LINK_TOLERANCE`, and the Gaussian priors of
`advisor.scaling.priors`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from advisor.measurements import measured_workload
from advisor.scaling import features as F
from advisor.scaling.estimator import OverlapModel
from advisor.scaling.families import Coverage, Design, Family
from advisor.scaling.priors import LEARNED, LINK_TOLERANCE, MAX_MFU, Priors

if TYPE_CHECKING:
    from advisor.measurements import Measurements
    from advisor.spec import Workload

#: Columns that are per-step constants in seconds: prior N(0, step_share_sd x shortest step / reach).
STEP_CONSTANTS = ("overhead", "contention_step", "sync", "intra_sync", "inter_sync")
#: Relative noise of one grouped step time in the MAP fit: the data's weight against the priors. A
#: judgement between NVIDIA's repeated 8-GPU BERT readings (1.2% apart) and the Pollux cloud's ~10%
#: scatter; learning it from in-sample residuals (2% across the corpus) made one-count fits chase a
#: 4% dip between two single readings into a 10% miss at 16x. The intervals use the data's own
#: noise instead (in-sample residuals pooled with priors.noise).
FIT_NOISE = 0.05
#: Prior mean (and sd) of the small-batch column as a share of the compute coefficient: half of the
#: roofline's penalty (advisor.scaling.small_batch: bytes and FLOPs not overlapped is the most it can
#: be, fully overlapped the least, 0), a judgement between the two bounds.
SMALL_BATCH_SHARE = 0.5
#: Latency coefficients: a positive floor (a log prior needs one) far below any real link.
LATENCY_FLOOR = 1e-3


@dataclass(frozen=True, kw_only=True)
class FitData:
    """Per-placement arrays the model fits: median step and exposed communication of the runs at
    each (gpus, nodes, global batch), and how many runs each group holds."""

    gpus: np.ndarray
    nodes: np.ndarray
    batch: np.ndarray
    step: np.ndarray
    comm: np.ndarray
    count: np.ndarray

    @classmethod
    def of(cls, m: "Measurements" | None) -> "FitData":
        if m is None or not m.runs:
            e = np.zeros(0)
            return cls(gpus=e, nodes=e, batch=e, step=e, comm=e, count=e)
        return cls.grouped(m.gpus, m.nodes, m.global_batch, m.step, m.comm)

    @classmethod
    def grouped(cls, gpus, nodes, batch, step, comm) -> "FitData":
        """One row per placement and batch (runs sorted and split once: a 100k-row CSV in milliseconds)."""
        keys = np.column_stack([gpus, nodes, batch])
        uniq, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
        inverse = inverse.ravel()
        if uniq.shape[0] == len(gpus):
            order = np.argsort(inverse)
            return cls(gpus=uniq[:, 0], nodes=uniq[:, 1], batch=uniq[:, 2], step=np.asarray(step, float)[order],
                       comm=np.asarray(comm, float)[order], count=counts.astype(float))
        med_step = _group_median(inverse, np.asarray(step, float), uniq.shape[0])
        med_comm = _group_median(inverse, np.asarray(comm, float), uniq.shape[0])
        return cls(gpus=uniq[:, 0], nodes=uniq[:, 1], batch=uniq[:, 2], step=med_step, comm=med_comm,
                   count=counts.astype(float))

    def take(self, keep: np.ndarray) -> "FitData":
        return FitData(gpus=self.gpus[keep], nodes=self.nodes[keep], batch=self.batch[keep], step=self.step[keep],
                       comm=self.comm[keep], count=self.count[keep])

    @property
    def empty(self) -> bool:
        return self.gpus.size == 0


def _group_median(inverse: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Median of `values` per group (NaN where a group has no finite value), vectorised by sorting."""
    ok = np.isfinite(values)
    out = np.full(n_groups, np.nan)
    if not ok.any():
        return out
    g, v = inverse[ok], values[ok]
    order = np.lexsort((v, g))
    g, v = g[order], v[order]
    starts = np.searchsorted(g, np.arange(n_groups), side="left")
    ends = np.searchsorted(g, np.arange(n_groups), side="right")
    has = ends > starts
    lo = v[np.minimum((starts + ends - 1) // 2, len(v) - 1)]
    hi = v[np.minimum((starts + ends) // 2, len(v) - 1)]
    out[has] = ((lo + hi) / 2)[has]
    return out


#: Nothing measured: no run and no probe crossed nodes.
NO_COVERAGE = Coverage(False, False)


def coverage_of(m: "Measurements" | None) -> Coverage:
    if m is None:
        return NO_COVERAGE
    return Coverage(steps_crossed_nodes=bool((m.nodes > 1).any()),
                    probes_crossed_nodes=any(p.nodes > 1 for p in m.probes))


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One fitting problem: workload, grouped runs, probes, what they span, and the priors."""

    workload: "Workload"
    data: FitData
    probes: tuple = ()
    coverage: Coverage = NO_COVERAGE
    priors: Priors = LEARNED
    #: the workload as the runs were measured: the spec with the parallel layout the calibration
    #: recorded (`advisor.measurements.measured_workload`); the data rows are designed with it,
    #: predictions with `workload`
    measured: "Workload" | None = None

    @classmethod
    def of(cls, workload: "Workload", m: "Measurements" | None, priors: Priors = LEARNED) -> "Problem":
        return cls(workload=workload, data=FitData.of(m), probes=tuple(m.probes) if m is not None else (),
                   coverage=coverage_of(m), priors=priors, measured=measured_workload(workload, m))

    @property
    def data_workload(self) -> "Workload":
        return self.measured if self.measured is not None else self.workload

    def take(self, keep: np.ndarray) -> "Problem":
        """The same problem on a subset of the rows (coverage kept: the columns stay the same)."""
        return replace(self, data=self.data.take(keep))

    @property
    def t_ref(self) -> float:
        """Shortest measured micro-batch (step / gradient-accumulation steps): the scale the per-step
        constants' prior is held to. A step of 16 accumulated micro-batches says nothing about a
        per-step constant that is small against one micro-batch, and at 16x the count that step is
        one micro-batch long (BERT at 65,536 per step: a prior tied to the measured step let a
        0.14 s constant into a 0.47 s step at 256 GPUs). Before any measurement, the prior's compute
        time of one micro-batch on a full node."""
        w = self.workload
        micro = float(w.batch.micro_samples) if w.batch.micro_samples else None
        if not self.data.empty:
            steps = np.ones_like(self.data.step) if micro is None else np.maximum(
                np.ceil(self.data.batch / self.data.gpus / micro), 1.0)
            return float(np.min(self.data.step / steps))
        g = np.array([float(w.cluster.gpus_per_node)])
        batch = np.asarray(w.global_batch(g), float)
        steps = 1.0 if micro is None else max(float(np.ceil(batch[0] / g[0] / micro)), 1.0)
        return float(F.compute_seconds(w, g, batch)[0] * np.exp(self.priors.log_inv_mfu) / steps)

    def compute_scale(self, prior_value: float) -> float:
        """The compute coefficient as the runs at the smallest measured count put it (step over compute
        at peak, at least `prior_value`'s floor of 1 when the peak is known), else `prior_value`: the
        scale of the contention prior, which is a share of compute (EfficientNet-B4 on V100 runs at 4%
        MFU, a coefficient of 25, where the prior's median is 2.4)."""
        d = self.data
        if d.empty:
            return prior_value
        base = d.gpus == d.gpus.min()
        secs = F.compute_seconds(self.data_workload, d.gpus[base], d.batch[base])
        return float(max(np.median(d.step[base] / secs), 1.0 if self.workload.peak_flops else 0.0))

    def design(self, family: Family, gpus, nodes, batch) -> Design:
        return family.design(self.workload, gpus, nodes, batch, self.coverage)

    def data_design(self, family: Family, gpus, nodes, batch) -> Design:
        """The design of measured rows: in the layout they ran (`measured`), whatever the spec now says."""
        return family.design(self.data_workload, gpus, nodes, batch, self.coverage)


def constraints(problem: Problem, d: Design) -> tuple[tuple, tuple]:
    """(lower bounds, priors) of the estimator for design `d`, by column name (module docstring)."""
    pr, w = problem.priors, problem.workload
    peak_known = bool(w.peak_flops)
    reach = {"contention_step": max(w.cluster.gpus_per_node - 1, 1)}
    lower, prior = [], []
    inv_mfu = np.exp(pr.log_inv_mfu) if peak_known else np.exp(pr.log_inv_mfu) * F.NOMINAL_FLOPS / 1e13
    for j, col in enumerate(d.columns):
        name = col.name
        if name == "compute":
            if peak_known:
                lower.append((j, 1.0 / MAX_MFU))
                prior.append((j, "log", pr.log_inv_mfu, pr.log_inv_mfu_sd))
            else:  # seconds per TFLOP: centred on a 10 TFLOP/s device, very wide
                lower.append((j, 1e-6))
                prior.append((j, "log", float(np.log(inv_mfu)), 2.0))
        elif name == "contention":  # a share of the compute coefficient, as the smallest count measures it
            prior.append((j, "lin", 0.0, pr.contention_sd * problem.compute_scale(inv_mfu)))
        elif name == "small_batch":  # half the roofline's penalty, in units of the measured compute coefficient
            scale = problem.compute_scale(inv_mfu)
            prior.append((j, "lin", SMALL_BATCH_SHARE * scale, SMALL_BATCH_SHARE * scale))
        elif name in STEP_CONSTANTS:
            prior.append((j, "lin", 0.0, pr.step_share_sd * problem.t_ref / reach.get(name, 1)))
        elif name in ("intra_bandwidth", "inter_bandwidth"):
            lower.append((j, 1.0 / (1.0 + LINK_TOLERANCE)))
            key = "intra" if name.startswith("intra") else "inter"
            prior.append((j, "log", getattr(pr, f"log_{key}_bw"), getattr(pr, f"log_{key}_bw_sd")))
        elif name.endswith("_latency"):
            lower.append((j, LATENCY_FLOOR))
            prior.append((j, "log", 0.0, pr.log_latency_sd))
    if problem.coverage.pressure is not None and F.PRESSURE_COLUMN in (names := [c.name for c in d.columns]):
        j = names.index(F.PRESSURE_COLUMN)  # >= 0 (the default bound), as uncertain as the rest of a pressed step
        prior.append((j, "lin", 0.0, F.pressure_prior_sd(d, j, prior, problem.coverage.pressure.severity)))
    if d.n_compute < len(d.columns):
        prior.append(("gamma", "lin", pr.gamma, pr.gamma_sd))
    return tuple(lower), tuple(prior)


@dataclass
class FittedFamily:
    """One family fitted: predicts step seconds at any placement and batch."""

    family: Family
    problem: Problem
    estimator: OverlapModel
    columns: tuple

    @property
    def workload(self) -> "Workload":
        return self.problem.workload

    def design(self, gpus, nodes, batch) -> Design:
        return self.problem.design(self.family, gpus, nodes, batch)

    def predict(self, gpus, nodes, batch) -> np.ndarray:
        return self.estimator.predict(self.design(gpus, nodes, batch).X)

    def predict_measured(self, gpus, nodes, batch) -> np.ndarray:
        """Step seconds of rows in the layout they were measured with (in-sample and held-out checks)."""
        return self.estimator.predict(self.problem.data_design(self.family, gpus, nodes, batch).X)


def in_job_units(fitted: FittedFamily, data: FitData) -> FitData:
    """The measured rows as steps of the declared model: where the runs timed another model (advisor
    calibrate's proxy of fewer layers, `Problem.measured`), each step scaled by the fitted model's ratio
    of the declared model's step to the measured model's at its placement; else `data` itself. What
    compares measured throughput with the declared model's (the naive linear guess, the ceiling on
    per-GPU throughput) reads these: a 1-layer proxy of an 80-layer model runs ~40x the samples per
    second. A run under another layout of the same model stays as measured: that is its throughput."""
    if data.empty:
        return data
    return replace(data, step=data.step * job_units_ratio(fitted, data.gpus, data.nodes, data.batch))


def job_units_ratio(fitted: FittedFamily, gpus, nodes, batch) -> np.ndarray:
    """Per placement, the declared model's step over the measured model's (advisor calibrate's proxy of
    fewer layers, `Problem.measured`), by the fitted model: 1 where the runs timed the declared model."""
    p = fitted.problem
    if p.measured is None or p.measured.model == p.workload.model:
        return np.ones(np.shape(np.asarray(gpus, float)))
    return fitted.predict(gpus, nodes, batch) / fitted.predict_measured(gpus, nodes, batch)


def _estimator(problem: Problem, d: Design) -> OverlapModel:
    lower, prior = constraints(problem, d)
    return OverlapModel(n_compute=d.n_compute, fixed=d.fixed, lower=lower, prior=prior, noise=FIT_NOISE,
                        n_exposed=d.n_exposed, tied=d.tied)


def fit_family(family: Family, problem: Problem, init: tuple | None = None) -> FittedFamily:
    """Fit `family` to `problem` (MAP), optionally warm-started from `init` = (coef, gamma).
    With no measured runs the prior alone answers (`prior_only`). When something crossed nodes and
    one-node steps were measured (or no step at all), the fit goes in two stages (`fit_staged`)."""
    if staged(family, problem):
        return fit_staged(family, problem, init)
    fitted = _fit_joint(family, problem, init)
    d = problem.data
    return fitted if d.empty or (d.nodes > 1).any() else with_link_speeds(fitted)


def with_link_speeds(fitted: FittedFamily) -> FittedFamily:
    """`fitted` predicting crossing traffic at its own fitted link factors (`Coverage.link_speeds`,
    families.crossing_columns): for fits whose intra-node factor no crossing step pinned (one-node
    steps, a staged fit's first stage), where a measured intra link would otherwise count on one node
    only. Steps that do not cross nodes are unchanged."""
    names = [c.name for c in fitted.columns]
    if not fitted.family.has_overlap or "inter_bandwidth" not in names:
        return fitted
    coef = fitted.estimator.coef_
    speeds = (float(coef[names.index("intra_bandwidth")]), float(coef[names.index("inter_bandwidth")]))
    problem = fitted.problem
    return replace(fitted, problem=replace(problem, coverage=replace(problem.coverage, link_speeds=speeds)))


#: Columns only a step or probe across nodes reaches; every other column is fitted on one node.
INTER_COLUMNS = ("inter_sync", "inter_bandwidth", "inter_latency")


def staged(family: Family, problem: Problem) -> bool:
    """Fit in two stages (`fit_staged`): the family has link terms, a run or probe crossed nodes, and
    one-node steps were measured (or no step at all: probes alone)."""
    d = problem.data
    crossed = bool((d.nodes > 1).any()) or any(p.nodes > 1 for p in problem.probes)
    return family.has_overlap and crossed and (d.empty or bool((d.nodes == 1).any()))


def fit_staged(family: Family, problem: Problem, init: tuple | None = None) -> FittedFamily:
    """Declared links scale only the terms that use them: (1) every column but the inter-node ones
    (and γ) on the one-node runs and probes alone, (2) the inter-node columns on everything with the
    rest held at (1). A one-node step then depends on nothing declared or measured across nodes:
    re-declaring inter_node_bandwidth, whose prior is a share of the declaration, moved one-node
    steps by up to 2.6% in a joint fit. (A first stage on every row without the inter-node priors
    kept the multi-node rows' say on compute and overlap, but let the unregularised link terms
    trade against the intra-node ones: published series 4.4% instead of 3.9% leave-one-series-out.)
    The covariance joins both stages' curvature (cross terms between the stages are not kept)."""
    one = problem.data.nodes == 1
    first = _fit_joint(family, replace(problem, data=problem.data.take(one),
                                       probes=tuple(p for p in problem.probes if p.nodes == 1)), init)
    est1, cols = first.estimator, first.columns
    # The crossing traffic's bottleneck (families.crossing_columns) is chosen at the first stage's
    # intra factor and the inter factor's prior median, then once more at the fitted inter factor;
    # the rows are fitted and predicted with the same choice (the problem's link_speeds).
    fitted = FittedFamily(family, problem, est1, cols)
    for _ in range(2):
        at = with_link_speeds(fitted).problem
        fitted = FittedFamily(family, at, est1.joined(_second_stage(family, at, est1, cols)), cols)
    return fitted


def _second_stage(family: Family, problem: Problem, est1: OverlapModel, cols: tuple) -> OverlapModel:
    """The inter-node columns fitted on every row and probe, the rest held at the first stage's `est1`."""
    # memory pressure too: a pressed row across nodes is seen only here (features.pressure_column)
    inter = [j for j, c in enumerate(cols) if c.name in INTER_COLUMNS or c.name == F.PRESSURE_COLUMN]
    data = problem.data
    if data.empty:
        w = problem.workload
        g = np.array([1.0, float(w.cluster.gpus_per_node)])
        d = problem.design(family, g, np.ones(2), np.asarray(w.global_batch(g), float))
    else:
        d = problem.data_design(family, data.gpus, data.nodes, data.batch)
    lower, prior = constraints(problem, d)
    held = tuple((j, float(est1.coef_[j])) for j in range(len(cols)) if j not in inter)
    est2 = OverlapModel(n_compute=d.n_compute, fixed=held, lower=lower, prior=prior, noise=FIT_NOISE,
                        gamma_bounds=(est1.gamma_, est1.gamma_), n_exposed=d.n_exposed, tied=d.tied)
    probe_X, probe_y = family.probe_design(problem.workload, list(problem.probes), problem.coverage)
    if data.empty:
        est2.fit_probes(d.X.shape[1], probe_X, probe_y)
    else:
        est2.fit(d.X, data.step, comm=data.comm, probe_X=probe_X if len(probe_y) else None,
                 probe_y=probe_y if len(probe_y) else None)
    # (the full problem's Laplace covariance at the staged optimum instead of the joined one moved the
    # priors learned from the corpus: Pollux 12.8%, published 4.3% leave-one-series-out)
    return est2


def _fit_joint(family: Family, problem: Problem, init: tuple | None = None) -> FittedFamily:
    """One fit of every column on every row and probe."""
    data = problem.data
    probe_X, probe_y = family.probe_design(problem.workload, list(problem.probes), problem.coverage)
    if data.empty and not len(probe_y):
        return prior_only(family, problem)
    if data.empty:
        return probes_only(family, problem, probe_X, probe_y)
    d = problem.data_design(family, data.gpus, data.nodes, data.batch)
    est = _estimator(problem, d)
    est.fit(d.X, data.step, comm=data.comm if family.has_overlap else None,
            probe_X=probe_X if len(probe_y) else None, probe_y=probe_y if len(probe_y) else None, init=init)
    return FittedFamily(family, problem, est, d.columns)


def probes_only(family: Family, problem: Problem, probe_X: np.ndarray, probe_y: np.ndarray) -> FittedFamily:
    """No step measured, collective probes only (an imported nccl-tests log): the link and latency
    factors the probes reach are fitted to them (their priors as in any fit), every other column
    (compute, per-step constants, overlap) stays at its prior, whose spread the covariance keeps.
    Compute is never pinned by a collective, so the prior's MFU answers for it (docs/model.md)."""
    w = problem.workload
    g = np.array([1.0, float(w.cluster.gpus_per_node)])
    d = problem.design(family, g, np.ones(2), np.asarray(w.global_batch(g), float))
    est = _estimator(problem, d)
    est.fit_probes(d.X.shape[1], probe_X, probe_y)
    return FittedFamily(family, problem, est, d.columns)


def prior_only(family: Family, problem: Problem) -> FittedFamily:
    """The family at its prior: coefficients at the prior medians, covariance the prior's."""
    w = problem.workload
    g = np.array([1.0, float(w.cluster.gpus_per_node)])
    d = problem.design(family, g, np.ones(2), np.asarray(w.global_batch(g), float))
    est = _estimator(problem, d)
    est.set_prior_state(d.X.shape[1])
    return FittedFamily(family, problem, est, d.columns)


def naive_step(data: FitData, gpus, batch) -> np.ndarray:
    """Step seconds if per-GPU throughput stayed what it is at the largest measured count.

    The naive linear guess: a model that cannot beat it adds nothing. Per-GPU throughput is taken
    from the runs at the largest count with the same per-GPU batch where there are any (rows may
    differ in batch), else from all runs at that count (median). Each row's per-GPU batch and throughput
    are the ceiling's (advisor.scaling.ceiling.Ceiling.of), compared within its SAME_BATCH.
    """
    from advisor.scaling.ceiling import SAME_BATCH, Ceiling

    gpus, batch = np.asarray(gpus, float), np.asarray(batch, float)
    rows = Ceiling.of(data)
    top = rows.gpus == rows.gpus.max()
    per_gpu, local_top = rows.rate[top], rows.local[top]
    local = batch / gpus
    thr = np.full(local.shape, float(np.median(per_gpu)))
    for value in np.unique(local_top):
        match = np.isclose(local, value, rtol=SAME_BATCH)
        thr[match] = np.median(per_gpu[np.isclose(local_top, value, rtol=SAME_BATCH)])
    return batch / (thr * gpus)
