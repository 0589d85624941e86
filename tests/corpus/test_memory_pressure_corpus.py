"""Memory pressure (issue 21): a run near its GPU's memory capacity (a measured peak > 90%,
advisor.scaling.evidence.MEMORY_NEAR, or its source's own `memory_bound` flag) ran slower than its
count would with memory to spare. The memory-pressure column (advisor.scaling.features.pressure_column)
explains its extra time, so its MFU is not carried to the counts where sharding frees memory, and the
counts still near capacity carry it.

Specs are real (workloads/llm7b.toml: Llama 3.1 8B FSDP on 96 GB H100s; a published BERT-Large DDP
series). Step times named `synthetic` are the published ones slowed by a known factor at the rows
flagged, so each of those tests checks the recovery of a known parameter: the unpressed rate.
Expectations from the rows and the spec by hand, never from the model.

Memory by hand (advisor.topology.memory): FSDP shards 16 bytes per parameter over N, 8.0B parameters:
16 GB per GPU at 8 GPUs, 8 at 16, 4 at 32, 1 at 128; at a fixed per-GPU batch nothing else changes. A
row flagged without a peak is read as at capacity (96 GB), so 16 GPUs need 96 - 8 = 88 GB (91.7%: still
pressed), 32 GPUs 84 GB (87.5%: freed).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from advisor.errors import InputError
from advisor.scaling.model import ScalingModel, build_model, load_measurements
from advisor.spec import load_workload
from cli_inprocess import invoke
from conftest import ROOT, WORKLOADS

LLM = WORKLOADS / "llm7b.toml"
GB = 10**9
#: torchtitan's published Llama 3.1 8B FSDP steps (calibrations/llm7b_published_torchtitan.toml)
T8, T128 = 2.84346, 2.9231
#: the slowdown the synthetic pressed rows carry
SLOW = 1.25
BERT = ROOT / "benchmarks" / "workloads" / "bert-large-pyt-dgxa100-seq128.toml"
BERT_CSV = ROOT / "benchmarks" / "data" / "bert-large-pyt-dgxa100-seq128.csv"


def _calibration(tmp_path, rows, name="llm7b_pressed.toml") -> str:
    """A published-style llm7b calibration: (gpus, nodes, step seconds, memory_bound, peak bytes or None)."""
    runs = "".join(f"\n[[runs]]\ngpus = {g}\nnodes = {n}\nstep_seconds = [{t}]\n"
                   + ("memory_bound = true\n" if bound else "") + (f"peak_memory_bytes = {peak}\n" if peak else "")
                   for g, n, t, bound, peak in rows)
    path = tmp_path / name
    path.write_text('schema = 1\nworkload = "llm7b"\n\n[provenance]\nsource = "published"\n'
                    'created = "2026-12-01T00:00:00Z"\ncitation = "test corpus: synthetic steps"\n\n'
                    '[environment]\nstrategy = "fsdp"\ngpus_per_node = 8\n' + runs)
    return str(path)


def _model(cal) -> ScalingModel:
    w = load_workload(LLM)
    return ScalingModel(w, load_measurements(w, calibration=cal))


def _steps(model, gpus) -> np.ndarray:
    return model.step_time(np.array(gpus, float))[0]


def test_synthetic_recovery_a_lone_pressed_small_row_is_not_projected_at_its_rate(tmp_path):
    """Only the 8-GPU row, synthetic at 1.25x the published 2.843 s and flagged memory-bound. The linear
    guess holds its rate: 3.554 s at 128 GPUs, +21.6% against the published 2.923 s. Where memory is freed
    (32+ GPUs) the fit now splits the extra time between pressure and compute (with one row, the priors
    set the split): against the same row unflagged, the 128-GPU step moves toward the published one by at
    least a third of the synthetic slowdown at 32 and 128 GPUs, and not past it beyond the 5% noise.
    16 GPUs (91.7%) carry the pressure: no faster than the 8-GPU row less the 5% noise. (Against the
    8-GPU row itself, 32 GPUs over 4 nodes also pay the network: at the learned overlap that is most of
    the gain.)"""
    m = _model(_calibration(tmp_path, [(8, 1, T8 * SLOW, True, None)]))
    plain = _model(_calibration(tmp_path, [(8, 1, T8 * SLOW, False, None)], "plain.toml"))
    u32, u128 = _steps(plain, [32, 128])
    t8, t16, t32, t128 = _steps(m, [8, 16, 32, 128])
    assert t8 == pytest.approx(T8 * SLOW, rel=1e-6)
    assert u128 - t128 > (SLOW - 1) * T8 / 3 and u32 - t32 > (SLOW - 1) * T8 / 3 and t128 > 0.95 * T128
    assert t16 > 0.95 * t8


def test_the_same_row_unflagged_is_projected_at_its_rate(tmp_path):
    """Without the flag nothing says the row was slow for memory: 128 GPUs no faster than the linear
    guess's 3.554 s less the 5% noise (nothing corrects the row's rate; communication only adds, 5% at
    the learned overlap, against torchtitan's own 2.8% from 8 to 128 GPUs)."""
    m = _model(_calibration(tmp_path, [(8, 1, T8 * SLOW, False, None)]))
    t128 = _steps(m, [128])[0]
    assert 0.95 * T8 * SLOW < t128 < 1.10 * T8 * SLOW


