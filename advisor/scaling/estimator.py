"""The regression core: bounded coefficients, Gaussian priors and a fitted compute/communication overlap.

    T = (Tc^γ + Ts^γ)^(1/γ) + Te,  Tc = Xc · θc,  Ts = Xs · θs,  Te = Xe · θe,  θ ≥ lower

X's columns are three blocks: the first `n_compute` compute (Xc), then communication that can run
under compute (Xs), then the last `n_exposed` columns (Xe): time that adds to the step whatever
overlaps (communication no compute hides, the pipeline's idle share). `tied` pairs (column, source)
give a column its source's coefficient, so the exposed part of a link's traffic is priced at the
same achieved speed as its hidden part. Pollux (Qiao et al., OSDI'21, §3.2) models overlap as this
γ-norm: γ = 1 is no overlap (times add), γ → ∞ perfect overlap (the larger wins); γ is bounded to
[1, 10] as there. With no exposed columns and no ties this is Pollux's model. Coefficients are
bounded below (non-negative as in Ernest, Venkataraman et al., NSDI'16; physical floors such as
MFU <= 100% come in as `lower`), so no term can turn negative and explode when extrapolated.
Residuals are relative (a 10% miss at 1 GPU counts as much as one at 16) and robust (soft-L1, as
scipy's `least_squares` defines it; solved by `_solve`): one straggling run does not drag the curve.

The fit is a maximum a posteriori estimate: each prior (column, kind, mean, sd) adds one residual
row `noise · (θ - mean) / sd` (kind "lin") or `noise · (ln θ - mean) / sd` (kind "log"), where
`noise` is the relative run-to-run noise of a step time; with the step residuals in relative
units this is a Gaussian likelihood times Gaussian priors. With few counts the prior decides
what the data cannot (how fast an uncrossed link is, whether a loss is per step or per micro-batch);
with hundreds of rows it is negligible. `cov_` is the Laplace approximation of the posterior
covariance of the free coefficients (and γ) at the optimum, which the intervals sample.

Two optional extra targets pin the communication coefficients independently of step times:
- `comm`: measured exposed communication per row (step minus compute; Pollux's `sync_time`),
  matched by T - Tc;
- `probe_X`, `probe_y`: collective probes (seconds of one collective), matched by Ts alone.

`OverlapModel` is the numpy/scipy core the model fits with; `OverlapRegressor` (imported lazily
from advisor.scaling.sklearn_estimator) is the same as a scikit-learn estimator: parameters in
`__init__`, validation in `fit`, fitted attributes end in `_` (checked with
`parametrize_with_checks` in tests/unit/test_estimator.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


def __getattr__(name: str):
    # The scikit-learn estimator is a thin wrapper (advisor.scaling.sklearn_estimator): importing
    # scikit-learn costs ~0.8 s, which `advisor recommend` would pay for nothing.
    if name == "OverlapRegressor":
        from advisor.scaling.sklearn_estimator import OverlapRegressor

        return OverlapRegressor
    raise AttributeError(name)


def combine(tc: np.ndarray, ts: np.ndarray, gamma) -> np.ndarray:
    """(tc^γ + ts^γ)^(1/γ) for non-negative tc, ts, computed without overflow."""
    tc = np.maximum(tc, 0.0)
    ts = np.maximum(ts, 0.0)
    top = np.maximum(tc, ts)
    safe = np.where(top > 0, top, 1.0)
    return np.where(top > 0, safe * ((tc / safe) ** gamma + (ts / safe) ** gamma) ** (1.0 / gamma), 0.0)


def tie(coef: np.ndarray, tied=()) -> np.ndarray:
    """`coef` (one vector, or vectors as rows) with each tied column set to its source's coefficient."""
    if not len(tied):
        return coef
    coef = np.array(coef, copy=True)
    for col, src in tied:
        coef[..., col] = coef[..., src]
    return coef


def fold(d: np.ndarray, tied=()) -> np.ndarray:
    """Per-column derivatives (rows x columns) folded onto the coefficients they are: a tied column's
    added to its source's, its own zeroed (the chain rule through `tie`)."""
    if not len(tied):
        return d
    d = np.array(d, copy=True)
    for col, src in tied:
        d[:, src] += d[:, col]
        d[:, col] = 0.0
    return d


