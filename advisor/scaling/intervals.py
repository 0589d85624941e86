"""90% prediction intervals: bootstrap for the fit, out-of-sample residuals for the noise.

Two independent sources of error, combined in log space (errors are multiplicative):
- parameter uncertainty: refit on bootstrap resamples, stratified by placement: runs resampled
  within each (gpus, nodes) group, steps resampled within each run (a calibration run's timed
  steps; a CSV row is one run of one step), so no count ever drops out of a resample;
- noise and model error: log(measured/predicted) of held-out runs in leave-one-count-out CV
  (empirical quantiles with >= 20 residuals, else a Student-t whose spread pools them with an
  assumed 5% prior noise, PRIOR_NOISE), scaled by
  1 + κ·log2(distance past the data), distance = max(N / largest count, nodes / largest node count).

- structure: families whose cross-validation error is within ALTERNATIVE_MARGIN of the chosen
  one's fit the measured range equally well; where they disagree (typically past the data: tree
  vs ring hops across nodes) the disagreement is added to the interval.

The fit's spread is the 5-95% range of the bootstrap refits evaluated at each row
(`bootstrap_spread`, vectorised so sweeps over 65,536 counts stay fast). Half-widths add in
quadrature (independent errors). Coverage is measured, not assumed:
benchmarks/accuracy.py reports how often held-out Pollux measurements fall inside.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.measurements import Measurements
from advisor.scaling.fitting import FitData, FittedFamily, fit_family

LEVEL = 0.90
MIN_EMPIRICAL = 20

#: Prior run-to-run noise (one sigma of log step time) and its weight in pseudo-residuals. With
#: a handful of residuals their spread is shrunk towards this (conjugate pooling of variances),
#: so two published points never yield a zero-width interval. An assumption between the
#: spread of repeated published measurements (NVIDIA's BERT 8-GPU rows, 1.2% apart) and the
#: run-to-run noise of a shared cloud cluster (Pollux traces, ~10% in range); the fit output
#: says when it dominates.
PRIOR_NOISE = 0.05
PRIOR_WEIGHT = 5

#: Families whose CV error is within this factor of the best are "indistinguishable" (intervals).
ALTERNATIVE_MARGIN = 1.1

class Resampler:
    """Stratified bootstrap resamples of runs and steps, as run medians (vectorised)."""

    def __init__(self, m: Measurements):
        runs = m.runs
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(runs):
            groups.setdefault((r.gpus, r.nodes), []).append(i)
        self.strata = [np.array(v) for v in groups.values()]
        self.lengths = np.array([len(r.step_seconds) for r in runs])
        width = int(self.lengths.max())
        self.steps = np.full((len(runs), width), np.nan)
        self.comm = np.full((len(runs), width), np.nan)
        for i, r in enumerate(runs):
            self.steps[i, :len(r.step_seconds)] = r.step_seconds
            if r.comm_seconds is not None:
                self.comm[i, :len(r.comm_seconds)] = r.comm_seconds
        self.gpus, self.nodes, self.batch = m.gpus, m.nodes, m.global_batch

    def draw(self, rng: np.random.Generator) -> FitData:
        picked = np.concatenate([rng.choice(idx, size=idx.size, replace=True) if idx.size > 1 else idx
                                 for idx in self.strata])
        width = self.steps.shape[1]
        if width == 1:
            step, comm = self.steps[picked, 0], self.comm[picked, 0]
        else:
            n = self.lengths[picked][:, None]
            cols = np.minimum((rng.random((picked.size, width)) * n).astype(int), n - 1)
            valid = np.arange(width)[None, :] < n
            rows = picked[:, None]
            step = np.nanmedian(np.where(valid, self.steps[rows, cols], np.nan), axis=1)
            with np.errstate(all="ignore"):
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: no comm measured
                    comm = np.nanmedian(np.where(valid, self.comm[rows, cols], np.nan), axis=1)
        return FitData(self.gpus[picked], self.nodes[picked], self.batch[picked], step, comm)


@dataclass(frozen=True)
class Bootstrap:
    coefs: np.ndarray  # (B, p)
    gammas: np.ndarray  # (B,)


def bootstrap(base: FittedFamily, m: Measurements, probes: list, n: int, seed: int) -> Bootstrap:
    rng = np.random.default_rng(seed)
    init = (base.estimator.coef_, base.estimator.gamma_)
    resampler = Resampler(m) if n else None
    coefs, gammas = [], []
    for _ in range(n):
        f = fit_family(base.family, base.workload, resampler.draw(rng), probes, base.coverage, init)
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
        else:
            from scipy.stats import t

            pooled = np.sqrt((float(np.sum(r**2)) + PRIOR_WEIGHT * PRIOR_NOISE**2) / (r.size + PRIOR_WEIGHT))
            q = t.ppf(1 - tail, df=r.size + PRIOR_WEIGHT - 1) * pooled
            lo, hi = -q, q
        return cls(float(min(lo, 0.0)), float(max(hi, 0.0)), float(kappa), kappa_measured, int(r.size))

    @property
    def prior_dominated(self) -> bool:
        return self.n_residuals < PRIOR_WEIGHT

def bootstrap_spread(X: np.ndarray, n_compute: int, median: np.ndarray, boot: Bootstrap) -> tuple[np.ndarray, np.ndarray]:
    """(down, up): log half-widths of the bootstrap refits' 90% range of step time, per row.

    Every bootstrap refit is evaluated at every row, vectorised as two matrix products (rows x p
    by p x B) and one elementwise overlap: a 65,536-count sweep with B = 40 costs tens of
    milliseconds. (A delta-method linearisation was tried first and dropped: with few counts the
    coefficients swing along directions the data cannot identify, bounded at zero, and the
    linearised spread became absurd, e.g. 0.003-134 s around a 0.6 s step.)
    """
    if len(boot.coefs) < 2:
        zero = np.zeros_like(median)
        return zero, zero
    from advisor.scaling.estimator import combine

    nc = n_compute
    tc = X[:, :nc] @ boot.coefs[:, :nc].T
    if nc < X.shape[1]:
        t = combine(tc, X[:, nc:] @ boot.coefs[:, nc:].T, boot.gammas[None, :])
    else:
        t = np.maximum(tc, 0.0)
    # Log-normal summary (z x standard deviation of log T over refits): a per-row sort for
    # empirical quantiles doubled the cost of a 65,536-count sweep.
    from scipy.stats import norm

    z = norm.ppf(1 - (1 - LEVEL) / 2)
    half = z * np.log(np.maximum(t, 1e-300)).std(axis=1)
    return half, half


def interval(median: np.ndarray, spread, noise: NoiseModel, distance: np.ndarray,
             alternatives: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) around `median`, in quadrature: the fit's spread (`(down, up)` log half-widths at
    LEVEL from `bootstrap_spread`, or one array for both sides), noise, and the disagreement of
    `alternatives` (step times of families cross-validation could not tell apart)."""
    down, up = spread if isinstance(spread, tuple) else (spread, spread)
    scale = 1.0 + noise.kappa * np.log2(np.maximum(distance, 1.0))
    down2 = down**2 + (noise.lower * scale) ** 2
    up2 = up**2 + (noise.upper * scale) ** 2
    for alt in alternatives:
        d = np.log(np.maximum(alt, 1e-300) / np.maximum(median, 1e-300))
        down2 = down2 + np.minimum(d, 0.0) ** 2
        up2 = up2 + np.maximum(d, 0.0) ** 2
    return median * np.exp(-np.sqrt(down2)), median * np.exp(np.sqrt(up2))
