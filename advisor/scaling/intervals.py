"""90% prediction intervals: the posterior of the coefficients, plus noise and model error.

Two independent sources of error, combined in log space (errors are multiplicative):
- parameter uncertainty: draws from the Laplace posterior of the MAP fit (`OverlapModel.cov_`;
  log-normal for the coefficients with a log prior, so a factor on a declared speed never turns
  negative), clipped to the physical bounds, evaluated at every row (`draw_spread`). With no
  measurement it is the prior's spread (MFU, achieved bandwidth, overlap); each measured count
  narrows it. No refit is needed (the bootstrap it replaces ran 40 least-squares solves per fit);
- noise and model error: log(measured/predicted) of held-out runs in leave-one-count-out CV
  (empirical quantiles with >= 20 residuals, else a Student-t whose spread pools them with the
  prior's run-to-run noise, conjugate pooling of variances), and a model error that grows by
  `priors.widening` (log sigma) per doubling of the distance past the data, distance =
  max(N / largest count, nodes / largest node count).

Half-widths add in quadrature (independent errors). Coverage is measured leave-one-series-out on
the corpus, per extrapolation distance (benchmarks/accuracy.py, docs/validation.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVEL = 0.90
MIN_EMPIRICAL = 20
#: z of the two-sided LEVEL interval (scipy.stats.norm.ppf(0.95)).
Z = 1.6448536269514722

#: Weight (in pseudo-residuals) of the prior run-to-run noise when pooling a few residuals.
PRIOR_WEIGHT = 5


@dataclass(frozen=True)
class Draws:
    coefs: np.ndarray  # (B, p)
    gammas: np.ndarray  # (B,)


def posterior_draws(est, n: int, seed: int) -> Draws:
    """`n` coefficient vectors from the estimator's Laplace posterior (log-normal where the prior is)."""
    p = est.coef_.size
    if n < 2 or est.free_.size == 0:
        return Draws(np.tile(est.coef_, (max(n, 0), 1)), np.full(max(n, 0), est.gamma_))
    k = est.cov_.shape[0]
    v = np.append(est.coef_[est.free_], [est.gamma_] if k > est.free_.size else [])
    logs = est.log_params_
    d = np.where(logs, 1.0 / np.maximum(v, 1e-300), 1.0)
    cov = est.cov_ * d[:, None] * d[None, :]
    vals, vecs = np.linalg.eigh((cov + cov.T) / 2)
    root = vecs * np.sqrt(np.maximum(vals, 0.0))
    u = np.where(logs, np.log(np.maximum(v, 1e-300)), v)
    z = np.random.default_rng(seed).standard_normal((n, k))
    draws = u[None, :] + z @ root.T
    draws = np.where(logs[None, :], np.exp(np.minimum(draws, 700)), draws)
    lo, hi = est.bounds_
    draws = np.clip(draws, lo, hi)
    coefs = np.tile(est.coef_, (n, 1))
    coefs[:, est.free_] = draws[:, : est.free_.size]
    gammas = draws[:, -1] if k > est.free_.size else np.full(n, est.gamma_)
    return Draws(coefs, gammas)


@dataclass(frozen=True)
class NoiseModel:
    """Lower and upper log-residual quantiles at LEVEL, and model-error growth per doubling past the data."""

    lower: float
    upper: float
    widening: float
    n_residuals: int
    prior_noise: float = 0.05

    @classmethod
    def from_residuals(cls, r: np.ndarray, widening: float, prior_noise: float) -> "NoiseModel":
        tail = (1 - LEVEL) / 2
        if r.size >= MIN_EMPIRICAL:
            lo, hi = np.quantile(r, [tail, 1 - tail])
        else:
            from scipy.special import stdtrit  # Student-t quantile (scipy.stats costs ~0.6 s to import)

            pooled = np.sqrt((float(np.sum(r**2)) + PRIOR_WEIGHT * prior_noise**2) / (r.size + PRIOR_WEIGHT))
            q = float(stdtrit(r.size + PRIOR_WEIGHT - 1, 1 - tail)) * pooled
            lo, hi = -q, q
        return cls(float(min(lo, 0.0)), float(max(hi, 0.0)), float(widening), int(r.size), float(prior_noise))

    @property
    def prior_dominated(self) -> bool:
        return self.n_residuals < PRIOR_WEIGHT


def draw_spread(X: np.ndarray, n_compute: int, draws: Draws) -> np.ndarray:
    """Log half-width at LEVEL of the step time over the posterior draws, per row.

    Every draw is evaluated at every row, vectorised as two matrix products (rows x p by p x B)
    and one elementwise overlap: a 65,536-count sweep with B = 64 costs tens of milliseconds.
    Log-normal summary (z x standard deviation of log T over draws): a per-row sort for empirical
    quantiles doubled the cost of a sweep.
    """
    if len(draws.coefs) < 2:
        return np.zeros(len(X))
    from advisor.scaling.estimator import combine

    nc = n_compute
    tc = X[:, :nc] @ draws.coefs[:, :nc].T
    if nc < X.shape[1]:
        t = combine(tc, X[:, nc:] @ draws.coefs[:, nc:].T, draws.gammas[None, :])
    else:
        t = np.maximum(tc, 0.0)
    return Z * np.log(np.maximum(t, 1e-300)).std(axis=1)


def delta_spread(X: np.ndarray, est) -> np.ndarray:
    """Log half-width at LEVEL of the step time from the posterior covariance, linearised per row.

    sd(ln T) = sqrt(g Σ gᵀ), g = d ln T / d(parameter) with the log-prior parameters taken in log
    space (where their posterior is close to Gaussian). Costs one gradient per row: a 65,536-count
    sweep takes milliseconds, where evaluating every posterior draw at every row took ~0.3 s. (Without
    priors this linearisation once gave absurd spreads, 0.003-134 s around 0.6 s, along directions the
    data could not identify; the priors bound every direction now.) `draw_spread` is the sampled check.
    """
    from advisor.scaling.estimator import gradient

    k = est.cov_.shape[0]
    if k == 0 or len(X) == 0:
        return np.zeros(len(X))
    d_coef, d_g = gradient(X, est.coef_, est.gamma_, est._split(X.shape[1]))
    t = np.maximum(est._predict_with(X, est.coef_, est.gamma_), 1e-300)
    G = d_coef[:, est.free_]
    if k > est.free_.size:
        G = np.column_stack([G, d_g])
    v = np.append(est.coef_[est.free_], [est.gamma_] if k > est.free_.size else [])
    G = G * np.where(est.log_params_, v, 1.0)[None, :] / t[:, None]
    d = np.where(est.log_params_, 1.0 / np.maximum(v, 1e-300), 1.0)
    cov = est.cov_ * d[:, None] * d[None, :]
    return Z * np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", G, cov, G), 0.0))


def interval(median: np.ndarray, spread: np.ndarray, noise: NoiseModel, distance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) around `median`: the draws' spread, noise and model error past the data, in quadrature."""
    model = Z * noise.widening * np.log2(np.maximum(distance, 1.0))
    down = np.sqrt(spread**2 + noise.lower**2 + model**2)
    up = np.sqrt(spread**2 + noise.upper**2 + model**2)
    return median * np.exp(-down), median * np.exp(up)
