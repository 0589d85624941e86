"""Posterior draws and the noise model behind the 90% intervals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import t

from advisor.scaling.estimator import OverlapRegressor
from advisor.scaling.intervals import PRIOR_WEIGHT, NoiseModel, draw_spread, interval, posterior_draws
from advisor.step_model import Z90

NOISE = 0.05


def test_few_residuals_are_pooled_with_the_prior_noise():
    r = np.array([0.01, -0.02])
    noise = NoiseModel.from_residuals(r, widening=0.0, prior_noise=NOISE)
    pooled = np.sqrt((np.sum(r**2) + PRIOR_WEIGHT * NOISE**2) / (r.size + PRIOR_WEIGHT))
    expected = t.ppf(0.95, r.size + PRIOR_WEIGHT - 1) * pooled
    assert noise.upper == pytest.approx(expected, rel=2e-4) and noise.lower == pytest.approx(-expected, rel=2e-4)
    assert noise.prior_dominated


def test_many_residuals_use_their_own_quantiles():
    r = np.linspace(-0.3, 0.1, 401)
    noise = NoiseModel.from_residuals(r, widening=0.0, prior_noise=NOISE)
    assert noise.lower == pytest.approx(np.quantile(r, 0.05)) and noise.upper == pytest.approx(np.quantile(r, 0.95))


def test_interval_widens_with_distance_past_the_data():
    noise = NoiseModel(-0.1, 0.1, widening=0.5, n_residuals=100)
    med = np.ones(3)
    lo, hi = interval(med, np.full(3, 0.2), noise, distance=np.array([0.5, 1.0, 4.0]))
    assert hi[0] == pytest.approx(np.exp(np.hypot(0.2, 0.1))) and hi[1] == hi[0]  # inside the data
    assert hi[2] == pytest.approx(np.exp(np.hypot(0.2, 0.1 * (1 + 0.5 * 2))))  # two doublings past it
    assert lo[2] == pytest.approx(1 / hi[2])


def test_posterior_draws_respect_bounds_and_follow_the_prior_without_data():
    """A prior-only estimator: a log-normal prior on column 1 (bounded at 1), a half-normal on column 0."""
    est = OverlapRegressor(n_compute=2, lower=((1, 1.0),), prior=((0, "lin", 0.0, 0.2), (1, "log", 1.0, 0.5)))
    est.set_prior_state(2)
    assert est.coef_ == pytest.approx([0.0, np.e])
    d = posterior_draws(est, 4000, seed=1)
    assert (d.coefs[:, 1] >= 1.0).all() and (d.coefs[:, 0] >= 0).all()
    logs = np.log(d.coefs[:, 1])
    assert np.median(logs) == pytest.approx(1.0, abs=0.05)
    assert np.quantile(logs, 0.95) == pytest.approx(1.0 + Z90 * 0.5, abs=0.1)  # the prior's spread, log-normal
    # The spread of a step of pure column-1 time is the prior's: z x sd of its log.
    assert draw_spread(np.array([[0.0, 1.0]]), 2, d)[0] == pytest.approx(Z90 * np.std(logs), rel=1e-6)


def test_interval_stays_finite_and_bounded_with_three_counts():
    """Fit on NVIDIA's published BERT-Large runs at 1, 4 and 8 GPUs, predict 32 (4x past the data).

    Independent expectation: the measured 32-GPU step (the same file's row) lies inside, and the
    90% band is no wider than a factor of 3 end to end: the published rows agree to a few
    percent, so a band of orders of magnitude (as a linearised bootstrap once produced, 0.003-134 s
    around 0.6 s) says nothing.
    """
    from advisor.calibration_data import load_calibration
    from advisor.measurements import from_calibration
    from advisor.scaling.model import ScalingModel
    from advisor.spec import load_workload
    from conftest import ROOT

    w = load_workload(ROOT / "workloads" / "bert-large.toml")
    cal = load_calibration(ROOT / "calibrations" / "bert-large_published_nvidia_dle.toml", "bert-large")
    m = from_calibration(cal, w)
    model = ScalingModel(w, m.subset(m.gpus <= 8))
    at32 = m.subset(m.gpus == 32)
    _med, lo, hi = model.step_time(at32.gpus[:1], at32.nodes[:1])
    assert np.isfinite(lo).all() and np.isfinite(hi).all()
    assert hi[0] / lo[0] < 3.0
    assert lo[0] <= at32.step[0] <= hi[0]


def test_a_bounded_walk_takes_the_conditional_mode_where_one_is_given():
    """Two parameters, the second (a γ-like one) at its bound 1 with sd 1: its walk up goes to
    1 + z·1 with the first following its regression (gain 0.5: 2 + 0.5·z), unless `conditional`
    answers for it, and then to what conditional returns; the free axes are unchanged."""
    from advisor.scaling.intervals import sigma_points

    v = np.array([2.0, 1.0])
    cov = np.array([[1.0, 0.5], [0.5, 1.0]])
    logs, at_bound, lo = np.zeros(2, bool), np.array([False, True]), np.array([0.0, 1.0])
    plain = sigma_points(v, cov, logs, at_bound, lo)
    assert np.allclose(plain[-1], [2.0 + 0.5 * Z90, 1.0 + Z90])
    mode = sigma_points(v, cov, logs, at_bound, lo, lambda p, col: np.array([2.1, p[col]]) if col == 1 else None)
    assert np.allclose(mode[-1], [2.1, 1.0 + Z90])
    assert np.allclose(mode[:-1], plain[:-1])


def test_a_log_prior_factor_walks_down_in_log_space_not_to_the_peak():
    """Prior alone, BERT-Large on one A100 (other-transformer class, ln(1/MFU) sd 0.37): the 90% band's
    low end is the log-normal's, median x exp(-z·sd) with the noise in quadrature, not MFU 100% (the
    linear step v - z·sd crossed the bound and held the low end at the peak)."""
    from advisor.scaling.features import compute_seconds
    from advisor.scaling.model import build_model
    from advisor.scaling.priors import LEARNED, MFU_CLASSES
    from advisor.spec import load_workload
    from conftest import ROOT

    w = load_workload(ROOT / "benchmarks" / "workloads" / "bert-large-tf2-dgxa100-seq128.toml")
    model = build_model(w, n_bootstrap=4)
    g = np.array([1.0])
    p = model.predict(g, np.array([1.0]))
    med, low, high = p.step_seconds[0], p.step_low[0], p.step_high[0]
    peak = compute_seconds(w, g, w.global_batch(g))[0]
    assert low > 1.2 * peak  # the band's fast end is not the GPU's peak
    sd = LEARNED.mfu.sds[MFU_CLASSES.index("transformer")]
    noise = model.record.noise.upper
    expect = np.hypot(Z90 * sd, noise)
    assert np.log(med / low) == pytest.approx(expect, rel=0.15)
    assert np.log(high / med) == pytest.approx(expect, rel=0.15)  # symmetric in log, as the prior is


def test_only_the_error_above_the_in_sample_scatter_grows_with_distance():
    """Out-of-sample residuals at ±0.5 and in-sample ones at ±0.3 (40 each, synthetic): at the measured
    counts the band is the out-of-sample quantile; at 4x (widening 0.5: factor 2) only the variance above
    the scatter grows, sqrt(0.3² + (0.5² - 0.3²)·2²) = sqrt(0.09 + 0.64) = 0.854 (by hand), not 0.5·2."""
    r = np.r_[np.full(20, -0.5), np.full(20, 0.5)]
    ins = np.r_[np.full(20, -0.3), np.full(20, 0.3)]
    noise = NoiseModel.from_residuals(r, 0.5, 0.05, ins)
    assert (noise.floor_lower, noise.floor_upper) == pytest.approx((-0.3, 0.3))
    low, high = interval(np.ones(2), np.zeros(2), noise, np.array([1.0, 4.0]))
    assert np.log(high) == pytest.approx([0.5, np.sqrt(0.09 + 0.16 * 4)])
    assert np.log(low) == pytest.approx([-0.5, -np.sqrt(0.09 + 0.16 * 4)])
    # with few in-sample residuals nothing is held: the whole quantile grows, as before
    few = NoiseModel.from_residuals(r, 0.5, 0.05, ins[:5])
    assert np.log(interval(np.ones(1), np.zeros(1), few, np.array([4.0]))[1]) == pytest.approx([1.0])
    # an in-sample scatter wider than the held-out one is clipped to it: nothing grows, nothing shrinks
    wide = NoiseModel.from_residuals(r, 0.5, 0.05, 2 * ins / 0.3 * 0.5)
    assert np.log(interval(np.ones(1), np.zeros(1), wide, np.array([4.0]))[1]) == pytest.approx([0.5])
