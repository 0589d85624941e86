"""90% prediction intervals: the posterior of the coefficients, plus noise and model error.

Two independent sources of error, combined in log space (errors are multiplicative):
- parameter uncertainty: the Laplace posterior of the MAP fit (`OverlapModel.cov_`; log-normal for
  the coefficients with a log prior, so a factor on a declared speed never turns negative), clipped
  to the physical bounds, walked along its principal axes at every row (`sigma_spread`). With no
  measurement it is the prior's spread (MFU, achieved bandwidth, overlap); each measured count
  narrows it. No refit is needed (the bootstrap it replaces ran 40 least-squares solves per fit);
- noise and model error: log(measured/predicted) of held-out runs in leave-one-count-out CV
  (empirical quantiles with >= 20 residuals, else a Student-t whose spread pools them and the
  in-sample residuals with the prior's run-to-run noise, conjugate pooling of variances), grown by
  `priors.widening` (relative, 0.5 = +50%) per doubling of the distance past the data, distance =
  max(N / largest count, nodes / largest node count); only the part above the in-sample scatter grows
  (`NoiseModel.floor_lower`/`floor_upper`: what a new run scatters at a measured count stays that wide
  at any distance; what grows is the model's error). The posterior's data weight is reset to the
  data's own noise (in-sample residuals pooled with the prior's), so a DGX table's 1% readings and
  a cloud trace's 10% scatter each get their own width.

Half-widths add in quadrature (independent errors). Coverage is measured leave-one-series-out on
the corpus, per extrapolation distance (benchmarks/accuracy.py, docs/validation.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.step_model import LEVEL, Z90

#: Fewest out-of-sample residuals whose empirical quantiles make the noise band (else a Student-t).
MIN_EMPIRICAL = 20

#: Weight (in pseudo-residuals) of the prior run-to-run noise when pooling a few residuals.
PRIOR_WEIGHT = 5

#: Relative run-to-run noise before any data (priors.DEFAULTS.noise); kept for callers that plan
#: calibrations (advisor.calibrate.design). A fitted model pools with its priors' `noise` instead.
PRIOR_NOISE = 0.05


@dataclass(frozen=True)
class Draws:
    coefs: np.ndarray  # (B, p)
    gammas: np.ndarray  # (B,)


def t_quantile(p: float, df: float) -> float:
    """Student-t quantile by the Cornish-Fisher expansion in 1/df (Abramowitz and Stegun 26.7.5), to
    1e-4 relative for df >= 4 at the 95% point: scipy.stats/special cost ~0.6 s to import."""
    z = Z90 if abs(p - 0.95) < 1e-12 else _normal_quantile(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return float(z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4)


def _normal_quantile(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def pooled_noise(r: np.ndarray, prior_noise: float) -> float:
    """Root mean square of log residuals `r` pooled with PRIOR_WEIGHT pseudo-residuals of `prior_noise`
    (conjugate pooling of variances)."""
    return float(np.sqrt((float(np.sum(r**2)) + PRIOR_WEIGHT * prior_noise**2) / (r.size + PRIOR_WEIGHT)))


def posterior_draws(est, n: int, seed: int) -> Draws:
    """`n` coefficient vectors from the estimator's Laplace posterior (log-normal where the prior is)."""
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
    """Lower and upper log-residual quantiles at LEVEL, model-error growth per doubling past the data
    (`widening`) and the model's bias per doubling past the data (`drift`, `drift_factor`)."""

    lower: float
    upper: float
    widening: float
    n_residuals: int
    prior_noise: float = 0.05
    drift: float = 0.0
    floor_lower: float = 0.0
    floor_upper: float = 0.0
    """The in-sample residuals' 5% and 95% quantiles (log, within lower/upper): the measurements' own
    scatter, which `interval` does not grow with distance. 0 (all of the noise grows) with fewer than
    MIN_EMPIRICAL in-sample or out-of-sample residuals."""

    def drift_factor(self, distance: np.ndarray) -> np.ndarray:
        """Factor on the median at `distance` past the data: exp(drift · log2 distance), 1 at and below the
        measured counts. The physics prices the collectives the layout issues; past the measured scale
        steps lose a little more per doubling (fabric tiers and congestion past a leaf switch, stragglers
        among more ranks: what no declared link says), which the corpus's held-out rows show as an
        optimistic bias growing with the distance (docs/validation.md, "Drift past the data")."""
        return np.exp(self.drift * np.log2(np.maximum(np.asarray(distance, float), 1.0)))

    @classmethod
    def from_residuals(cls, r: np.ndarray, widening: float, prior_noise: float,
                       in_sample: np.ndarray | None = None, drift: float = 0.0) -> "NoiseModel":
        """Quantiles of the out-of-sample residuals `r` with >= MIN_EMPIRICAL of them; else a Student-t
        whose spread pools `r`, the in-sample residuals and PRIOR_WEIGHT pseudo-residuals of
        `prior_noise` (a cloud trace's 10% scatter shows in-sample even with one count measured). With
        >= MIN_EMPIRICAL of both, the in-sample quantiles (clipped into the out-of-sample ones) are the
        scatter that does not grow with distance (`floor_lower`, `floor_upper`)."""
        tail = (1 - LEVEL) / 2
        if r.size >= MIN_EMPIRICAL:
            lo, hi = np.quantile(r, [tail, 1 - tail])
        else:
            both = r if in_sample is None else np.r_[r, in_sample]
            n = both.size
            pooled = pooled_noise(both, prior_noise)
            q = t_quantile(1 - tail, n + PRIOR_WEIGHT - 1) * pooled
            lo, hi = -q, q
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        flo = fhi = 0.0
        if r.size >= MIN_EMPIRICAL and in_sample is not None and in_sample.size >= MIN_EMPIRICAL:
            flo, fhi = np.quantile(in_sample, [tail, 1 - tail])
            flo, fhi = max(min(flo, 0.0), lo), min(max(fhi, 0.0), hi)
        return cls(float(lo), float(hi), float(widening), int(r.size), float(prior_noise),
                   float(drift), float(flo), float(fhi))

    @property
    def prior_dominated(self) -> bool:
        return self.n_residuals < PRIOR_WEIGHT


