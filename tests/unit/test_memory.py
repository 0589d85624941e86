"""advisor.topology.memory against footprints worked by hand for named models (Llama-3.1-8B as in
workloads/llm7b.toml, a 13B model on A100-40GB), every degree, and measured peaks, each at the degrees
of the spec's own layout (advisor.topology.layouts.build) as the planner asks.

Formulas (written out here, independently of the code): state 16 bytes/parameter (ZeRO §3.1) over
tp·pp and the FSDP shard group; FSDP's gathered units 3 x params/layers/tp x 2 bytes; activations per
layer (Korthikanti et al. 2022) 34·s·b·h/t (none and selective: fused attention stores no 5·a·s²·b
scores, FlashAttention), 2·s·b·h/t plus one "none" layer (full); logits 4·s·b·v/t.
"""

from __future__ import annotations

import numpy as np
import pytest

from advisor.catalog import find_gpu
from advisor.spec import load_workload, workload_from_dict
from advisor.topology.layouts import build, measured_offset
from advisor.topology.memory import footprint, gpu_memory_bytes, holds, measured_peaks
from conftest import ROOT, WORKLOADS

# Llama-3.1-8B: s = 8192, b = 2 (micro), h = 4096, a = 32, L = 32, v = 128256, P = 8.0e9
S, B, H, A, L, V, P = 8192, 2, 4096, 32, 32, 128256, 8.0e9
SBH = S * B * H                                  # 67,108,864
LOGITS = 4 * S * B * V                           # 8,405,385,216 bytes
GATHERED = 3 * (P / L) * 2                       # 1.5e9 bytes
NONE_LAYER = SBH * 34                            # 67,108,864 x 34 = 2,281,701,376 bytes (no s² scores)


def llm7b(**parallelism):
    w = load_workload(WORKLOADS / "llm7b.toml")
    return w.model_copy(update={"parallelism": w.parallelism.model_copy(update=parallelism)})


def at(w, gpus, micro_samples=None, **parallelism):
    """The footprint of the spec's own layout at `gpus`, with its parallelism degrees overridden."""
    w = w.model_copy(update={"parallelism": w.parallelism.model_copy(update=parallelism)})
    return build(w, np.asarray(gpus)).footprint(w, micro_samples=micro_samples)


@pytest.mark.parametrize("mode, per_layer, working", [
    ("none", NONE_LAYER, 0.0),
    ("selective", SBH * 34, 0.0),                # 2,281,701,376 bytes per layer
    ("full", SBH * 2, NONE_LAYER),
])
def test_llm7b_footprint_at_8_gpus_by_hand(mode, per_layer, working):
    f = at(llm7b(activation_checkpoint=mode), [8])
    assert f.state[0] == pytest.approx(16 * P / 8)             # 16 GB
    assert f.gathered[0] == pytest.approx(GATHERED)
    assert f.activations[0] == pytest.approx(L * per_layer + working + LOGITS)
    # selective: 16 + 1.5 + 73.01 + 8.41 = 98.92 GB
    if mode == "selective":
        assert f.total[0] == pytest.approx(98.92e9, rel=1e-3)


def test_degrees_split_what_they_split():
    w = llm7b(activation_checkpoint="selective")
    per_layer = SBH * 34
    # tp = 2 on 16 GPUs: dp = 8 shards of P/2; activations and logits halve; a gathered unit halves too
    f = at(w, [16], tensor_parallel_degree=2)
    assert f.state[0] == pytest.approx(16 * P / 2 / 8)
    assert f.gathered[0] == pytest.approx(GATHERED / 2)
    assert f.activations[0] == pytest.approx((L * per_layer + LOGITS) / 2)
    # pp = 4 on 32 GPUs (dp 8), 8 samples per rank in micro-batches of 2 (4 per step): state P/4 over 8; first stage
    # 8 layers x 4 micro-batches in flight vs last stage 8 layers + logits: max(32·x, 8·x + logits) = 32·x
    big = w.model_copy(update={"batch": w.batch.model_copy(update={"per_gpu_samples": 8})})
    f = at(big, [32], pipeline_parallel_degree=4)
    assert f.state[0] == pytest.approx(16 * P / 4 / 8)
    assert f.activations[0] == pytest.approx(max(L * per_layer, L / 4 * per_layer + LOGITS))
    # cp = 2 on 16 GPUs: half the tokens per rank; FSDP shards over dp_shard x cp = 16
    f = at(w, [16], context_parallel_degree=2)
    assert f.state[0] == pytest.approx(16 * P / 16)
    assert f.activations[0] == pytest.approx(L * (S / 2) * B * H * 34 + 4 * (S / 2) * B * V)
    # HSDP: shard over 8 of 64 data-parallel ranks
    assert at(w, [64], strategy="hsdp", data_parallel_shard_degree=8).state[0] == pytest.approx(16 * P / 8)
    # the formula itself, at degrees given by hand: 8 ranks share the state, tp 2
    assert footprint(w, np.array([64]), state_shards=8, tp=2, pp=1, cp=1).state[0] == pytest.approx(16 * P / 2 / 8)
    # no recomputation keeps what selective does (fused attention: no s² scores), under cp too
    f = at(llm7b(activation_checkpoint="none"), [16], context_parallel_degree=2)
    assert f.activations[0] == pytest.approx(L * (S / 2) * B * H * 34 + 4 * (S / 2) * B * V)
    # the total is the sum, and broadcasts over counts
    total = at(w, [8, 16]).total
    assert total.shape == (2,) and total[0] - total[1] == pytest.approx(16 * P / 8 - 16 * P / 16)