def evaluate(X: np.ndarray, coefs: np.ndarray, gammas: np.ndarray, n_compute: int, n_exposed: int = 0,
             tied=()) -> np.ndarray:
    """Step time (module docstring) of every coefficient vector (rows of `coefs`) at every row of X:
    (rows, vectors). THE evaluation of the model: the fit, predictions and intervals all use it."""
    coefs = tie(np.atleast_2d(coefs), tied)
    nc, end = n_compute, X.shape[1] - n_exposed
    tc = X[:, :nc] @ coefs[:, :nc].T
    t = combine(tc, X[:, nc:end] @ coefs[:, nc:end].T, np.asarray(gammas)[None, :]) if nc < end else np.maximum(tc, 0)
    return t + X[:, end:] @ coefs[:, end:].T if n_exposed else t


def gradient(X: np.ndarray, coef: np.ndarray, gamma: float, n_compute: int, n_exposed: int = 0,
             tied=()) -> tuple[np.ndarray, np.ndarray]:
    """(dT/dθ per row and coefficient, dT/dγ per row) of the model T at `coef`, `gamma`.

    dT/dθc = Xc·(Tc/T')^(γ-1), dT/dθs = Xs·(Ts/T')^(γ-1), dT/dθe = Xe, T' = (Tc^γ + Ts^γ)^(1/γ);
    since (Tc/T')^γ + (Ts/T')^γ = 1, d ln T'/dγ = (a^γ ln a + b^γ ln b)/γ with a = Tc/T', b = Ts/T'.
    Tied columns' derivatives are folded onto their sources (`fold`).
    """
    coef = tie(coef, tied)
    nc, end = n_compute, X.shape[1] - n_exposed
    tc = np.maximum(X[:, :nc] @ coef[:nc], 0.0)
    if nc == end:
        return fold(np.hstack([X[:, :nc] * (tc > 0)[:, None], X[:, end:]]), tied), np.zeros(len(X))
    ts = np.maximum(X[:, nc:end] @ coef[nc:end], 0.0)
    t = combine(tc, ts, gamma)
    safe_t = np.where(t > 0, t, 1.0)
    a, b = tc / safe_t, ts / safe_t
    with np.errstate(divide="ignore", invalid="ignore"):
        d_tc = np.where(t > 0, a ** (gamma - 1), 0.0)
        d_ts = np.where(t > 0, b ** (gamma - 1), 0.0)
        la = np.where(a > 0, a**gamma * np.log(np.where(a > 0, a, 1.0)), 0.0)
        lb = np.where(b > 0, b**gamma * np.log(np.where(b > 0, b, 1.0)), 0.0)
    d_coef = np.hstack([X[:, :nc] * d_tc[:, None], X[:, nc:end] * d_ts[:, None], X[:, end:]])
    return fold(d_coef, tied), t * (la + lb) / gamma


@dataclass(frozen=True, kw_only=True)
class _Problem:
    """Everything one fit needs, validated: data, targets, free parameters, bounds, priors and ties
    (built by keyword: 20 fields, most of them arrays, are too many to keep in order)."""

    X: np.ndarray
    y: np.ndarray
    scale: np.ndarray
    sqrt_w: np.ndarray
    nc: int
    free: np.ndarray
    base: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    fit_gamma: bool
    gamma_bounds: tuple[float, float]
    comm: np.ndarray
    comm_rows: np.ndarray
    probe_X: np.ndarray
    probe_y: np.ndarray
    prior_pos: np.ndarray
    prior_log: np.ndarray
    prior_mean: np.ndarray
    prior_k: np.ndarray
    tied: tuple

    def unpack(self, v):
        coef = self.base.copy()
        coef[self.free] = v[: self.free.size]
        return tie(coef, self.tied), (v[self.free.size] if self.fit_gamma else self.gamma_bounds[0])


def _priors(est, free: np.ndarray, lower: np.ndarray, p: int, gamma_free: bool):
    """Prior rows as (position in the parameter vector, is-log, mean, 1/sd x noise)."""
    free_pos = {int(j): i for i, j in enumerate(free)}
    pos, logs, means, ks = [], [], [], []
    for col, kind, mean, sd in est.prior:
        if kind not in ("lin", "log"):
            raise ValueError(f"unknown prior kind {kind!r}")
        if not float(sd) > 0:  # noise / sd: a zero (or NaN) sd made an infinite residual weight
            raise ValueError(f"a prior's sd must be positive (column {col!r}: {sd!r})")
        if col == "gamma":
            if not gamma_free:
                continue
            i = free.size
        elif 0 <= col < p and col in free_pos:
            i = free_pos[col]
            if kind == "log" and not lower[col] > 0:
                raise ValueError(f"a log prior needs a positive lower bound (column {col})")
        else:
            continue
        pos.append(i), logs.append(kind == "log"), means.append(float(mean)), ks.append(float(est.noise) / float(sd))
    return np.array(pos, int), np.array(logs, bool), np.array(means, float), np.array(ks, float)


