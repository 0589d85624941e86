"""model.mean_seq_len: the tokens a sample computes (padding-free or length-binned loaders) price the FLOPs
and the per-token traffic, against hand computations; memory stays at seq_len; advisor calibrate's
full-length proxy runs are fitted at seq_len; bad values are refused naming the field."""

from __future__ import annotations

import numpy as np
import pytest
from test_layouts import RENTAL, spec

from advisor.measurements import from_calibration, measured_workload
from advisor.scaling import features as F
from advisor.spec import workload_from_dict
from advisor.topology import layouts as L
from cli_inprocess import run_in_process

P, LAYERS, H, S, V = 8.0e9, 32, 4096, 8192, 128256  # rental-ethernet's model


def _with_mean(mean, parallelism=None):
    return spec(parallelism or {"strategy": "fsdp"}, model={"mean_seq_len": mean})


def test_flops_per_sample_count_the_tokens_computed():
    for t in (S, 3000.0):
        w = _with_mean(t)
        # PaLM App. B: (6·P + 12·L·H·T)·T, T the tokens the sample computes
        assert w.model.training_flops_per_sample == pytest.approx((6 * P + 12 * LAYERS * H * t) * t)
    full, half = spec({"strategy": "fsdp"}), _with_mean(S / 2)
    g, b = np.array([8.0]), np.array([64.0])
    ratio = F.compute_seconds(half, g, b)[0] / F.compute_seconds(full, g, b)[0]
    # 6P + 12LHT halves in T and loses another share in the attention term
    expect = (6 * P + 12 * LAYERS * H * S / 2) * (S / 2) / ((6 * P + 12 * LAYERS * H * S) * S)
    assert ratio == pytest.approx(expect)


def test_tensor_parallel_traffic_moves_the_tokens_computed_and_memory_stays_at_seq_len():
    par = {"strategy": "fsdp", "tensor_parallel_degree": 4}
    full, short = spec(par), _with_mean(2048.0, par)
    tp = [sum(t.bus_bytes()[0] for t in L.build(w, [8]).traffic(w) if t.name.startswith("tp")) for w in (full, short)]
    assert tp[1] / tp[0] == pytest.approx(2048 / S)
    # the longest micro-batch sets the activation peak: memory is the same
    assert L.build(short, [8]).footprint(short).total[0] == pytest.approx(L.build(full, [8]).footprint(full).total[0])


def test_default_is_seq_len():
    w = spec({"strategy": "fsdp"})
    assert w.model.computed_seq_len == S and w.model.mean_seq_len is None
    assert _with_mean(float(S)).model.training_flops_per_sample == pytest.approx(w.model.training_flops_per_sample)


def _cal(setup: dict | None, source="measured"):
    from advisor.calibration_data import Calibration

    data = {"schema": 1, "workload": "rental-ethernet",
            "provenance": {"source": source, "created": "2026-12-02T00:00:00Z",
                           **({"citation": "a paper, table 1"} if source == "published" else {})},
            "environment": {"strategy": "fsdp"},
            "runs": [{"gpus": 8, "nodes": 1, "step_seconds": [10.0], "global_batch": 64}]}
    if setup is not None:
        data["setup"] = setup
    return Calibration.model_validate(data)


def test_proxy_runs_are_fitted_at_seq_len_published_ones_at_the_mean():
    w = _with_mean(3000.0)
    proxy = from_calibration(_cal({"device": "cpu", "model.seq_len": S, "model.layers": LAYERS}), w)
    published = from_calibration(_cal(None, "published"), w)
    assert proxy.proxy_layers == LAYERS and published.proxy_layers is None  # every layer, as [setup] records
    assert measured_workload(w, proxy).model.computed_seq_len == S  # the proxy fed full-length tokens
    assert measured_workload(w, published).model.computed_seq_len == 3000.0  # the job itself, at its padding
    assert measured_workload(w, None).model.computed_seq_len == 3000.0


@pytest.mark.parametrize(("model", "needle"), [
    ({"mean_seq_len": S + 1}, "at most model.seq_len"),
    ({"mean_seq_len": 0}, "model.mean_seq_len"),
    ({"mean_seq_len": -5}, "model.mean_seq_len"),
])
def test_bad_mean_seq_len_is_refused_naming_the_field(tmp_path, model, needle):
    import tomli_w

    data = {**RENTAL, "model": {**RENTAL["model"], **model}}
    path = tmp_path / "w.toml"
    path.write_text(tomli_w.dumps(data))
    r = run_in_process("validate", str(path))
    assert r.returncode == 2
    line = r.stderr.strip()
    assert "\n" not in line and "model.mean_seq_len" in line and needle in line and str(path) in line


def test_mean_without_a_sequence_length_is_refused():
    data = {**RENTAL, "model": {"params": "1B", "flops_per_sample": 1e12, "mean_seq_len": 100.0}}
    with pytest.raises(Exception, match=r"model\.mean_seq_len"):
        workload_from_dict(data)