def test_a_flag_on_a_row_that_was_not_slowed_costs_little(tmp_path):
    """The published 8-GPU step flagged memory-bound though it was not slowed (torchtitan's own 8-GPU row
    at 92% of 96 GB is the faster per GPU): 128 GPUs within 2% of the same row unflagged, and within 8%
    of the published 2.923 s (16x past the data the drift adds exp(4 x 0.01), docs/model.md; unflagged
    the model is +6.8% there under LEARNED)."""
    m = _model(_calibration(tmp_path, [(8, 1, T8, True, None)]))
    plain = _model(_calibration(tmp_path, [(8, 1, T8, False, None)], "plain.toml"))
    assert _steps(m, [128])[0] == pytest.approx(_steps(plain, [128])[0], rel=0.02)
    assert _steps(m, [128])[0] == pytest.approx(T128, rel=0.08)


def test_synthetic_recovery_a_pressed_middle_row_leaves_compute_to_the_others(tmp_path):
    """8 and 32 GPUs at the published-like 2.843 and 2.89 s, 16 GPUs synthetic at 1.25 x 2.87 s and
    flagged. The same rows with 16 at 2.87 s unflagged are the truth: 64 and 128 GPUs within 0.5% of
    their prediction (the 16-GPU row's excess is pressure, not compute or the inter-node link), and 16
    GPUs stays its measurement."""
    rows = [(8, 1, T8, False, None), (16, 2, 2.87 * SLOW, True, None), (32, 4, 2.89, False, None)]
    truth = _model(_calibration(tmp_path, [(8, 1, T8, False, None), (16, 2, 2.87, False, None),
                                           (32, 4, 2.89, False, None)], "truth.toml"))
    m = _model(_calibration(tmp_path, rows))
    np.testing.assert_allclose(_steps(m, [64, 128]), _steps(truth, [64, 128]), rtol=0.005)
    assert _steps(m, [16])[0] == pytest.approx(2.87 * SLOW, rel=1e-6)


def test_all_rows_pressed_where_sharding_frees_little_carry_the_pressure(tmp_path):
    """8 and 16 GPUs both flagged: past 16 GPUs FSDP frees at most the 8 GB of state 16 GPUs still hold,
    8% of 96 GB (32 GPUs: 96 - 4 = 92 GB, 95.8%), so every count stays pressed and is predicted at the
    measured rate: 128 GPUs within 2% of the same rows unflagged."""
    rows = [(8, 1, T8 * SLOW, True, None), (16, 2, 2.87 * SLOW, True, None)]
    flagged = _model(_calibration(tmp_path, rows))
    plain = _model(_calibration(tmp_path, [(*r[:3], False, None) for r in rows], "plain.toml"))
    assert _steps(flagged, [128])[0] == pytest.approx(_steps(plain, [128])[0], rel=0.02)