def _residuals(pb: _Problem, est, v):
    coef, g = pb.unpack(v)
    t = est._predict_with(pb.X, coef, g)
    parts = [pb.sqrt_w * (t - pb.y) / pb.scale]
    if pb.comm_rows.any():
        rows = pb.comm_rows
        tc = pb.X[rows, :pb.nc] @ coef[:pb.nc]
        parts.append(est.comm_weight * pb.sqrt_w[rows] * ((t[rows] - tc) - pb.comm[rows]) / pb.scale[rows])
    if pb.probe_y.size:
        parts.append((pb.probe_X[:, pb.nc:] @ coef[pb.nc:] - pb.probe_y) / pb.probe_y)
    if pb.prior_pos.size:
        x = v[pb.prior_pos]
        x = np.where(pb.prior_log, np.log(np.maximum(x, 1e-300)), x)
        parts.append(pb.prior_k * (x - pb.prior_mean))
    return np.concatenate(parts)


def _jacobian(pb: _Problem, est, v):
    coef, g = pb.unpack(v)
    d_coef, d_g = gradient(pb.X, coef, g, pb.nc, int(est.n_exposed), pb.tied)
    rows = [(pb.sqrt_w / pb.scale)[:, None] * np.column_stack([d_coef[:, pb.free], d_g])]
    if pb.comm_rows.any():
        k = (est.comm_weight * pb.sqrt_w / pb.scale)[pb.comm_rows][:, None]
        d_tc = np.zeros((int(pb.comm_rows.sum()), pb.X.shape[1]))
        d_tc[:, :pb.nc] = pb.X[pb.comm_rows, :pb.nc]
        dc = d_coef[pb.comm_rows] - fold(d_tc, pb.tied)
        rows.append(k * np.column_stack([dc[:, pb.free], d_g[pb.comm_rows]]))
    if pb.probe_y.size:
        dp = np.zeros_like(pb.probe_X)
        dp[:, pb.nc:] = pb.probe_X[:, pb.nc:] / pb.probe_y[:, None]
        dp = fold(dp, pb.tied)
        rows.append(np.column_stack([dp[:, pb.free], np.zeros(len(pb.probe_y))]))
    if pb.prior_pos.size:
        dprior = np.zeros((pb.prior_pos.size, pb.free.size + 1))
        x = v[pb.prior_pos]
        with np.errstate(over="ignore"):  # a log-prior parameter at its floor: a huge but finite slope
            slope = np.where(pb.prior_log, pb.prior_k / np.maximum(x, 1e-300), pb.prior_k)
        dprior[np.arange(pb.prior_pos.size), pb.prior_pos] = np.minimum(slope, 1e300)
        rows.append(dprior)
    J = np.vstack(rows)
    return J if pb.fit_gamma else J[:, :-1]


