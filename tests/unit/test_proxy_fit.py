"""Runs advisor calibrate timed on a proxy (calibration.proxy_layers of the model's layers) are fitted as
that proxy, so the factors they pin carry to the declared model: synthetic recovery of a known compute
factor (synthetic step times, named so), against the proxy's FLOPs computed by hand."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
import tomli_w
from test_layouts import RENTAL

from advisor.calibrate.plan import params_of_transformer
from advisor.calibration_data import Calibration
from advisor.measurements import from_calibration, measured_workload
from advisor.scaling.features import compute_seconds
from advisor.scaling.model import ScalingModel
from advisor.spec import workload_from_dict
from cli_inprocess import invoke
from conftest import ROOT, WORKLOADS

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


def test_the_naive_guess_and_the_ceiling_hold_the_declared_models_throughput_not_the_proxys():
    """The naive linear guess holds the per-GPU throughput of the largest measured count, as the declared
    model runs it: at 4 GPUs, twice the model's own throughput at 2 GPUs (where the fit is anchored to
    the measurement). The 2-layer proxy's samples/s (~10x the 32-layer model's) was held before."""
    w = _workload()
    b = {g: float(w.global_batch(np.array([float(g)]))[0]) for g in (1, 2)}
    cal = _calibration(w, {1: FACTOR * _proxy_seconds(w, 1.0, b[1]), 2: 1.1 * FACTOR * _proxy_seconds(w, 2.0, b[2])})
    model = ScalingModel(w, from_calibration(cal, w), n_bootstrap=4)
    p = model.predict(np.array([2.0, 4.0]), np.array([1.0, 1.0]))
    assert p.naive_throughput[1] == pytest.approx(2 * p.throughput[0], rel=1e-6)
    # the ceiling (no per-GPU throughput above the best measured) binds in the declared model's units: a
    # step never shorter than the 2-GPU rate allows, and far longer than the proxy's own step
    assert p.step_seconds[1] >= p.global_batch[1] / (2 * p.throughput[0] / 2 * 4) * (1 - 0.05)
    assert p.step_seconds[0] > 5 * 1.1 * FACTOR * _proxy_seconds(w, 2.0, b[2])


def test_a_csv_beside_a_proxy_timed_calibration_is_refused_naming_the_csv(tmp_path):
    """One fit reads one model: a CSV's steps are the declared model's, a 2-layer proxy's runs the proxy's;
    fitted together the CSV's rows were read as the proxy's (at 16x its FLOPs per step). Refused, exit 2,
    one line naming the CSV; the same CSV beside a full-depth calibration is read."""
    cal = tomllib.loads((ROOT / "calibrations" / "tiny-cpu_cpu_2026-11-30.toml").read_text())
    csv = tmp_path / "m.csv"
    csv.write_text("gpus,step_seconds,global_batch\n1,0.2,32\n2,0.12,32\n")
    for layers, refused in ((2, True), (4, False)):
        cal["environment"]["proxy_layers"] = layers
        cal["setup"] = {"device": "cpu", "model.layers": 4, "calibration.proxy_layers": layers}
        path = tmp_path / f"cal{layers}.toml"
        path.write_text(tomli_w.dumps(cal))
        code, _out, err = invoke("predict", WORKLOADS / "tiny-cpu.toml", "--calibration", path, "--measurements", csv,
                                 "--gpus", "4")
        if refused:
            assert code == 2 and "Traceback" not in err, err
            assert err.strip().count("\n") == 0 and err.startswith(f"{csv}: ") and "2-layer proxy" in err, err
        else:
            assert code == 0, err


def test_a_backtest_of_proxy_runs_compares_them_as_the_proxy_ran():
    """Synthetic proxy steps (FACTOR x the proxy's compute, 5% slower per doubling, named so) at 1, 2 and 4
    GPUs; a backtest fitted on 1-2 predicts the held-out 4-GPU step of the proxy, within 10% of the
    synthetic value and inside its band. It compared the declared 32-layer model's prediction with the
    2-layer proxy's measured step before (error +805%)."""
    from advisor.scaling.model import backtest

    w = _workload()
    steps = {}
    for g in (1, 2, 4):
        b = float(w.global_batch(np.array([float(g)]))[0])
        steps[g] = FACTOR * _proxy_seconds(w, float(g), b) * (1 + 0.05 * np.log2(g))
    out = backtest(w, from_calibration(_calibration(w, steps), w), 2, n_bootstrap=4)
    (point,) = out["points"]
    assert point["measured"] == pytest.approx(steps[4], rel=1e-9)
    assert point["predicted"] == pytest.approx(steps[4], rel=0.10)
    assert point["low"] <= point["predicted"] <= point["high"] and point["inside"]
    assert out["mape"] < 10 and out["naive_linear_mape"] < 10