def _bert_csv(tmp_path, flag_at: set[int] | None) -> str:
    """The published BERT-Large DDP rows at <= 16 GPUs, with a memory_bound column (None: without one)."""
    rows = [line for line in BERT_CSV.read_text().splitlines() if line and not line.startswith("#")]
    head, body = rows[0], [r for r in rows[1:] if int(r.split(",")[0]) <= 16]
    if flag_at is not None:
        head += ",memory_bound"
        body = [r + (",1" if int(r.split(",")[0]) in flag_at else ",0") for r in body]
    path = tmp_path / f"bert_{'none' if flag_at is None else len(flag_at)}.csv"
    path.write_text("\n".join([head, *body]) + "\n")
    return str(path)


def test_all_rows_pressed_under_ddp_carry_the_pressure_to_every_count(tmp_path):
    """DDP keeps the whole model state on every GPU: nothing is freed at any count, so with every row
    flagged every count is pressed and 32-256 GPUs are predicted within 1% of the unflagged fit."""
    w = load_workload(BERT)
    g = np.array([32.0, 64.0, 128.0, 256.0])
    flagged = build_model(w, measurements=_bert_csv(tmp_path, {1, 8, 16})).step_time(g)[0]
    plain = build_model(w, measurements=_bert_csv(tmp_path, None)).step_time(g)[0]
    np.testing.assert_allclose(flagged, plain, rtol=0.01)


def test_no_row_pressed_is_bit_identical_to_no_flag_at_all(tmp_path):
    """A memory_bound column of zeros changes nothing, to the last bit: no pressure column, the same
    coefficients, medians and bands."""
    w = load_workload(BERT)
    zeros = build_model(w, measurements=_bert_csv(tmp_path, set()))
    plain = build_model(w, measurements=_bert_csv(tmp_path, None))
    g = np.array([1.0, 8.0, 32.0, 256.0])
    assert zeros.record.problem.coverage.pressure is None
    assert np.array_equal(zeros.record.fitted.estimator.coef_, plain.record.fitted.estimator.coef_)
    for a, b in zip(zeros.step_time(g), plain.step_time(g), strict=True):
        assert np.array_equal(a, b)


def test_the_csv_flag_names_its_row_and_takes_only_0_or_1(tmp_path):
    """memory_bound = 1 on the 8-GPU rows: the warning names N=8; 2 and 0.5 are refused at their cell."""
    w = load_workload(BERT)
    m = build_model(w, measurements=_bert_csv(tmp_path, {8}))
    assert any(x.startswith("N=8 ran near memory capacity") for x in m.warnings()), m.warnings()
    for bad, why in (("2", "must be <= 1"), ("0.5", "must be a whole number")):
        path = tmp_path / "bad.csv"
        path.write_text(f"gpus,step_seconds,memory_bound\n1,0.5,0\n8,0.6,{bad}\n")
        with pytest.raises(InputError, match=why):
            load_measurements(w, measurements=path)


def _published(tmp_path, rows) -> str:
    """resnet50 (A100 80 GB, DDP): (gpus, nodes, step seconds, peak bytes) per run."""
    runs = "".join(f"\n[[runs]]\ngpus = {g}\nnodes = {n}\nstep_seconds = [{t}]\npeak_memory_bytes = {p}\n"
                   for g, n, t, p in rows)
    path = tmp_path / "resnet50_pressed.toml"
    path.write_text('schema = 1\nworkload = "resnet50"\n\n[provenance]\nsource = "published"\n'
                    'created = "2026-12-01T00:00:00Z"\ncitation = "test corpus: one run near memory capacity"\n\n'
                    '[environment]\nsystem = "8x A100 80GB per host"\ngpus_per_node = 8\n' + runs)
    return str(path)