def nnls(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-negative least squares, min |Ax - b| subject to x >= 0 (Lawson and Hanson 1974, ch. 23; the
    algorithm of scipy.optimize.nnls, here so that commands need not import scipy.optimize, ~0.75 s)."""
    m, n = A.shape
    x = np.zeros(n)
    passive = np.zeros(n, bool)
    tol = 10 * np.finfo(float).eps * max(m, n) * max(float(np.abs(A).sum(axis=0).max(initial=0.0)), 1.0)
    grad = A.T @ (b - A @ x)
    for _ in range(3 * n + 10):
        if passive.all() or grad[~passive].max(initial=-np.inf) <= tol:
            break
        passive[int(np.argmax(np.where(passive, -np.inf, grad)))] = True
        for _ in range(3 * n + 10):
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(A[:, passive], b, rcond=None)[0]
            if z[passive].min(initial=np.inf) > 0:
                break
            shrink = passive & (z <= 0)
            alpha = float(np.min(x[shrink] / np.maximum(x[shrink] - z[shrink], 1e-300)))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
        x = z
        grad = A.T @ (b - A @ x)
    return np.maximum(x, 0.0)


def _robust(est, r: np.ndarray) -> tuple[float, np.ndarray]:
    """(cost, IRLS weight per residual) of the loss: "linear" (squares) or "soft_l1",
    2·f²·(sqrt(1 + (r/f)²) - 1) as in scipy least_squares."""
    if est.loss == "linear":
        return float(r @ r), np.ones_like(r)
    if est.loss != "soft_l1":
        raise ValueError(f"loss must be 'soft_l1' or 'linear' (got {est.loss!r})")
    f = float(est.f_scale)
    root = np.sqrt(1.0 + (r / f) ** 2)
    return float(2 * f * f * np.sum(root - 1.0)), 1.0 / root


def _solve(pb: _Problem, est, v: np.ndarray) -> np.ndarray:
    """Bounded robust least squares: Levenberg-Marquardt on iteratively reweighted residuals, steps
    projected onto the bounds, variables pinned at a bound the gradient pushes against held there.
    The problems are small (<= 12 parameters) and, with the priors, well posed; scipy's
    least_squares (trust-region reflective) reached the same optima on the corpus, at the cost of
    importing scipy.optimize in every command."""
    lo, hi = pb.lo, pb.hi
    r = _residuals(pb, est, v)
    cost, wt = _robust(est, r)
    lam = 1e-3
    for _ in range(100 * max(v.size, 1)):
        J = _jacobian(pb, est, v)
        sw = np.sqrt(wt)
        A = J * sw[:, None]
        g = A.T @ (r * sw)
        H = A.T @ A
        free = ~(((v <= lo + 1e-12) & (g > 0)) | ((v >= hi - 1e-12) & (g < 0)))
        if not free.any():
            break
        Hf, gf, diag = H[np.ix_(free, free)], g[free], np.diag(H)[free] + 1e-12
        better = None
        for _ in range(40):
            try:
                step = np.linalg.solve(Hf + lam * np.diag(diag), -gf)
            except np.linalg.LinAlgError:
                lam *= 10.0
                continue
            trial = v.copy()
            trial[free] += step
            trial = np.clip(trial, lo, hi)
            r_t = _residuals(pb, est, trial)
            c_t, w_t = _robust(est, r_t)
            if c_t < cost:
                better = (trial, r_t, c_t, w_t)
                break
            lam *= 4.0
        if better is None:
            break
        moved = float(np.max(np.abs(better[0] - v) / (np.abs(v) + 1e-8)))
        gain = (cost - better[2]) / max(cost, 1e-300)
        v, r, cost, wt = better
        lam = max(lam / 3.0, 1e-12)
        if gain < 1e-12 or moved < 1e-10:
            break
    return v


def _start(pb: _Problem, est, w: np.ndarray, init):
    """Starting point: `init` (warm start), else additive non-negative least squares on relative errors."""
    if init is not None:
        coef0, g0 = np.asarray(init[0], float), float(init[1])
    else:
        sw = np.sqrt(w) / pb.scale
        X = fold(pb.X, pb.tied)  # additive in the coefficients: a tied column adds to its source's
        target = pb.y - X @ pb.base
        if pb.free.size and pb.y.size:
            # nnls returns the solution vector (not scipy's (x, rnorm) pair): every free coefficient
            # starts at its own value, not all at the first one's
            theta = nnls(X[:, pb.free] * sw[:, None], target * sw)
        else:
            theta = np.zeros(pb.free.size)
        coef0 = pb.base.copy()
        coef0[pb.free] = theta
        g0 = 1.5
    # unidentified columns start at the prior
    for pos, is_log, mean in zip(pb.prior_pos, pb.prior_log, pb.prior_mean, strict=True):
        if pos < pb.free.size and coef0[pb.free[pos]] == 0 and is_log:
            coef0[pb.free[pos]] = np.exp(mean)
    v0 = np.clip(coef0[pb.free], pb.lo[: pb.free.size], pb.hi[: pb.free.size])
    if pb.fit_gamma:
        lo_g, hi_g = pb.gamma_bounds
        v0 = np.append(v0, min(max(g0, lo_g + 1e-9), hi_g - 1e-9))
    return v0


class OverlapModel:
    """Bounded compute + communication model with fitted overlap γ and optional Gaussian priors.

    Parameters
    ----------
    n_compute : int or None
        The first `n_compute` columns are compute terms, the rest communication; None: all
        compute (a plain non-negative linear model, γ unused).
    n_exposed : int
        The last `n_exposed` columns add to the step outside the overlap (module docstring).
    tied : tuple of (column, source)
        Columns whose coefficient is their source column's (never free, whatever `fixed` says).
    gamma_bounds : (float, float)
        Bounds of the overlap exponent γ (Pollux: [1, 10]).
    loss, f_scale : str, float
        Robust loss ("soft_l1" or "linear", as scipy `least_squares` defines them) and its scale
        (in relative error).
    comm_weight : float
        Weight of the exposed-communication residuals against step-time residuals.
    fixed : tuple of (column, value)
        Coefficients held at a value.
    lower : tuple of (column, value)
        Lower bounds above 0 (physical floors: 1/MFU >= 1, a link no faster than declared).
    prior : tuple of (column, kind, mean, sd)
        Gaussian priors, "lin" on θ or "log" on ln θ (column "gamma" for γ); see the module docstring.
    noise : float
        Relative noise of one step-time row (one sigma): the weight of the data against the priors.
    """

    def __init__(self, n_compute=None, gamma_bounds=(1.0, 10.0), loss="soft_l1", f_scale=0.1,
                 comm_weight=0.5, fixed=(), lower=(), prior=(), noise=0.05, n_exposed=0, tied=()):
        self.n_compute = n_compute
        self.n_exposed = n_exposed
        self.tied = tied
        self.gamma_bounds = gamma_bounds
        self.loss = loss
        self.f_scale = f_scale
        self.comm_weight = comm_weight
        self.fixed = fixed
        self.lower = lower
        self.prior = prior
        self.noise = noise

    def _split(self, n_features: int) -> int:
        end = n_features - int(self.n_exposed)
        nc = end if self.n_compute is None else int(self.n_compute)
        if not 0 <= nc <= end:
            raise ValueError(f"n_compute={self.n_compute} outside 0..{end} (n_exposed={self.n_exposed})")
        return nc

    def evaluate(self, X, coefs, gammas) -> np.ndarray:
        """Step time of each coefficient vector (rows of `coefs`, with its γ) at each row of X: (rows, vectors)."""
        return evaluate(X, coefs, gammas, self._split(X.shape[1]), int(self.n_exposed), self.tied)

    def _predict_with(self, X, coef, gamma):
        return self.evaluate(X, np.asarray(coef)[None, :], np.array([gamma], dtype=np.asarray(coef).dtype))[:, 0]

    def _weights(self, sample_weight, X):
        if sample_weight is None:
            return np.ones(len(X))
        w = np.asarray(sample_weight, dtype=np.float64)
        w = np.full(len(X), float(w)) if w.ndim == 0 else w
        if w.shape != (len(X),):
            raise ValueError(f"sample_weight.shape == {w.shape}, expected {(len(X),)}")
        if (w < 0).any():
            raise ValueError("negative sample weights are not allowed")
        if not (w > 0).any():
            raise ValueError("all sample weights are zero")
        return w

    def _problem(self, X, y, w, comm, probe_X, probe_y) -> _Problem:
        n, p = X.shape
        nc = self._split(p)
        scale = np.maximum(np.abs(y), max(1e-12, 1e-9 * float(np.max(np.abs(y))))) if n else np.ones(0)
        fixed = dict(self.fixed)
        tied = tuple((int(c), int(src)) for c, src in self.tied)
        if any(not (0 <= c < p and 0 <= src < p) or src in dict(tied) for c, src in tied):
            raise ValueError(f"tied={self.tied}: columns outside 0..{p - 1}, or tied to a tied column")
        free = np.array([j for j in range(p) if j not in fixed and j not in dict(tied)], dtype=int)
        base = np.zeros(p)
        for j, v in fixed.items():
            base[j] = v
        lower = np.zeros(p)
        for j, v in self.lower:
            lower[j] = v
        has_comm = nc < p - int(self.n_exposed)
        g_lo, g_hi = (float(self.gamma_bounds[0]), float(self.gamma_bounds[1])) if has_comm else (1.0, 1.0)
        fit_gamma = has_comm and g_hi > g_lo
        lo = np.append(lower[free], g_lo if fit_gamma else [])
        hi = np.append(np.full(free.size, np.inf), g_hi if fit_gamma else [])
        comm_rows = np.zeros(n, bool)
        comm_arr = np.zeros(n)
        if comm is not None and has_comm:
            comm_arr = np.asarray(comm, float)
            comm_rows = np.isfinite(comm_arr)
        use_probe = probe_X is not None and len(probe_X) and has_comm
        pX = np.asarray(probe_X, float) if use_probe else np.zeros((0, p))
        py = np.asarray(probe_y, float) if use_probe else np.zeros(0)
        pos, logs, means, ks = _priors(self, free, lower, p, fit_gamma)
        return _Problem(X=X, y=y, scale=scale, sqrt_w=np.sqrt(w), nc=nc, free=free, base=base, lo=lo, hi=hi,
                        fit_gamma=fit_gamma, gamma_bounds=(g_lo, g_hi), comm=comm_arr, comm_rows=comm_rows,
                        probe_X=pX, probe_y=py, prior_pos=pos, prior_log=logs, prior_mean=means, prior_k=ks,
                        tied=tied)

    def fit(self, X, y, sample_weight=None, comm=None, probe_X=None, probe_y=None, init=None):
        """Fit coefficients and γ (MAP). `init` = (coef, gamma) warm-starts (refits on subsets)."""
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        if X.ndim != 2 or y.shape != (len(X),) or not len(X):
            raise ValueError(f"X must be 2-D with one row per y (got X {X.shape}, y {y.shape})")
        self.n_features_in_ = X.shape[1]
        return self._fit_arrays(X, y, sample_weight, comm, probe_X, probe_y, init)

    def fit_probes(self, n_features: int, probe_X, probe_y) -> "OverlapModel":
        """Fit on collective probes and the priors alone (no step row): the communication columns the
        probes reach move, the rest stay at their priors; `cov_` is the Laplace covariance as in `fit`."""
        self.n_features_in_ = int(n_features)
        return self._fit_arrays(np.zeros((0, n_features)), np.zeros(0), None, None, probe_X, probe_y, None)

    def _fit_arrays(self, X, y, sample_weight, comm, probe_X, probe_y, init):
        w = self._weights(sample_weight, X)
        pb = self._problem(X, y, w, comm, probe_X, probe_y)
        v = _start(pb, self, w, init)
        if v.size:
            v = _solve(pb, self, v)
        coef, gamma = pb.unpack(v)
        self.coef_ = np.asarray(coef, float)
        self.gamma_ = float(gamma)
        self.free_ = pb.free
        self.problem_ = pb  # what `conditional` re-solves
        self.held_ = np.zeros(v.size, bool)
        self.cov_ = self._laplace(pb, v)
        self.log_params_ = self._log_mask(pb)
        self.bounds_ = (pb.lo, pb.hi)
        return self

    def conditional(self, v: np.ndarray, index: int) -> np.ndarray | None:
        """The posterior's conditional mode given parameter `index` (of the parameter vector: free
        coefficients, then γ) at v[index]: the MAP of the others with it held, solved from `v`. Where
        the step depends on a parameter nonlinearly (γ: raising it hides less and less), following it
        by its linear regression from the covariance overshoots: at llm7b's measured 8 GPUs, γ walked
        from 1.1 to 2.7 with 1/MFU following its slope at 1.1 put the step 16% above what the
        measurement there allows. None when this fit keeps no problem (the prior alone, a copy)."""
        pb = getattr(self, "problem_", None)
        if pb is None or not 0 <= index < pb.lo.size:
            return None
        pin = self.held_.copy()  # a staged fit's second-stage parameters stay where that stage put them
        pin[index] = True
        lo, hi = pb.lo.copy(), pb.hi.copy()
        point = np.clip(np.asarray(v, float), lo, hi)
        lo[pin], hi[pin] = point[pin], point[pin]
        return _solve(replace(pb, lo=lo, hi=hi), self, point)

    @staticmethod
    def _log_mask(pb: _Problem) -> np.ndarray:
        """Which entries of the parameter vector (free coefficients, then γ) have a log prior."""
        mask = np.zeros(pb.free.size + int(pb.fit_gamma), bool)
        mask[pb.prior_pos[pb.prior_log]] = True
        return mask

    def set_prior_state(self, n_features: int) -> "OverlapModel":
        """Fitted attributes at the prior alone (no measured run): coefficients at the prior medians,
        `cov_` the prior's (linearised, as the Laplace covariance of a fit is)."""
        X = np.zeros((0, n_features))
        pb = self._problem(X, np.zeros(0), np.zeros(0), None, None, None)
        v = np.append(np.maximum(pb.base[pb.free], pb.lo[: pb.free.size]), [2.0] if pb.fit_gamma else [])
        sd = np.zeros(v.size)
        for pos, is_log, mean, k in zip(pb.prior_pos, pb.prior_log, pb.prior_mean, pb.prior_k, strict=True):
            v[pos] = np.exp(mean) if is_log else mean
            sd[pos] = float(self.noise) / k * (v[pos] if is_log else 1.0)
        v = np.clip(v, pb.lo, pb.hi)
        coef, gamma = pb.unpack(v)
        self.coef_, self.gamma_, self.free_ = np.asarray(coef, float), float(gamma), pb.free
        self.problem_, self.held_ = None, np.zeros(v.size, bool)  # nothing measured to re-solve
        self.cov_ = np.diag(sd**2)
        self.hessians_ = (np.zeros((sd.size, sd.size)),
                          np.diag(np.where(sd > 0, float(self.noise) ** 2 / np.maximum(sd, 1e-300) ** 2, 0.0)))
        self.log_params_ = self._log_mask(pb)
        self.bounds_ = (pb.lo, pb.hi)
        self.n_features_in_ = n_features
        return self

    def joined(self, other: "OverlapModel") -> "OverlapModel":
        """This fit with the coefficients `other` fitted (its free ones, a subset of this fit's, the
        rest held at this fit's values) taken from `other`: a staged fit. `other`'s curvature, data
        and prior, replaces this fit's in its block; `cov_` follows."""
        import copy

        out = copy.copy(self)
        out.coef_ = self.coef_.copy()
        out.coef_[other.free_] = other.coef_[other.free_]
        out.coef_ = tie(out.coef_, self.tied)
        pos = np.searchsorted(self.free_, other.free_)
        Hd, Hp = (h.copy() for h in self.hessians_)
        k2 = other.free_.size
        Hd[np.ix_(pos, pos)] = other.hessians_[0][:k2, :k2]
        Hp[np.ix_(pos, pos)] = other.hessians_[1][:k2, :k2]
        out.hessians_ = (Hd, Hp)
        # `conditional` re-solves this (the first stage's) problem with the second stage's parameters held
        out.held_ = self.held_.copy()
        out.held_[pos] = True
        have = {(q[0], q[1]) for q in self.prior}
        out.prior = tuple(self.prior) + tuple(q for q in other.prior if q[0] in set(other.free_.tolist())
                                              and (q[0], q[1]) not in have)
        out.cov_ = out.covariance(1.0)
        return out

    def _laplace(self, pb: _Problem, v) -> np.ndarray:
        """Posterior covariance of the free parameters (and γ when fitted): noise² (JᵀJ)⁻¹ at the optimum.
        Keeps the data and prior parts of JᵀJ (`hessians_`) so that `covariance` can reweigh the data
        once their own noise is known."""
        k = v.size
        if k == 0:
            self.hessians_ = (np.zeros((0, 0)), np.zeros((0, 0)))
            return np.zeros((0, 0))
        J = _jacobian(pb, self, v)
        n_prior = pb.prior_pos.size
        Jd, Jp = J[: len(J) - n_prior], J[len(J) - n_prior:]
        self.hessians_ = (Jd.T @ Jd, Jp.T @ Jp)
        return self.covariance(1.0)

    def covariance(self, data_weight: float) -> np.ndarray:
        """noise² (w·J_dataᵀJ_data + J_priorᵀJ_prior)⁻¹: the Laplace covariance with the data's weight
        scaled by `data_weight` = (noise / the data's own noise)², the prior's unchanged."""
        Hd, Hp = self.hessians_
        k = Hd.shape[0]
        if k == 0:
            return np.zeros((0, 0))
        H = data_weight * Hd + Hp
        # Bounded or unidentified directions: a ridge keeps the inverse finite; the prior usually does.
        H = H + 1e-9 * max(float(np.trace(H)) / k, 1e-12) * np.eye(k)
        return float(self.noise) ** 2 * np.linalg.pinv(H)

    def predict(self, X):
        X = np.asarray(X, dtype=np.float64)
        return self._predict_with(X, self.coef_, self.gamma_)