def test_ddp_keeps_the_whole_state_and_a_cnn_has_no_activation_estimate():
    w = load_workload(WORKLOADS / "resnet50.toml")
    f = at(w, [1, 64])
    assert f.state.tolist() == pytest.approx([16 * 25.6e6] * 2) and not f.activations_known
    assert f.activations.tolist() == [0.0, 0.0] and f.gathered.tolist() == [0.0, 0.0]


def thirteen_b(checkpoint, gpu="A100-40GB", max_gpus=256):
    return workload_from_dict({
        "name": "b13", "model": {"params": "13B", "layers": 40, "hidden": 5120, "heads": 40, "seq_len": 4096},
        "batch": {"policy": "fixed-global", "global_samples": 1024, "micro_samples": 1},
        "parallelism": {"strategy": "fsdp", "activation_checkpoint": checkpoint},
        "cluster": {"gpu": gpu, "max_gpus": max_gpus, "inter_node_bandwidth": "800 Gbit/s"},
        "job": {"samples": "10M"}, "tiers": [{"name": "on-demand", "usd_per_gpu_hour": 1.5}],
    })


def test_a100_40gb_is_not_the_80gb_entry():
    assert find_gpu("A100-40GB").memory_bytes == 40e9
    assert find_gpu("A100-80GB").memory_bytes == 80e9
    for name in ("A100-PCIe", "H100-NVL", "GH200", "L4", "A10G", "MI300X"):
        gpu = find_gpu(name)
        assert gpu is not None and gpu.memory_bytes > 0 and gpu.source


@pytest.mark.parametrize("checkpoint, smallest", [("none", 32), ("selective", 32), ("full", 8)])
def test_13b_fsdp_on_a100_40gb(checkpoint, smallest):
    # full, 8 GPUs: state 13e9 x 16 / 8 = 26 GB, gathered 3 x 13e9/40 x 2 = 1.95 GB, inputs 2 x 4096 x 5120 x 40
    # = 1.68 GB, one rebuilt layer 34 x 4096 x 5120 = 0.713 GB, logits 4 x 4096 x 32000 = 0.52 GB: 30.86 GB
    # <= 40. 4 GPUs: the state alone is 52 GB. none keeps what selective does (no s² scores).
    # selective: activations 34 x 4096 x 5120 x 40 = 28.5 GB + 0.52 GB logits + gathered 1.95 GB; with state
    # 13e9 x 16 / N: N = 16 gives 13 + 31 = 44 GB > 40, N = 32 gives 6.5 + 31 = 37.5 GB.
    from advisor.planning.billing import sweep
    from recommend_inputs import Amdahl

    w = thirteen_b(checkpoint)
    if checkpoint == "full":
        assert at(w, [8]).total[0] == pytest.approx(30.86e9, rel=2e-3)
    sw = sweep(w, Amdahl())
    fits = sw.gpus[sw.available[0]]
    assert (fits.min() if fits.size else None) == smallest
    assert not fits.size or fits.min() >= 8


def test_measured_peak_moves_the_estimate_and_flags_a_smaller_gpu():
    from advisor.calibration_data import load_workload_calibration

    w = llm7b(activation_checkpoint="selective")
    peaks = measured_peaks(load_workload_calibration("llm7b", WORKLOADS / "llm7b.toml"))
    assert [(p.gpus, p.peak_bytes) for p in peaks] == [(8, 88476326298.0), (128, 71940702208.0)]
    offset = measured_offset(w, np.array([8, 16, 24, 128]), peaks)
    estimate = at(w, [8, 16, 24, 128]).total
    # at a measured count the footprint is the measurement; elsewhere the estimate moved by the nearest offset
    assert estimate[0] + offset[0] == pytest.approx(88476326298.0)
    assert estimate[3] + offset[3] == pytest.approx(71940702208.0)
    # 16 GPUs: 88.48 - (16 - 8) GB of state = 80.48 GB > 80; 24 GPUs: 88.48 - 16 + 5.33 = 77.81 GB
    assert estimate[1] + offset[1] == pytest.approx(88476326298.0 - 8e9)
    assert estimate[2] + offset[2] == pytest.approx(88476326298.0 - 16e9 + 16 * P / 24)


def test_gpu_memory_overrides_the_catalog():
    w = llm7b()
    assert gpu_memory_bytes(w) == 96e9
    w = w.model_copy(update={"cluster": w.cluster.model_copy(update={"gpu_memory": None})})
    assert gpu_memory_bytes(w) == 80e9


