"""Where the step goes: the breakdown sums to the median step, recomputation costs compute."""

import numpy as np
import pytest

from advisor.scaling import features as F
from advisor.scaling.breakdown import PARTS
from advisor.scaling.model import build_model
from advisor.spec import load_workload
from conftest import WORKLOADS


def _with(w, model=None, **parallelism):
    """`w` re-read from its file with some parallelism (and model) fields changed, validated."""
    from advisor.spec import parse_toml, workload_from_dict

    data = parse_toml(w.source)
    data["parallelism"].update(parallelism)
    data["model"].update(model or {})
    data["name"] = "changed"  # no checked-in calibration: the prior alone
    return workload_from_dict(data)


def test_recompute_flops_by_hand():
    w = load_workload(WORKLOADS / "llm70b.toml")  # 80 layers, hidden 8192, seq 8192
    m = w.model
    attention = 12 * m.layers * m.hidden * m.seq_len * m.seq_len  # per sample, forward + backward
    assert F.recompute_flops_per_sample(_with(w, activation_checkpoint="full")) == pytest.approx(
        (6 * m.params * m.seq_len + attention) / 3)
    assert F.recompute_flops_per_sample(_with(w, activation_checkpoint="selective")) == pytest.approx(attention / 3)
    assert F.recompute_flops_per_sample(_with(w, activation_checkpoint="none")) == 0


@pytest.mark.parametrize("name", ["llm7b.toml", "llm70b.toml", "bert-large.toml"])
def test_breakdown_sums_to_the_median_step(name):
    w = load_workload(WORKLOADS / name)
    for model in (build_model(w, n_bootstrap=8), build_model(_with(w), n_bootstrap=8)):
        gpus = np.array([1, 8, 64, 512.0])
        p = model.predict(gpus)
        assert set(p.breakdown) == set(PARTS)
        total = sum(p.breakdown.values())
        assert np.allclose(total, p.step_seconds, rtol=0.01)
        assert all((v >= 0).all() for v in p.breakdown.values())
        assert (p.breakdown["inter_node_comm"][p.nodes == 1] == 0).all()


def test_full_recompute_costs_a_third_more_compute():
    w = load_workload(WORKLOADS / "llm70b.toml")
    parts = {}
    for mode in ("none", "full"):
        p = build_model(_with(w, activation_checkpoint=mode), n_bootstrap=8).predict(np.array([64.0]))
        parts[mode] = p.breakdown["compute"][0] + p.breakdown["recompute"][0]
    assert parts["full"] >= 1.25 * parts["none"]
    assert parts["full"] == pytest.approx(4 / 3 * parts["none"], rel=0.01)


def test_fp8_prices_linear_layers_at_the_fp8_peak_and_attention_at_bf16():
    w = load_workload(WORKLOADS / "llm70b.toml")
    one = np.ones(1)
    bf16, _ = F.compute_parts(_with(w, activation_checkpoint="none"), one, one)
    fp8, _ = F.compute_parts(_with(w, {"precision": "fp8"}, activation_checkpoint="none"), one, one)
    m = w.model
    linear, attention = 6 * m.params * m.seq_len, m.attention_flops_per_token * m.seq_len
    assert bf16[0] == pytest.approx((linear + attention) / 989.4e12)
    assert fp8[0] == pytest.approx(linear / 1979e12 + attention / 989.4e12)


def test_tp_comm_overlap_leaves_one_chunk_of_the_forward_reduce_scatters_in_the_intra_node_part():
    """8 GPUs, TP 8 with sequence parallelism, no data parallelism: TP is the only traffic. Without
    tp_comm_overlap all of it is exposed; with it, 1/8 of the reduce-scatters' seconds (one of 4 chunks in
    the forward's half) and none of the all-gathers', which move the same bytes in the same hops: 1/16."""
    w = load_workload(WORKLOADS / "llm70b.toml")
    eight, one = np.array([8.0]), np.array([1.0])
    parts = {}
    for overlap in (False, True):
        v = _with(w, strategy="fsdp", tensor_parallel_degree=8, pipeline_parallel_degree=1,
                  sequence_parallel=True, tp_comm_overlap=overlap)
        p = build_model(v, n_bootstrap=8).predict(eight, one)
        assert sum(x[0] for x in p.breakdown.values()) == pytest.approx(p.step_seconds[0], rel=1e-9)
        parts[overlap] = p.breakdown["intra_node_comm"][0]
    assert parts[False] > 0
    assert parts[True] == pytest.approx(parts[False] / 16, rel=1e-6)
