"""The regression core: non-negative coefficients with a fitted compute/communication overlap.

    T = (Tc^γ + Ts^γ)^(1/γ),  Tc = X[:, :n_compute] · θc,  Ts = X[:, n_compute:] · θs,  θ ≥ 0

Pollux (Qiao et al., OSDI'21, §3.2) models overlap as this γ-norm: γ = 1 is no overlap (times
add), γ → ∞ perfect overlap (the larger wins); γ is bounded to [1, 10] as there. Coefficients are
non-negative as in Ernest (Venkataraman et al., NSDI'16, NNLS), so no term can turn negative and
explode when extrapolated. Residuals are relative (a 10% miss at 1 GPU counts as much as one at
16) and robust (soft-L1, scipy `least_squares`): one straggling run does not drag the curve.

Two optional extra targets pin the communication coefficients independently of step times:
- `comm`: measured exposed communication per row (step minus compute; Pollux's `sync_time`),
  matched by T - Tc;
- `probe_X`, `probe_y`: collective probes (seconds of one collective), matched by Ts alone.

A scikit-learn estimator: parameters in `__init__`, validation in `fit`, fitted attributes end in
`_` (checked with `parametrize_with_checks` in tests/test_estimator.py).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    def _validate_data(est, X, y=None, reset=True, **kw):
        if y is None:
            return est._validate_data(X, reset=reset, **kw)
        return est._validate_data(X, y, reset=reset, **kw)


def combine(tc: np.ndarray, ts: np.ndarray, gamma) -> np.ndarray:
    """(tc^γ + ts^γ)^(1/γ) for non-negative tc, ts, computed without overflow."""
    tc = np.maximum(tc, 0.0)
    ts = np.maximum(ts, 0.0)
    top = np.maximum(tc, ts)
    safe = np.where(top > 0, top, 1.0)
    return np.where(top > 0, safe * ((tc / safe) ** gamma + (ts / safe) ** gamma) ** (1.0 / gamma), 0.0)


def gradient(X: np.ndarray, coef: np.ndarray, gamma: float, n_compute: int) -> tuple[np.ndarray, np.ndarray]:
    """(dT/dθ per row and column, dT/dγ per row) of the model T at `coef`, `gamma`.

    dT/dθc = Xc·(Tc/T)^(γ-1), dT/dθs = Xs·(Ts/T)^(γ-1); since (Tc/T)^γ + (Ts/T)^γ = 1,
    d ln T/dγ = (a^γ ln a + b^γ ln b)/γ with a = Tc/T, b = Ts/T. Used by the fit's Jacobian and by
    the delta-method interval of a sweep.
    """
    nc = n_compute
    tc = np.maximum(X[:, :nc] @ coef[:nc], 0.0)
    if nc == X.shape[1]:
        return X * (tc > 0)[:, None], np.zeros(len(X))
    ts = np.maximum(X[:, nc:] @ coef[nc:], 0.0)
    t = combine(tc, ts, gamma)
    safe_t = np.where(t > 0, t, 1.0)
    a, b = tc / safe_t, ts / safe_t
    with np.errstate(divide="ignore", invalid="ignore"):
        d_tc = np.where(t > 0, a ** (gamma - 1), 0.0)
        d_ts = np.where(t > 0, b ** (gamma - 1), 0.0)
        la = np.where(a > 0, a**gamma * np.log(np.where(a > 0, a, 1.0)), 0.0)
        lb = np.where(b > 0, b**gamma * np.log(np.where(b > 0, b, 1.0)), 0.0)
    d_coef = np.hstack([X[:, :nc] * d_tc[:, None], X[:, nc:] * d_ts[:, None]])
    return d_coef, t * (la + lb) / gamma


class OverlapRegressor(RegressorMixin, BaseEstimator):
    """Non-negative compute + communication model with fitted overlap γ.

    Parameters
    ----------
    n_compute : int or None
        The first `n_compute` columns are compute terms, the rest communication; None: all
        compute (a plain non-negative linear model, γ unused).
    gamma_bounds : (float, float)
        Bounds of the overlap exponent γ (Pollux: [1, 10]).
    loss, f_scale : str, float
        scipy `least_squares` robust loss and its scale (in relative error).
    comm_weight : float
        Weight of the exposed-communication residuals against step-time residuals.
    fixed : tuple of (column, value)
        Coefficients held at a value (a link no measurement crossed: declared speed, 1.0).
    prior : tuple of (column, kind)
        Weak priors, one residual row each (Pollux fits with priors, OSDI'21 §3.2): kind "zero"
        pulls a seconds-valued term towards 0, in units of the share of the median step it
        explains at its largest; kind "declared" pulls a factor on a declared speed towards 1.0.
        With few measured counts many coefficient sets fit exactly; the prior picks the physical
        one (compute explains what communication at declared speed does not) instead of letting
        an unidentified term (host contention, a sync constant) soak up the step time and then
        explode when extrapolated. With hundreds of rows it is negligible.
    prior_weight : float
        Weight of each prior row against one relative step-time residual.
    """

    def __init__(self, n_compute=None, gamma_bounds=(1.0, 10.0), loss="soft_l1", f_scale=0.1,
                 comm_weight=0.5, fixed=(), prior=(), prior_weight=0.05):
        self.n_compute = n_compute
        self.gamma_bounds = gamma_bounds
        self.loss = loss
        self.f_scale = f_scale
        self.comm_weight = comm_weight
        self.fixed = fixed
        self.prior = prior
        self.prior_weight = prior_weight

    def _split(self, n_features: int) -> int:
        nc = n_features if self.n_compute is None else int(self.n_compute)
        if not 0 <= nc <= n_features:
            raise ValueError(f"n_compute={self.n_compute} outside 0..{n_features}")
        return nc

    def _predict_with(self, X, coef, gamma):
        nc = self._split(X.shape[1])
        tc = X[:, :nc] @ coef[:nc]
        if nc == X.shape[1]:
            return np.maximum(tc, 0.0)
        return combine(tc, X[:, nc:] @ coef[nc:], gamma)

    def fit(self, X, y, sample_weight=None, comm=None, probe_X=None, probe_y=None, init=None):
        """Fit coefficients and γ. `init` = (coef, gamma) warm-starts (bootstrap refits)."""
        from scipy.optimize import least_squares, nnls

        X, y = _validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        n, p = X.shape
        nc = self._split(p)
        if sample_weight is None:
            w = np.ones(n)
        else:
            from sklearn.utils.validation import _check_sample_weight

            w = _check_sample_weight(sample_weight, X, dtype=np.float64)
            if (w < 0).any():
                raise ValueError("negative sample weights are not allowed")
            if not (w > 0).any():
                raise ValueError("all sample weights are zero")
        scale = np.maximum(np.abs(y), max(1e-12, 1e-9 * float(np.max(np.abs(y)))) if n else 1.0)
        fixed = dict(self.fixed)
        free = np.array([j for j in range(p) if j not in fixed], dtype=int)
        base = np.zeros(p)
        for j, v in fixed.items():
            base[j] = v
        has_comm = nc < p
        lo_g, hi_g = (float(self.gamma_bounds[0]), float(self.gamma_bounds[1])) if has_comm else (1.0, 1.0)

        if init is not None:
            coef0, g0 = np.asarray(init[0], float), float(init[1])
        else:
            # Additive (γ = 1) non-negative least squares on relative errors: a sound start.
            sw = np.sqrt(w) / scale
            target = y - X @ base
            theta, _ = nnls(X[:, free] * sw[:, None], target * sw) if free.size else (np.zeros(0), 0.0)
            coef0 = base.copy()
            coef0[free] = theta
            g0 = min(max(1.5, lo_g), hi_g)

        comm_rows = np.zeros(n, bool)
        if comm is not None and has_comm:
            comm = np.asarray(comm, float)
            comm_rows = np.isfinite(comm)
        probe = probe_X is not None and len(probe_X) and has_comm
        if probe:
            probe_X = np.asarray(probe_X, float)
            probe_y = np.asarray(probe_y, float)

        sqrt_w = np.sqrt(w)

        # Prior rows: (θ_j - mean_j) / scale_j · prior_weight, for free columns only.
        prior_cols, prior_mean, prior_scale = [], [], []
        y_typical = float(np.median(np.abs(y))) if n else 1.0
        for j, kind in self.prior:
            if j in fixed or not 0 <= j < p:
                continue
            if kind == "zero":
                reach = float(np.max(np.abs(X[:, j]))) if n else 0.0
                if reach <= 0 or y_typical <= 0:
                    continue
                prior_cols.append(j), prior_mean.append(0.0), prior_scale.append(y_typical / reach)
            elif kind == "declared":
                prior_cols.append(j), prior_mean.append(1.0), prior_scale.append(1.0)
            else:
                raise ValueError(f"unknown prior kind {kind!r}")
        free_pos = {j: i for i, j in enumerate(free)}
        prior_pos = np.array([free_pos[j] for j in prior_cols], dtype=int)
        prior_mean = np.array(prior_mean, float)
        prior_k = float(self.prior_weight) / np.array(prior_scale, float)

        def unpack(v):
            coef = base.copy()
            coef[free] = v[: free.size]
            return coef, (v[free.size] if has_comm and hi_g > lo_g else lo_g)

        def residuals(v):
            coef, g = unpack(v)
            t = self._predict_with(X, coef, g)
            parts = [sqrt_w * (t - y) / scale]
            if comm_rows.any():
                tc = X[comm_rows, :nc] @ coef[:nc]
                parts.append(self.comm_weight * sqrt_w[comm_rows] * ((t[comm_rows] - tc) - comm[comm_rows]) / scale[comm_rows])
            if probe:
                ts = probe_X[:, nc:] @ coef[nc:]
                parts.append((ts - probe_y) / probe_y)
            if prior_pos.size:
                parts.append(prior_k * (v[prior_pos] - prior_mean))
            return np.concatenate(parts)

        def jacobian(v):
            coef, g = unpack(v)
            d_coef, d_g = gradient(X, coef, g, nc)
            rows = [(sqrt_w / scale)[:, None] * np.column_stack([d_coef[:, free], d_g])]
            if comm_rows.any():
                k = (self.comm_weight * sqrt_w / scale)[comm_rows][:, None]
                dc = d_coef[comm_rows].copy()
                dc[:, :nc] -= X[comm_rows, :nc]
                rows.append(k * np.column_stack([dc[:, free], d_g[comm_rows]]))
            if probe:
                dp = np.zeros_like(probe_X)
                dp[:, nc:] = probe_X[:, nc:] / probe_y[:, None]
                rows.append(np.column_stack([dp[:, free], np.zeros(len(probe_y))]))
            if prior_pos.size:
                dprior = np.zeros((prior_pos.size, free.size + 1))
                dprior[np.arange(prior_pos.size), prior_pos] = prior_k
                rows.append(dprior)
            J = np.vstack(rows)
            return J if (has_comm and hi_g > lo_g) else J[:, :-1]

        v0 = list(np.maximum(coef0[free], 0.0))
        lo = [0.0] * free.size
        hi = [np.inf] * free.size
        if has_comm and hi_g > lo_g:
            v0.append(min(max(g0, lo_g + 1e-9), hi_g - 1e-9))
            lo.append(lo_g)
            hi.append(hi_g)
        if len(v0) == 0:
            coef, gamma = base, lo_g
        else:
            sol = least_squares(residuals, np.array(v0), jac=jacobian, bounds=(np.array(lo), np.array(hi)),
                                loss=self.loss, f_scale=self.f_scale, max_nfev=200 * len(v0))
            coef, gamma = unpack(sol.x)
        self.coef_ = np.asarray(coef, float)
        self.gamma_ = float(gamma)
        return self

    def predict(self, X):
        check_is_fitted(self, "coef_")
        X = _validate_data(self, X, reset=False, dtype=np.float64)
        return self._predict_with(X, self.coef_, self.gamma_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # physical model: bounded, not a general learner
        return tags

    def _more_tags(self):  # scikit-learn < 1.6
        return {"poor_score": True}