def _predict(cal, gpus, workload="resnet50.toml"):
    code, out, err = invoke("predict", WORKLOADS / workload, "--calibration", cal, "--gpus", gpus, "--json")
    assert code == 0, err
    doc = json.loads(out)
    return {p["gpus"]: p for p in doc["predictions"]}, doc["warnings"]


def test_a_peak_near_capacity_sets_the_level_at_its_own_count_and_caps_nothing_above(tmp_path):
    """ResNet-50 DDP at ~2,700 images/s per A100 (NVIDIA DeepLearningExamples' mixed-precision figure:
    32 images in 11.9 ms); synthetic: 1 GPU at 15.0 ms with a 76 GB peak of 80 GB (95%), 8-32 GPUs at
    12.0-12.8 ms with 40 GB. DDP keeps every GPU's memory the same, so 2 GPUs, whose nearest measured
    peak is the 1-GPU one, are pressed: at least its 15.0 ms. 4 GPUs, nearest the 8-GPU peak, are not:
    within the 5% noise of 8 GPUs' 12.0 ms, where the 1-GPU level used to be carried. The measured counts stay
    their measurements, no count from 8 GPUs up reads an efficiency above 1 + 5% noise against the best
    measured per GPU (8 GPUs: the 1-GPU row sets no reference), and N=1 is named."""
    cal = _published(tmp_path, [(1, 1, 0.0150, 76 * GB), (8, 1, 0.0120, 40 * GB), (16, 2, 0.0125, 40 * GB),
                                (32, 4, 0.0128, 40 * GB)])
    rows, warnings = _predict(cal, "1,2,4,8,16")
    assert abs(rows[1]["step_seconds"] - 0.0150) < 1e-9 and abs(rows[8]["step_seconds"] - 0.0120) < 1e-9
    assert rows[2]["step_seconds"] >= 0.0150 and rows[4]["step_seconds"] <= 0.0120 * 1.05
    assert max(rows[g]["efficiency"] for g in (8, 16)) <= 1.05  # against 8 GPUs, the best measured per GPU
    assert any(w.startswith("N=1 ran near memory capacity (peak > 90%") for w in warnings), warnings


def test_a_peak_with_memory_to_spare_changes_nothing(tmp_path):
    """The same rows with the 1-GPU peak at 60 GB (75%): no memory warning, and 2 GPUs hold the 1-GPU
    level as anchoring does for any measured count (15.0 ms within 1%)."""
    cal = _published(tmp_path, [(1, 1, 0.0150, 60 * GB), (8, 1, 0.0120, 40 * GB), (16, 2, 0.0125, 40 * GB),
                                (32, 4, 0.0128, 40 * GB)])
    rows, warnings = _predict(cal, "1,2")
    assert abs(rows[2]["step_seconds"] / 0.0150 - 1) < 0.01
    assert not any("near capacity" in w for w in warnings), warnings


def test_the_published_llm7b_8_gpu_run_at_92_percent_of_its_96_gb_is_flagged():
    """torchtitan's Llama 3.1 8B FSDP on 8 H100 96GB: memory 82.4 GiB = 88.5 GB, 92% of 96 GB (Table 1);
    at 128 GPUs 67.0 GiB = 71.9 GB, 75% (Table 3): only N=8 is named."""
    code, out, err = invoke("predict", LLM, "--calibration",
                            ROOT / "calibrations" / "llm7b_published_torchtitan.toml", "--gpus", "8,128", "--json")
    assert code == 0, err
    warnings = json.loads(out)["warnings"]
    assert any(w.startswith("N=8 ran near memory capacity") for w in warnings), warnings
    assert not any("N=128 ran" in w or "N=8, N=128" in w for w in warnings), warnings
