"""90% prediction intervals: bootstrap for the fit, out-of-sample residuals for the noise.

Two independent sources of error, combined in log space (errors are multiplicative):
- parameter uncertainty: refit on bootstrap resamples, stratified by placement: runs resampled
  within each (gpus, nodes) group, steps resampled within each run (a calibration run's timed
  steps; a CSV row is one run of one step), so no count ever drops out of a resample;
- noise and model error: log(measured/predicted) of held-out runs in leave-one-count-out CV
  (empirical quantiles with >= 20 residuals, else a Student-t with their spread), scaled by
  1 + κ·log2(distance past the data), distance = max(N / largest count, nodes / largest node count).

Half-widths add in quadrature (independent errors). Coverage is measured, not assumed:
benchmarks/accuracy.py reports how often held-out Pollux measurements fall inside.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.measurements import Measurements
from advisor.model.fitting import FitData, FittedFamily, fit_family

LEVEL = 0.90
MIN_EMPIRICAL = 20


def resample(m: Measurements, rng: np.random.Generator) -> FitData:
    """One stratified bootstrap resample of runs and steps, as run medians."""
    runs = m.runs
    keys = [(r.gpus, r.nodes) for r in runs]
    order = {}
    for i, k in enumerate(keys):
        order.setdefault(k, []).append(i)
    picked = []
    for idx in order.values():
        picked.extend(rng.choice(idx, size=len(idx), replace=True) if len(idx) > 1 else idx)
    gpus, nodes, batch, step, comm = [], [], [], [], []
    for i in picked:
        r = runs[i]
        j = rng.integers(0, len(r.step_seconds), len(r.step_seconds)) if len(r.step_seconds) > 1 else np.array([0])
        gpus.append(r.gpus)
        nodes.append(r.nodes)
        batch.append(r.global_batch)
        step.append(np.median(r.step_seconds[j]))
        comm.append(np.median(r.comm_seconds[j]) if r.comm_seconds is not None else np.nan)
    return FitData(np.array(gpus, float), np.array(nodes, float), np.array(batch, float), np.array(step), np.array(comm))


@dataclass(frozen=True)
class Bootstrap:
    coefs: np.ndarray  # (B, p)
    gammas: np.ndarray  # (B,)


def bootstrap(base: FittedFamily, m: Measurements, probes: list, n: int, seed: int) -> Bootstrap:
    rng = np.random.default_rng(seed)
    init = (base.estimator.coef_, base.estimator.gamma_)
    coefs, gammas = [], []
    for _ in range(n):
        f = fit_family(base.family, base.workload, resample(m, rng), probes, base.coverage, init)
        coefs.append(f.estimator.coef_)
        gammas.append(f.estimator.gamma_)
    return Bootstrap(np.array(coefs, float).reshape(n, len(init[0])), np.array(gammas, float))


@dataclass(frozen=True)
class NoiseModel:
    """Lower and upper log-residual quantiles at LEVEL, and widening κ per doubling past the data."""

    lower: float
    upper: float
    kappa: float
    kappa_measured: bool
    n_residuals: int

    @classmethod
    def from_residuals(cls, r: np.ndarray, kappa: float, kappa_measured: bool) -> "NoiseModel":
        tail = (1 - LEVEL) / 2
        if r.size >= MIN_EMPIRICAL:
            lo, hi = np.quantile(r, [tail, 1 - tail])
        elif r.size >= 2:
            from scipy.stats import t

            q = t.ppf(1 - tail, df=r.size - 1) * float(np.std(r, ddof=1)) * np.sqrt(1 + 1 / r.size)
            lo, hi = float(np.mean(r)) - q, float(np.mean(r)) + q
        else:
            lo = hi = 0.0
        return cls(float(min(lo, 0.0)), float(max(hi, 0.0)), float(kappa), kappa_measured, int(r.size))


def interval(median: np.ndarray, draws: np.ndarray, noise: NoiseModel, distance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) around `median` from bootstrap `draws` (rows x B) and the noise model."""
    tail = (1 - LEVEL) / 2
    if draws.shape[1] >= 2:
        logs = np.log(np.maximum(draws, 1e-300) / np.maximum(median, 1e-300)[:, None])
        q_lo, q_hi = np.quantile(logs, [tail, 1 - tail], axis=1)
    else:
        q_lo = q_hi = np.zeros_like(median)
    scale = 1.0 + noise.kappa * np.log2(np.maximum(distance, 1.0))
    down = np.sqrt(np.minimum(q_lo, 0.0) ** 2 + (noise.lower * scale) ** 2)
    up = np.sqrt(np.maximum(q_hi, 0.0) ** 2 + (noise.upper * scale) ** 2)
    return median * np.exp(-down), median * np.exp(up)