def draw_spread(X: np.ndarray, n_compute, draws: Draws) -> np.ndarray:
    """Log half-width at LEVEL of the step time over the posterior draws, per row (`n_compute`: the
    compute columns of a plain overlap model, or the fitted estimator itself).

    Every draw is evaluated at every row, vectorised as two matrix products (rows x p by p x B)
    and one elementwise overlap: a 65,536-count sweep with B = 64 costs tens of milliseconds.
    Log-normal summary (z x standard deviation of log T over draws): a per-row sort for empirical
    quantiles doubled the cost of a sweep.
    """
    if len(draws.coefs) < 2:
        return np.zeros(len(X))
    t = _evaluate(X, n_compute, draws.coefs, draws.gammas)
    return Z90 * np.log(np.maximum(t, 1e-300)).std(axis=1)


def sigma_spread(X: np.ndarray, est) -> tuple[np.ndarray, np.ndarray]:
    """(down, up): log half-widths at LEVEL of the step time under the posterior, per row, from sigma points.

    The posterior (log space for the log-prior parameters, where it is close to Gaussian) is walked
    z·sqrt(λ) along each principal axis of its covariance, both ways; the step time's log change
    along each axis adds in quadrature, ups to the upper side, downs to the lower. Exact for a
    linear model, it keeps what a linearisation at the median loses: a link whose prior allows it to
    be 10x slower than declared adds little at the median, where compute hides it, and a lot in the
    tail, where it does not (BERT at 256 GPUs: linearised +7%, measured +15%). 2k evaluations per
    row for k parameters, no sampling noise; `draw_spread` samples the same posterior for checks.
    """
    k = est.cov_.shape[0]
    if k == 0 or len(X) == 0:
        zero = np.zeros(len(X))
        return zero, zero
    v = np.append(est.coef_[est.free_], [est.gamma_] if k > est.free_.size else [])
    logs = est.log_params_
    lo, hi = est.bounds_
    cov = (est.cov_ + est.cov_.T) / 2
    # one-sided: at its bound, or so near it that the sigma step down would cross it (and be clipped),
    # the step taken in the parameter's own space: a log-prior factor's posterior is log-normal, so its
    # 90% step down is v·exp(-z·sd/v), not v - z·sd (ln(1/MFU) at 0.90 ± 0.37 puts its low end at MFU
    # 74%, where the linear step reached 100% and was held there: the band's low end at the peak)
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    down = np.where(logs, v * np.exp(-Z90 * sd / np.maximum(v, 1e-300)), v - Z90 * sd)
    near = down < lo
    # γ, the one parameter the step depends on nonlinearly, walks to its conditional mode (the others
    # re-solved with it held), not along its linear regression (estimator.OverlapModel.conditional)
    refit = _conditional_of(est, k - 1) if k > est.free_.size else None
    pts = np.clip(sigma_points(v, cov, logs, near, lo, refit), lo, hi)
    coefs = np.tile(est.coef_, (len(pts), 1))
    coefs[:, est.free_] = pts[:, : est.free_.size]
    gammas = pts[:, -1] if k > est.free_.size else np.full(len(pts), est.gamma_)
    # float32: half the memory traffic of a 65,536-row sweep, and 7 digits are plenty for a spread.
    f = np.float32
    t = est.evaluate(X.astype(f), coefs.astype(f), gammas.astype(f))
    t0 = np.maximum(est._predict_with(X, est.coef_, est.gamma_), 1e-300).astype(f)
    tiny = np.finfo(f).tiny
    dl = (np.log(np.maximum(t, tiny)) - np.log(np.maximum(t0, tiny))[:, None]).astype(float)  # (rows, 2 x axes)
    up = np.sqrt(np.sum(np.maximum(dl, 0.0) ** 2, axis=1))
    down = np.sqrt(np.sum(np.minimum(dl, 0.0) ** 2, axis=1))
    return down, up


