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


def test_exposed_columns_add_outside_the_overlap_at_their_sources_coefficient():
    """T = (Tc^γ + Ts^γ)^(1/γ) + Te by hand: Tc = 2·θ0 = 3, Ts = 4·θ1 = 4, Te = 1·θ1 (tied to column 1)."""
    from advisor.scaling.estimator import evaluate

    X = np.array([[2.0, 4.0, 1.0]])
    coef = np.array([1.5, 1.0, 99.0])  # the tied column's own entry is ignored
    assert evaluate(X, coef, np.array([2.0]), n_compute=1, n_exposed=1, tied=((2, 1),))[0, 0] == pytest.approx(5 + 1)
    assert evaluate(X, coef, np.array([1.0]), n_compute=1, n_exposed=1, tied=((2, 1),))[0, 0] == pytest.approx(8)


def test_gradient_with_exposed_and_tied_columns_matches_finite_differences():
    from advisor.scaling.estimator import evaluate, gradient

    rng = np.random.default_rng(7)
    X = rng.uniform(0.1, 2.0, (6, 5))
    coef, gamma, tied = np.array([0.7, 0.3, 0.5, 0.0, 0.0]), 2.3, ((3, 0), (4, 2))

    def t(c, g):
        return evaluate(X, c, np.array([g]), n_compute=2, n_exposed=2, tied=tied)[:, 0]

    d_coef, d_g = gradient(X, coef, gamma, 2, 2, tied)
    h = 1e-6
    for j in (0, 1, 2):
        step = np.zeros(5)
        step[j] = h
        assert d_coef[:, j] == pytest.approx((t(coef + step, gamma) - t(coef - step, gamma)) / (2 * h), rel=1e-5)
    assert (d_coef[:, 3:] == 0).all()  # tied columns are not parameters of their own
    assert d_g == pytest.approx((t(coef, gamma + h) - t(coef, gamma - h)) / (2 * h), rel=1e-5)


def test_fit_recovers_synthetic_coefficients_with_an_exposed_tied_block():
    """Synthetic recovery: a communication column that is part hidden, part exposed, one coefficient."""
    rng = np.random.default_rng(8)
    X, coef = _synthetic(rng)
    exposed = 0.5 * X[:, 3:4]  # half of the last column's traffic waits in the open
    Xe = np.hstack([X[:, :3], X[:, 3:4] - exposed, exposed])
    est = OverlapRegressor(n_compute=2, n_exposed=1, tied=((4, 3),))
    y = est.set_params().evaluate(Xe, np.append(coef, 0.0), np.array([2.5]))[:, 0]
    est.fit(Xe, y * rng.lognormal(0, 0.01, len(y)))
    assert est.gamma_ == pytest.approx(2.5, rel=0.15)
    assert np.allclose(est.coef_[:4], coef, rtol=0.1, atol=0.01) and est.coef_[4] == est.coef_[3]


def test_the_start_gives_each_free_coefficient_its_own_least_squares_value():
    """y = 2·x0 + 5·x1 + 0.5·x2 exactly (all compute, relative residuals): the additive NNLS start is
    (2, 5, 0.5) itself, not the first value copied into every coefficient (nnls returns the vector)."""
    from advisor.scaling.estimator import OverlapModel, _start

    rng = np.random.default_rng(3)
    X = rng.uniform(0.5, 2.0, (30, 3))
    y = X @ np.array([2.0, 5.0, 0.5])
    est = OverlapModel(n_compute=None)
    w = np.ones(len(y))
    start = _start(est._problem(X, y, w, None, None, None), est, w, None)
    assert np.allclose(start, [2.0, 5.0, 0.5], rtol=1e-6)


def test_the_conditional_mode_holds_one_parameter_and_refits_the_rest():
    """At the MAP's own γ the conditional mode is the MAP; with γ held at another value the other
    coefficients re-solve to fit the rows again (a walk that keeps γ's value but not its fit does not)."""
    from advisor.scaling.estimator import OverlapModel

    rng = np.random.default_rng(0)
    X, coef = _synthetic(rng)
    y = OverlapModel(n_compute=2)._predict_with(X, coef, 1.3)
    est = OverlapModel(n_compute=2, prior=(("gamma", "lin", 1.1, 1.0),)).fit(X, y)
    v = np.append(est.coef_[est.free_], est.gamma_)
    assert np.allclose(est.conditional(v, v.size - 1), v, rtol=1e-4, atol=1e-6)
    moved = v.copy()
    moved[-1] = 3.0
    mode = est.conditional(moved, v.size - 1)
    assert mode[-1] == 3.0
    miss = [np.abs(est._predict_with(X, p[:-1], p[-1]) / y - 1).mean() for p in (moved, mode)]
    assert miss[1] < miss[0] / 2