def test_holds_compares_with_the_gpu_memory_and_rules_nothing_out_when_it_is_unknown():
    w = llm7b()  # 96 GB cards
    assert holds(w, np.array([95e9, 96e9, 97e9])).tolist() == [True, True, False]
    unknown = w.model_copy(update={"cluster": w.cluster.model_copy(update={"gpu_memory": None, "gpu": "no-such-gpu"})})
    assert gpu_memory_bytes(unknown) is None and holds(unknown, np.array([1e15])).tolist() == [True]


def test_a_layout_fits_where_it_is_valid_and_holds_its_footprint():
    w = llm7b()  # 96 GB cards; selective: 73.0 GB of activations + 8.4 GB of logits + 1.5 GB gathered
    lay = build(w, np.array([8, 16]))
    assert lay.fits(w).tolist() == [False, True]  # 16 GB of state at 8 GPUs (98.9 GB), 8 GB at 16 (90.9 GB)
    # HSDP sharding over 16 cannot split 8 GPUs: its 90.9 GB would be held, but the layout does not exist
    hsdp = llm7b(strategy="hsdp", data_parallel_shard_degree=16)
    lay = build(hsdp, np.array([8]))
    assert holds(hsdp, lay.memory_bytes(hsdp)).tolist() == [True] and lay.fits(hsdp).tolist() == [False]


def test_a_proxy_calibration_peak_is_not_used():
    from advisor.calibration_data import load_calibration

    cal = load_calibration(ROOT / "calibrations" / "tiny-cpu_cpu_2026-11-30.toml", "tiny-cpu")
    cal = cal.model_copy(update={"environment": {**cal.environment, "proxy_layers": 2, "model_layers": 4},
                                 "runs": [r.model_copy(update={"peak_memory_bytes": 10**9}) for r in cal.runs]})
    assert measured_peaks(cal) == []
    full = cal.model_copy(update={"environment": {**cal.environment, "proxy_layers": 4, "model_layers": 4}})
    assert [p.peak_bytes for p in measured_peaks(full)] == [1e9] * len(cal.runs)


def test_a_pipeline_holds_no_more_micro_batches_than_a_step_has():
    # llm7b: 2 samples per GPU, micro-batch 2 -> one micro-batch per step: with pp = 4 the first stage holds one
    # micro-batch of its 8 layers, not 4; the last stage's 8 layers plus logits are then the larger
    w = llm7b(activation_checkpoint="selective")
    per_layer = SBH * 34
    f = at(w, [32], pipeline_parallel_degree=4)
    assert f.activations[0] == pytest.approx(L / 4 * per_layer + LOGITS)
    # micro-batch 1: two micro-batches per step, the first stage holds 2 x 8 layers of half the size
    f = at(w, [32], micro_samples=1, pipeline_parallel_degree=4)
    assert f.activations[0] == pytest.approx(max(2 * L / 4 * per_layer / 2, L / 4 * per_layer / 2 + LOGITS / 2))


def test_when_memory_rules_counts_out_the_output_says_what_recomputation_would_fit():
    # the 13B spec of test_13b_fsdp_on_a100_40gb capped at 16 GPUs: without recomputation (and with selective,
    # which keeps the same bytes) it fits nowhere (16 GPUs: 13 + 1.95 + 28.5 + 0.52 = 44 GB > 40); full fits
    # from 8 (hand-computed there)
    from advisor.planning.recommend import recommend
    from recommend_inputs import Amdahl

    rec = recommend(thirteen_b("none", max_gpus=16), Amdahl(baseline_gpus=8))
    assert rec.chosen is None and rec.recompute == {"selective": None, "full": 8}  # None: fits at no count
    text = " ".join(rec.why)
    assert 'with activation_checkpoint = "full" the smallest count that fits would be 8 GPUs' in text
    assert "at 16 GPUs it is" in text  # the largest count: the nearest to fitting


@pytest.mark.parametrize("peak_bytes, micro", [(2.1e9, None), (80e9, 1000)])
def test_a_low_measured_peak_takes_back_activations_never_the_state(peak_bytes, micro):
    """A peak the estimate overstates (llm7b's 8 GPUs at 2.1 GB, or recorded at a 1,000-sample micro-batch
    the estimate prices at terabytes of activations) moved every count's memory below zero (-5.9 GB per GPU
    at 16, -40,540 GB): now each count holds at least its FSDP state, 16 bytes x 8.03B parameters / N
    (ZeRO §3.1), plus what it gathers, and never less than that state worked by hand."""
    from advisor.topology.memory import MeasuredPeak

    w = load_workload(WORKLOADS / "llm7b.toml")
    gpus = np.array([8.0, 16.0, 24.0, 64.0])
    lay = build(w, gpus)
    got = lay.memory_bytes(w, [MeasuredPeak(8, peak_bytes, micro, "test")])
    assert np.all(got >= 16 * w.model.params / gpus - 1.0)
    fp = lay.footprint(w)
    np.testing.assert_array_less(fp.state + fp.gathered - 1.0, got + 1e-9)