def _conditional_of(est, index: int):
    """`conditional` for sigma_points: parameter `index`'s walk re-solved by the estimator's conditional mode,
    cached per walked point on the estimator (step_time asks for the same points at every call)."""
    if not hasattr(est, "conditional"):
        return None
    cache = est.__dict__.setdefault("_conditional_cache", {})

    def mode(point: np.ndarray, col: int) -> np.ndarray | None:
        if col != index:
            return None
        key = (col, np.asarray(point, float).tobytes())
        if key not in cache:
            cache[key] = est.conditional(point, col)
        return cache[key]

    return mode


def sigma_points(v: np.ndarray, cov: np.ndarray, logs: np.ndarray, at_bound: np.ndarray,
                 lo: np.ndarray | None = None, conditional=None) -> np.ndarray:
    """Sigma points (points, k) of the posterior N(v, cov) (cov in coefficient units), with the
    parameters `at_bound` (held at, or within a sigma step of, their lower bound `lo`) walked alone, the
    way the fit lets them. A Gaussian splits into the bounded block b and the rest f given b:
    x_f | x_b ~ N(C_fb C_bb⁻¹ x_b, C_f|b). The rest walks the principal axes of C_f|b both ways, in
    the prior's space (log for the log-prior parameters); each bounded parameter walks +z·sd alone
    with the rest following C_fb C_bb⁻¹, in coefficient units, where a trade between terms that the
    measured steps pin (compute against per-GPU contention at a fixed GPUs-per-node) is linear.
    A bounded factor on a declared speed (a log-prior parameter: 1/MFU, a link's factor) also walks
    down, z·sd at most, with every parameter following its regression on it, only as far as none
    crosses its bound: with no measurement, ln(1/MFU) at 0.83 ± 0.51 reaches MFU 100% within the 90%
    step, and a walk up alone had put the band's low end at the median less the noise (BERT-Large
    predicted at 44% MFU, measured at 60%, outside a band of 0.92-1.85x the median; the prior-only
    coverage of the published series was 68%). The per-step constants and γ walk up only: a step
    down of γ alone at llm7b's measured 128 GPUs opened its band there to +14%. `conditional(point,
    col)`, where it returns a point, replaces a bounded walk's linear follow (the conditional mode for
    γ, `sigma_spread`).
    Clipping the plain axes instead broke the fit where it was measured: an axis that trades compute
    against an overhead at 0 kept the compute and lost the overhead (llm7b at its own 8 and 128 GPUs:
    -3%/+71%)."""
    k = cov.shape[0]
    b, f = np.flatnonzero(at_bound), np.flatnonzero(~at_bound)
    cond, moves = cov, []
    if b.size:
        cbb = cov[np.ix_(b, b)]
        gain = cov[np.ix_(f, b)] @ np.linalg.pinv(cbb)  # (f, b): how the rest follows a bounded one
        cond = np.zeros_like(cov)
        cond[np.ix_(f, f)] = cov[np.ix_(f, f)] - gain @ cov[np.ix_(b, f)]
        for j, col in enumerate(b):
            sd = np.sqrt(max(float(cbb[j, j]), 0.0))
            if sd > 0:
                point = v.copy()
                point[col] += Z90 * sd
                point[f] += gain[:, j] * Z90 * sd
                mode = conditional(point, int(col)) if conditional is not None else None
                moves.append(point if mode is None else mode)
            if sd > 0 and lo is not None and logs[col]:
                # down, with every other parameter following its regression on this one (the bounded ones
                # too: two held near their bounds, such as γ and the network's factor with one count across
                # nodes, trade along the ridge the data pin), only as far as no parameter crosses a bound
                follow = cov[:, col] / cbb[j, j]
                pulled = follow > 0
                room = float(np.min(np.maximum(v[pulled] - lo[pulled], 0.0) / follow[pulled]))
                step = min(Z90 * sd, room)
                if step > 0:
                    moves.append(v - follow * step)
    d = np.where(logs, 1.0 / np.maximum(v, 1e-300), 1.0)
    cond = cond * d[:, None] * d[None, :]
    vals, vecs = np.linalg.eigh((cond + cond.T) / 2)
    keep = vals > 1e-12 * max(float(vals.max(initial=0.0)), 1e-300)
    axes = (vecs[:, keep] * (Z90 * np.sqrt(vals[keep]))).T
    u = np.where(logs, np.log(np.maximum(v, 1e-300)), v)
    pts = np.vstack([u + axes, u - axes]) if axes.size else np.zeros((0, k))
    pts = np.where(logs[None, :], np.exp(np.minimum(pts, 700)), pts)
    out = np.vstack([pts, *([np.array(moves)] if moves else [])])
    return out if len(out) else v[None, :]


