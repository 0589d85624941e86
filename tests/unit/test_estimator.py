"""The regression core is a real scikit-learn estimator, and it recovers known parameters."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from advisor.scaling.estimator import OverlapRegressor, combine


@parametrize_with_checks([OverlapRegressor(), OverlapRegressor(n_compute=1)])
def test_sklearn_contract(estimator, check):
    check(estimator)


def test_combine_is_the_gamma_norm():
    tc, ts = np.array([3.0, 0.0, 2.0]), np.array([4.0, 5.0, 0.0])
    assert np.allclose(combine(tc, ts, 1.0), tc + ts)
    assert np.allclose(combine(tc, ts, 2.0), np.hypot(tc, ts))
    assert np.allclose(combine(tc, ts, 60.0), np.maximum(tc, ts), rtol=1e-2)


def _synthetic(rng, n=80):
    X = np.column_stack([np.ones(n), rng.uniform(0.1, 2.0, n), rng.uniform(0.0, 1.5, n), rng.uniform(0.0, 3.0, n)])
    coef = np.array([0.05, 0.8, 0.3, 0.2])
    return X, coef


def test_fit_recovers_synthetic_coefficients_and_overlap():
    rng = np.random.default_rng(3)
    X, coef = _synthetic(rng)
    gamma = 2.5
    y = combine(X[:, :2] @ coef[:2], X[:, 2:] @ coef[2:], gamma) * rng.lognormal(0, 0.01, len(X))
    est = OverlapRegressor(n_compute=2).fit(X, y)
    assert est.gamma_ == pytest.approx(gamma, rel=0.1)
    assert np.allclose(est.coef_, coef, rtol=0.1, atol=0.01)


def test_fit_recovers_synthetic_comm_from_exposed_comm_target():
    """With γ = 1 and the exposed-communication target, compute and comm split as generated."""
    rng = np.random.default_rng(4)
    X, coef = _synthetic(rng)
    tc, ts = X[:, :2] @ coef[:2], X[:, 2:] @ coef[2:]
    est = OverlapRegressor(n_compute=2, gamma_bounds=(1.0, 1.0)).fit(X, tc + ts, comm=ts)
    assert np.allclose(est.coef_, coef, rtol=1e-3, atol=1e-4)


def test_fixed_coefficients_stay_fixed_and_coefficients_stay_non_negative():
    rng = np.random.default_rng(5)
    X, _coef = _synthetic(rng)
    y = X @ np.array([0.05, 0.8, 0.0, 0.0]) - 0.3 * X[:, 3]  # a negative true term cannot be fitted
    y = np.maximum(y, 0.01)
    est = OverlapRegressor(n_compute=2, fixed=((2, 0.7),)).fit(X, y)
    assert est.coef_[2] == 0.7
    assert (est.coef_ >= 0).all()


def test_probes_pin_the_communication_coefficients():
    """Step times alone cannot split two collinear comm columns; probes of each can."""
    rng = np.random.default_rng(6)
    n = 40
    a = rng.uniform(0.5, 1.5, n)
    X = np.column_stack([np.ones(n), a, a])  # two comm columns, identical in the step data
    y = 0.2 + 0.3 * a + 0.1 * a
    probe_X = np.array([[0, 1.0, 0], [0, 2.0, 0], [0, 0, 1.0], [0, 0, 2.0]])
    probe_y = np.array([0.3, 0.6, 0.1, 0.2])
    est = OverlapRegressor(n_compute=1, gamma_bounds=(1.0, 1.0)).fit(X, y, probe_X=probe_X, probe_y=probe_y)
    assert est.coef_[1:] == pytest.approx([0.3, 0.1], rel=1e-3)
