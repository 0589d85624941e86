"""Mixture of experts against figures worked by hand: Mixtral 8x7B's parameter split and FLOPs,
DeepSeek-V3's active parameters, the token all-to-all's bytes in a node and across nodes, the expert
state and gradient reduction over the expert data-parallel group, and the spec's one-line errors.

Worked here, independently of the code (tests/fixtures/moe/mixtral.toml: Jiang et al. 2024 Table 1,
L = 32, h = 4096, 32 heads, 8 KV heads, v = 32000, E = 8, k = 2, P = 46.7B):
  attention 2·L·h²·(1 + 8/32) = 1,342,177,280; embeddings 2·v·h = 262,144,000 -> dense 1,604,321,280
  experts 46.7e9 - 1,604,321,280 = 45,095,678,720; active = dense + experts·2/8 = 12,878,240,960 (~12.9B)
  FLOPs per sample (6·P_active + 12·L·h·s)·s = (77,269,445,760 + 6,442,450,944)·4096
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.errors import InputError
from advisor.scaling.model import build_model
from advisor.spec import load_workload, workload_from_dict
from advisor.topology.collectives import LinkLoad
from advisor.topology.layouts import build, layout_workload
from conftest import ROOT

MIXTRAL = ROOT / "tests" / "fixtures" / "moe" / "mixtral.toml"
DENSE, EXPERTS, ACTIVE = 1_604_321_280, 45_095_678_720, 12_878_240_960


def mixtral(model=None, **parallelism):
    w = load_workload(MIXTRAL)
    update = {"parallelism": w.parallelism.model_copy(update=parallelism)}
    if model:
        update["model"] = w.model.model_copy(update=model)
    return w.model_copy(update=update)


def spec(model=None, parallelism=None, cluster=None, gpus=(8, 16)) -> dict:
    return {
        "name": "moe",
        "model": {"params": "46.7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "seq_len": 4096,
                  "experts": 8, "experts_per_token": 2, **(model or {})},
        "batch": {"policy": "fixed-global", "global_samples": 256, "micro_samples": 1},
        "parallelism": {"strategy": "fsdp", "expert_parallel_degree": 8, **(parallelism or {})},
        "cluster": {"gpu": "H100-SXM", "gpus_per_node": 8, "max_gpus": 1024, "inter_node_bandwidth": "3200 Gbit/s",
                    **(cluster or {})},
        "job": {"tokens": "1T"},
        "tiers": [{"name": "on-demand", "usd_per_gpu_hour": 2.5}],
        "calibration": {"gpus": list(gpus)},
    }


def test_mixtral_splits_into_its_published_total_and_active_parameters():
    m = load_workload(MIXTRAL).model
    assert m.dense_params == pytest.approx(DENSE)
    assert m.routed_expert_params == pytest.approx(EXPERTS)
    assert m.active_params == pytest.approx(ACTIVE)  # Mistral AI: 12.9B per token
    assert round(m.active_params / 1e9, 1) == 12.9


def test_flops_per_token_use_the_active_parameters():
    m = load_workload(MIXTRAL).model
    assert m.training_flops_per_sample == pytest.approx((6 * ACTIVE + 12 * 32 * 4096 * 4096) * 4096)
    dense = m.model_copy(update={"experts": None, "experts_per_token": None})
    assert dense.training_flops_per_sample / m.training_flops_per_sample == pytest.approx(
        (6 * 46.7e9 + 6_442_450_944) / (6 * ACTIVE + 6_442_450_944))


def test_deepseek_v3_declared_expert_params_give_its_37b_active():
    # DeepSeek-V3 (arXiv:2412.19437 §4.2): 671B total, 37B active, 256 routed experts, 8 per token. The
    # routed experts' X solves 671 - X + 8/256·X = 37: X = 654.5B (its shared expert counts as dense).
    w = workload_from_dict(spec({"params": "671B", "layers": 61, "hidden": 7168, "heads": 128, "kv_heads": None,
                                 "experts": 256, "experts_per_token": 8, "expert_params": "654.5B", "moe_layers": 58},
                                {"expert_parallel_degree": 64}, gpus=[64]))
    assert w.model.active_params == pytest.approx(671e9 - 654.5e9 + 654.5e9 * 8 / 256)
    assert round(w.model.active_params / 1e9) == 37


def test_the_token_all_to_all_moves_tokens_k_hidden_bytes_four_times_per_layer_and_micro_batch():
    w = mixtral(activation_checkpoint="none")
    lay = build(w, [8])
    (a2a,) = [t for t in lay.traffic(w) if t.op == "all_to_all"]
    buffer = 4096 * 2 * 4096 * 2                    # tokens x k x hidden x bf16 bytes = 67,108,864
    calls = 4 * 32 * (512 / 8)                      # 4 per layer x 32 layers x 64 micro-batches of 1
    assert a2a.nbytes[0] == buffer and a2a.calls[0] == calls and not a2a.overlappable
    assert a2a.bus_bytes()[0] == pytest.approx(calls * buffer * 7 / 8)  # (EP-1)/EP leaves each GPU
    full = mixtral()                                # full recomputation repeats the forward's two
    (again,) = [t for t in build(full, [8]).traffic(full) if t.op == "all_to_all"]
    assert again.calls[0] == 6 * 32 * 64


def test_an_all_to_all_across_nodes_sends_the_off_node_share_through_the_nics():
    # 16 ranks on 2 nodes of 8 (m = 8): each rank's 15 bus bytes go 1 to each peer: 7 stay on NVLink,
    # 8 leave; a node's NICs carry 8 GPUs x 8 = 64, where a ring would carry 8 / 8 x 15 = 15.
    one = np.ones(1)
    load = LinkLoad.of("all_to_all", 16 * one, one, 16 * one, 2 * one, 15 * one, one)
    assert load.crossing_intra_bytes[0] == pytest.approx(7) and load.inter_bytes[0] == pytest.approx(64)
    inside = LinkLoad.of("all_to_all", 8 * one, one, 8 * one, one, 7 * one, one)
    assert inside.intra_bytes[0] == pytest.approx(7) and inside.inter_bytes[0] == 0


def test_expert_state_is_split_over_the_expert_parallel_ranks_under_ddp():
    w1, w4 = (mixtral(strategy="ddp", expert_parallel_degree=ep) for ep in (1, 4))
    s1, s4 = (build(w, [8]).footprint(w).state[0] for w in (w1, w4))
    assert s1 == pytest.approx(16 * 46.7e9)                       # every rank holds everything
    assert s4 == pytest.approx(16 * DENSE + 16 * EXPERTS / 4)     # each holds 2 of the 8 experts


def test_fsdp_shards_expert_state_over_every_rank_whatever_the_expert_degree():
    s = [build(w, [16]).footprint(w).state[0] for w in (mixtral(expert_parallel_degree=ep) for ep in (1, 8))]
    assert s == pytest.approx([16 * 46.7e9 / 16] * 2)


def test_expert_gradients_reduce_over_the_expert_data_parallel_group_and_dense_ones_over_all():
    w = mixtral(strategy="ddp", expert_parallel_degree=4)
    traffic = {t.name: t for t in build(w, [16]).traffic(w)}
    dense, expert = traffic["ddp gradient all-reduce"], traffic["expert ddp gradient all-reduce"]
    assert (dense.group[0], dense.stride[0], dense.nbytes[0]) == (16, 1, pytest.approx(4 * DENSE))
    # 16 / 4 = 4 replicas of each expert, 4 ranks apart, each holding 1/4 of the experts (fp32 gradients)
    assert (expert.group[0], expert.stride[0], expert.nbytes[0]) == (4, 4, pytest.approx(4 * EXPERTS / 4))


def test_moe_layers_keep_k_mlp_blocks_of_activations():
    # Korthikanti §4.1: MLP 19 of the 34 bytes per token and hidden unit; top-2 keeps 34 + 19
    none = {"activation_checkpoint": "none"}
    moe, dense = mixtral(**none), mixtral({"experts": None, "experts_per_token": None}, expert_parallel_degree=1,
                                           **none)
    a_moe, a_dense = (build(w, [16]).footprint(w).activations[0] for w in (moe, dense))
    logits = 4 * 4096 * 32000
    assert (a_moe - logits) / (a_dense - logits) == pytest.approx(53 / 34)


def test_counts_whose_data_parallel_ranks_the_expert_degree_does_not_divide_are_invalid():
    w = mixtral(tensor_parallel_degree=2, expert_parallel_degree=8)
    assert list(build(w, [8, 16, 32]).valid) == [False, True, True]  # 4, 8, 16 data-parallel ranks


def test_the_layout_label_names_the_expert_degree_and_reads_back():
    assert build(mixtral(), [16]).label() == "dp_shard=16, dp_replicate=1, tp=1, pp=1, ep=8"
    back = layout_workload(mixtral(), "dp_shard=16, dp_replicate=1, tp=1, pp=1, ep=4")
    assert back.parallelism.expert_parallel_degree == 4


def _step(ep, gpus_per_node, intra="450 GB/s", inter="3200 Gbit/s"):
    w = workload_from_dict(spec({"experts": 64, "experts_per_token": 4}, {"expert_parallel_degree": ep},
                                {"gpus_per_node": gpus_per_node, "intra_node_bandwidth": intra,
                                 "inter_node_bandwidth": inter}, gpus=[64]))
    return float(build_model(w).predict([64]).step_seconds[0])


@settings(max_examples=10, deadline=None)
@given(ep=st.sampled_from([16, 32, 64]), inter_gbit=st.sampled_from([100, 400, 3200]))
def test_an_expert_group_across_nodes_is_never_faster_than_the_same_group_inside_a_node(ep, inter_gbit):
    # The same 64 GPUs and layout: EP groups inside one 64-GPU NVLink domain, or split over nodes of 8
    # whose NICs are slower than NVLink.
    assert _step(ep, 8, inter=f"{inter_gbit} Gbit/s") >= _step(ep, 64)


def test_the_all_to_all_of_a_larger_expert_degree_across_nodes_takes_longer_than_one_inside_the_node():
    # Its own seconds (the whole step may still gain: a larger degree shrinks FSDP's expert gathers).
    seconds = {}
    for ep in (8, 16):
        w = workload_from_dict(spec({"experts": 64, "experts_per_token": 4}, {"expert_parallel_degree": ep},
                                    gpus=[64]))
        lay = build(w, [64])
        s = lay.link_seconds(w, [t for t in lay.traffic(w) if t.op == "all_to_all"])
        seconds[ep] = float((s.intra_bandwidth + s.inter_bandwidth)[0])
        assert (s.inter_bandwidth[0] > 0) == (ep == 16)
    # per GPU and call: 7/8 of the buffer at 450 GB/s, against 8 GPUs x 8/16 of it at min(400, 450) GB/s
    assert seconds[16] / seconds[8] == pytest.approx((8 * 8 / 16 / 400e9) / (7 / 8 / 450e9))


def test_routing_each_token_to_more_experts_never_speeds_the_step():
    steps = [float(build_model(w).predict([16]).step_seconds[0])
             for w in (mixtral({"experts_per_token": k}) for k in (1, 2, 4, 8))]
    assert steps == sorted(steps)


@pytest.mark.parametrize(("model", "parallelism", "expected"), [
    ({"experts_per_token": 9}, {}, "model.experts_per_token: must be at most model.experts (8) (got 9)"),
    ({"experts_per_token": None}, {},
     "model.experts_per_token: required with model.experts (top-k: experts per token)"),
    ({}, {"expert_parallel_degree": 3}, "parallelism.expert_parallel_degree: must divide model.experts (8) (got 3)"),
    ({"experts": None, "experts_per_token": None}, {},
     "parallelism.expert_parallel_degree: needs model.experts (a mixture-of-experts model) (got 8)"),
    ({"expert_params": "50B"}, {}, "model.expert_params: must be less than model.params (4.67e+10): attention and "
     "embeddings are not experts (got 50000000000.0)"),
    ({"params": "1B"}, {"expert_parallel_degree": 1}, "model.expert_params: required: model.params (1e+09) is not more "
     "than the attention and embedding weights the default leaves out (1.60432e+09)"),
    ({"moe_layers": 33}, {}, "model.moe_layers: exceeds model.layers (32) (got 33)"),
])
def test_bad_moe_fields_are_one_line_naming_the_field(model, parallelism, expected):
    with pytest.raises(InputError) as err:
        workload_from_dict(spec(model, parallelism), "w.toml")
    assert str(err.value) == f"w.toml: {expected}"


def test_an_expert_degree_the_calibration_counts_cannot_hold_is_refused():
    with pytest.raises(InputError) as err:
        workload_from_dict(spec(gpus=[4, 8, 16]), "w.toml")
    assert str(err.value) == ("w.toml: parallelism.expert_parallel_degree: must divide the data-parallel ranks (GPUs / "
                              "(tensor x pipeline degrees)), so calibration.gpus 4 cannot run: GPU counts must be "
                              "multiples of 8 (got 8)")


def test_hsdp_with_the_experts_over_its_node_all_reduces_each_expert_shard_across_nodes():
    # 16 GPUs on 2 nodes, shard group = the 8 GPUs of a node = EP: each GPU holds 1 of the 8 experts
    # whole (no expert gathers), and its replica on the other node (8 ranks away) all-reduces it.
    w = mixtral(strategy="hsdp", activation_checkpoint="none")
    traffic = {t.name: t for t in build(w, [16]).traffic(w)}
    gather = traffic["expert fsdp all-gather (forward + backward, per micro-batch)"]
    replica = traffic["expert hsdp replica all-reduce of the shard"]
    assert gather.group[0] == 1 and gather.bus_bytes()[0] == 0
    assert (replica.group[0], replica.stride[0], replica.nbytes[0]) == (2, 8, pytest.approx(4 * EXPERTS / 8))
    dense = traffic["hsdp replica all-reduce of the shard"]
    assert (dense.group[0], dense.stride[0], dense.nbytes[0]) == (2, 8, pytest.approx(4 * DENSE / 8))


def test_only_the_moe_layers_of_a_stage_exchange_tokens():
    # 24 of 32 layers MoE over 2 pipeline stages: 12 per stage x 4 all-to-alls x micro-batches
    w = mixtral({"moe_layers": 24}, pipeline_parallel_degree=2, activation_checkpoint="none")
    lay = build(w, [16])
    (a2a,) = [t for t in lay.traffic(w) if t.op == "all_to_all"]
    micro, _ = lay.micro_batches(w)
    assert a2a.calls[0] == 24 / 2 * 4 * micro[0]
