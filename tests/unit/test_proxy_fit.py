"""Runs advisor calibrate timed on a proxy (calibration.proxy_layers of the model's layers) are fitted as
that proxy, so the factors they pin carry to the declared model: synthetic recovery of a known compute
factor (synthetic step times, named so), against the proxy's FLOPs computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
from test_layouts import RENTAL

from advisor.calibrate.plan import params_of_transformer
from advisor.calibration_data import Calibration
from advisor.measurements import from_calibration, measured_workload
from advisor.scaling.features import compute_seconds
from advisor.scaling.model import ScalingModel
from advisor.spec import workload_from_dict

LAYERS, H, S, V = 32, 4096, 8192, 128256  # rental-ethernet's model
FACTOR = 2.5  # synthetic: the proxy runs at 1/2.5 of the peak (MFU 40%)


def _workload():
    data = {**RENTAL, "parallelism": {"strategy": "fsdp"}, "calibration": {"gpus": [1], "proxy_layers": 2}}
    return workload_from_dict(data)


def _proxy_seconds(w, gpus, batch):
    """The 2-layer proxy's compute at peak, by hand: PaLM's (6·P + 12·L·H·T)·T FLOPs a sample with the
    proxy's own parameters (embedding and tied head at any depth), at the catalog peak."""
    p = params_of_transformer(2, H, S, V)
    flops = (6 * p + 12 * 2 * H * S) * S * batch / gpus
    return flops / w.peak_flops


def _calibration(w, steps: dict[int, float], proxy_layers=2):
    runs = [{"gpus": g, "nodes": 1, "step_seconds": [s], "global_batch": int(w.global_batch(np.array([g]))[0])}
            for g, s in steps.items()]
    return Calibration.model_validate({
        "schema": 1, "workload": w.name,
        "provenance": {"source": "measured", "created": "2026-12-02T00:00:00Z"},
        "environment": {"strategy": "fsdp", "proxy_layers": proxy_layers, "model_layers": LAYERS},
        "setup": {"device": "cuda", "model.layers": LAYERS, "calibration.proxy_layers": proxy_layers},
        "runs": runs})


def test_the_proxy_workload_is_what_the_runs_are_fitted_as():
    w = _workload()
    g, b = np.array([1.0]), w.global_batch(np.array([1.0]))
    m = from_calibration(_calibration(w, {1: 1.0}), w)
    assert m.proxy_layers == 2
    fitted_as = measured_workload(w, m)
    assert fitted_as.model.layers == 2 and fitted_as.model.params == params_of_transformer(2, H, S, V)
    assert compute_seconds(fitted_as, g, b)[0] == pytest.approx(_proxy_seconds(w, 1.0, b[0]), rel=1e-9)


def test_a_compute_factor_measured_on_the_proxy_carries_to_the_declared_model():
    """Synthetic recovery: one-GPU proxy steps at FACTOR x the proxy's compute; the declared model is
    then predicted at the same MFU (1/FACTOR), not at the proxy's step (which read as MFU far above 100%)."""
    w = _workload()
    b = float(w.global_batch(np.array([1.0]))[0])
    cal = _calibration(w, {1: FACTOR * _proxy_seconds(w, 1.0, b)})
    model = ScalingModel(w, from_calibration(cal, w), n_bootstrap=4)
    p = model.predict(np.array([1.0]), np.array([1.0]))
    assert p.mfu[0] == pytest.approx(1 / FACTOR, rel=0.1)
    full = compute_seconds(w, np.array([1.0]), np.array([b]))[0]
    assert p.step_seconds[0] == pytest.approx(FACTOR * full, rel=0.1)
