"""The drift past the data (`Priors.drift`, `NoiseModel.drift_factor`): ln(step) gains `drift` per
doubling of the distance past the measured counts, and nothing at or below them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from advisor.scaling.intervals import NoiseModel


def test_drift_factor_by_hand():
    """exp(drift · log2 distance), distance floored at 1: 0.5 and 1 give 1, 2 gives e^0.01, 16 e^0.04."""
    noise = NoiseModel(-0.1, 0.1, widening=0.5, n_residuals=10, drift=0.01)
    got = noise.drift_factor(np.array([0.5, 1.0, 2.0, 16.0]))
    assert got == pytest.approx([1.0, 1.0, np.exp(0.01), np.exp(0.04)])
    assert NoiseModel(-0.1, 0.1, widening=0.5, n_residuals=10).drift_factor(np.array([64.0])) == pytest.approx([1.0])


def _bert(drift):
    from advisor.calibration_data import load_calibration
    from advisor.measurements import from_calibration
    from advisor.scaling.model import ScalingModel
    from advisor.scaling.priors import LEARNED
    from advisor.spec import load_workload
    from conftest import ROOT

    w = load_workload(ROOT / "workloads" / "bert-large.toml")
    cal = load_calibration(ROOT / "calibrations" / "bert-large_published_nvidia_dle.toml", "bert-large")
    m = from_calibration(cal, w)
    fit = m.subset(m.gpus <= 8)
    return ScalingModel(w, fit, priors=replace(LEARNED, drift=drift)), fit


def test_drift_moves_only_the_median_past_the_data():
    """Fitted on NVIDIA's BERT-Large rows at 1-8 GPUs: at the measured counts the median is the same
    with and without drift; at 32 and 128 GPUs (4x and 16x past 8, on 4 and 16 nodes: the node
    distance is at most the GPU distance here) it is exp(2 · 0.02) and exp(4 · 0.02) times the
    drift-free median, and the band moves with it (its ends stay around the median)."""
    plain, fit = _bert(0.0)
    drifted, _ = _bert(0.02)
    counts = np.unique(fit.gpus)
    a, b = plain.step_time(counts), drifted.step_time(counts)
    assert b[0] == pytest.approx(a[0], rel=1e-9)
    far = np.array([32.0, 128.0])
    a, b = plain.step_time(far), drifted.step_time(far)
    assert b[0] / a[0] == pytest.approx(np.exp(0.02 * np.array([2.0, 4.0])), rel=1e-6)
    assert np.all(b[1] <= b[0]) and np.all(b[0] <= b[2])
    assert b[2] / a[2] == pytest.approx(np.exp(0.02 * np.array([2.0, 4.0])), rel=1e-6)


def test_no_measurement_no_drift():
    """The prior alone has no data to be past: drift changes nothing (distance is 1 everywhere)."""
    from advisor.scaling.model import ScalingModel
    from advisor.scaling.priors import LEARNED
    from advisor.spec import load_workload
    from conftest import ROOT

    w = load_workload(ROOT / "workloads" / "bert-large.toml")
    g = np.array([1.0, 64.0, 1024.0])
    a = ScalingModel(w, None, priors=LEARNED).step_time(g)
    b = ScalingModel(w, None, priors=replace(LEARNED, drift=0.05)).step_time(g)
    assert b[0] == pytest.approx(a[0], rel=1e-12)