def _evaluate(X: np.ndarray, nc, coefs: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """Step time of every coefficient vector (rows of `coefs`) at every row of X: (rows, vectors), by the
    estimator's evaluation (`nc`: the fitted estimator, or the compute columns of a plain overlap model)."""
    from advisor.scaling.estimator import evaluate

    if hasattr(nc, "evaluate"):
        return nc.evaluate(X, coefs, gammas)
    return evaluate(X, coefs, gammas, nc)


def interval(median: np.ndarray, spread, noise: NoiseModel, distance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) around `median`: the posterior spread (`(down, up)` log half-widths, or one array for
    both) and the noise in quadrature, the noise grown by
    `noise.widening` per doubling of the distance past the data: the part of its variance above the
    in-sample scatter (`noise.floor_lower`, `floor_upper`), which is the model's error. The
    measurements' own scatter is as wide at 4x as at the measured counts (a cloud trace's ±40% steps at
    one count stay ±40%); the misfit of a count held out grows with the distance."""
    s_down, s_up = spread if isinstance(spread, tuple) else (spread, spread)
    grow = 1.0 + noise.widening * np.log2(np.maximum(distance, 1.0))
    down = np.sqrt(s_down**2 + noise.floor_lower**2 + (noise.lower**2 - noise.floor_lower**2) * grow**2)
    up = np.sqrt(s_up**2 + noise.floor_upper**2 + (noise.upper**2 - noise.floor_upper**2) * grow**2)
    return median * np.exp(-down), median * np.exp(up)
