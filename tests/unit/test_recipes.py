"""The recipe switches in the physics, each against a hand computation: the reduce dtype's bytes, FSDP's
per-block calls, DDP's buckets, the distributed optimizer, reshard_after_forward, sequence parallelism."""

from __future__ import annotations

import pytest
from test_layouts import GR, G, spec

from advisor.topology import layouts as L
from advisor.topology.memory import activation_bytes

P = 8.0e9  # rental-ethernet: 8.0B parameters, 32 layers, hidden 4096, seq 8192


def _dp(w, gpus=8):
    return [t for t in L.build(w, [gpus]).traffic(w) if not t.name.startswith(("tp", "pp", "cp"))]


def test_gradients_travel_at_the_reduce_dtype():
    fp32 = spec({"strategy": "ddp"})
    bf16 = spec({"strategy": "ddp", "reduce_dtype": "bf16"})
    assert _dp(fp32)[0].nbytes[0] == pytest.approx(P * 4)
    assert _dp(bf16)[0].nbytes[0] == pytest.approx(P * 2)
    fsdp = spec({"strategy": "fsdp", "reduce_dtype": "bf16"})
    ag, rs = _dp(fsdp)
    assert ag.nbytes[0] == pytest.approx(G) and rs.nbytes[0] == pytest.approx(P * 2)


def test_fsdp_pays_latency_per_wrapped_block():
    w = spec({"strategy": "fsdp"}, batch={"per_gpu_samples": 8, "micro_samples": 2})
    ag, rs = _dp(w)
    blocks = 32 + 1  # one fully_shard per transformer block, plus the root
    assert ag.latency_calls[0] == 2 * 4 * blocks  # 4 micro-batches x (forward + backward) x blocks
    assert rs.latency_calls[0] == blocks
    hops = 2 * 7 * 0.5  # ring in a node, half an all-reduce's for a gather or a reduce-scatter
    lat = L.build(w, [8]).link_seconds(w, [ag, rs]).intra_latency[0]
    assert lat == pytest.approx((2 * 4 + 1) * blocks * hops * w.cluster.intra_node_latency)


def test_ddp_pays_latency_per_bucket():
    (ar,) = _dp(spec({"strategy": "ddp"}))
    assert ar.latency_calls[0] == -(-P * 4 // 25e6)  # 25 MB buckets (PyTorch DDP bucket_cap_mb)


def test_fsdp_without_reshard_gathers_once_per_micro_batch_and_holds_the_layers():
    base = {"strategy": "fsdp"}
    keep = spec({**base, "reshard_after_forward": False}, batch={"per_gpu_samples": 8, "micro_samples": 2})
    again = spec(base, batch={"per_gpu_samples": 8, "micro_samples": 2})
    assert _dp(keep)[0].calls[0] == 4 and _dp(again)[0].calls[0] == 8
    layer = P / 32 * 2
    more = L.build(keep, [8]).footprint(keep).gathered[0] - L.build(again, [8]).footprint(again).gathered[0]
    assert more == pytest.approx(32 * layer)


def test_distributed_optimizer_reduce_scatters_gradients_and_gathers_parameters():
    w = spec({"strategy": "ddp", "distributed_optimizer": True})
    rs, ag = _dp(w)
    assert (rs.op, ag.op) == ("reduce_scatter", "all_gather")
    assert rs.bus_bytes()[0] == pytest.approx(7 / 8 * GR) and ag.bus_bytes()[0] == pytest.approx(7 / 8 * G)
    # ZeRO-1: the optimizer's 12 bytes per parameter split over the 8 ranks, weights and gradients whole
    assert L.build(w, [8]).footprint(w).state[0] == pytest.approx(4 * P + 12 * P / 8)
    ddp = spec({"strategy": "ddp"})
    assert L.build(ddp, [8]).footprint(ddp).state[0] == pytest.approx(16 * P)


@pytest.mark.parametrize("t", [2, 4, 8])
def test_tensor_parallel_activations_with_and_without_sequence_parallelism(t):
    """Korthikanti et al. 2022 Table 2 without the attention scores: s·b·h·34/t with SP, s·b·h·(10 + 24/t)
    without; a full-recomputation input 2·s·b·h/t with SP, 2·s·b·h without."""
    sbh = 8192 * 1 * 4096
    for sp, none, full in ((True, 34 / t, 2 / t), (False, 10 + 24 / t, 2.0)):
        w = spec({"strategy": "fsdp", "tensor_parallel_degree": t, "sequence_parallel": sp})
        logits = 4 * 8192 * 1 * 128256 / t  # fp32 logits of its 128256-token vocabulary
        got = activation_bytes(w, 1, tp=t, activation_checkpoint="none")
        assert got == pytest.approx(32 * sbh * none + logits)
        got = activation_bytes(w, 1, tp=t, activation_checkpoint="full")
        assert got == pytest.approx(32 * sbh * full + sbh * none + logits)


def test_sequence_parallel_moves_the_same_bytes_in_twice_the_calls():
    on = [t for t in L.build(spec({"strategy": "fsdp", "tensor_parallel_degree": 4}), [8]).traffic(
        spec({"strategy": "fsdp", "tensor_parallel_degree": 4})) if t.name.startswith("tp")]
    w = spec({"strategy": "fsdp", "tensor_parallel_degree": 4, "sequence_parallel": False})
    off = [t for t in L.build(w, [8]).traffic(w) if t.name.startswith("tp")]
    assert sum(t.bus_bytes()[0] for t in on) == pytest.approx(off[0].bus_bytes()[0])
    assert [t.overlappable for t in off] == [False]
    hidden = spec({"strategy": "fsdp", "tensor_parallel_degree": 4, "tp_comm_overlap": True})
    assert all(t.overlappable for t in L.build(hidden, [8]).traffic(hidden) if t.name.startswith("tp"))


def test_overlap_per_traffic_class_exposes_what_no_compute_hides():
    """DDP overlapped: the last of its 25 MB buckets waits (P x 4 bytes in 1280 buckets); not overlapped:
    all of it; TP without tp_comm_overlap and PP sends: all of it; TP with tp_comm_overlap: one chunk of
    the forward's half of the reduce-scatters, 1/(2·4), none of the ring-exchanged all-gathers."""
    (ar,) = _dp(spec({"strategy": "ddp"}))
    assert ar.exposed_share[0] == pytest.approx(1 / 1280)
    (waits,) = _dp(spec({"strategy": "ddp", "overlap_grad_reduce": False}))
    assert waits.exposed_share == 1.0
    w = spec({"strategy": "fsdp", "tensor_parallel_degree": 4, "pipeline_parallel_degree": 2,
              "sequence_parallel": False}, batch={"per_gpu_samples": 8, "micro_samples": 1})
    by = {t.name.split()[0]: t for t in L.build(w, [16]).traffic(w)}
    assert by["tp"].exposed_share == 1.0 and by["pp"].exposed_share == 1.0
    assert by["fsdp"].exposed_share[0] == pytest.approx(1 / (32 / 2 + 1))  # one block of 16 per stage + root
    hidden = spec({"strategy": "fsdp", "tensor_parallel_degree": 4, "tp_comm_overlap": True})
    tp = {t.op: t for t in L.build(hidden, [8]).traffic(hidden) if t.name.startswith("tp")}
    assert tp["reduce_scatter"].exposed_share == pytest.approx(1 / 8) and tp["all_gather"].exposed_share == 0
    assert all(t.decomposed and t.hidden_share == 0 for t in tp.values())  # not the γ-norm's: under their GEMMs
    plain = spec({"strategy": "fsdp", "tensor_parallel_degree": 4, "tp_comm_overlap": True,
                  "sequence_parallel": False})
    (ar,) = [t for t in L.build(plain, [8]).traffic(plain) if t.name.startswith("tp")]
    assert ar.exposed_share == pytest.approx(1 / 16)  # a reduce-scatter's share of half its bytes


def test_ring_attention_is_hidden_under_its_own_attention_blocks_not_by_the_overlap_gamma():
    w = spec({"strategy": "fsdp", "context_parallel_degree": 2})
    lay = L.build(w, [8])
    (cp,) = [t for t in lay.traffic(w) if t.name.startswith("cp")]
    assert cp.decomposed and cp.exposed_share == 0 and cp.hidden_share == 0
    whole = lay.link_seconds(w, [cp]).intra_bandwidth[0]
    assert whole > 0 and lay.link_seconds(w, [cp], part="decomposed").intra_bandwidth[0] == pytest.approx(whole)


@pytest.mark.parametrize("overlap", [False, True])
def test_exposed_hidden_and_decomposed_link_seconds_sum_to_the_whole(overlap):
    w = spec({"strategy": "fsdp", "tensor_parallel_degree": 2, "context_parallel_degree": 2,
              "tp_comm_overlap": overlap})
    lay = L.build(w, [16], [2])
    whole, hidden, exposed, split = (lay.link_seconds(w, part=p) for p in (None, "hidden", "exposed", "decomposed"))
    for f in ("intra_bytes", "inter_bytes", "intra_latency", "inter_latency", "intra_bandwidth"):
        assert (getattr(hidden, f)[0] + getattr(exposed, f)[0] + getattr(split, f)[0]
                == pytest.approx(getattr(whole, f)[0]))
    assert exposed.intra_bandwidth[0] > 0  # TP's collectives: all of them without tp_comm_overlap, 1/8 with


def test_interleaved_pipeline_sends_overlap_by_default_and_1f1b_ones_wait():
    """Megatron's --overlap-p2p-communication (on by default, used only with virtual stages): under the
    interleaved schedule the sends run beside another chunk's compute, the step's first one in the open
    (1 of 2·v·m sends: v = 2 chunks, m = 8 micro-batches → 32); under 1F1B every send waits."""
    base = {"strategy": "fsdp", "pipeline_parallel_degree": 2}
    batch = {"per_gpu_samples": 8, "micro_samples": 1}

    def pp(par):
        w = spec({**base, **par}, batch=batch)
        return next(t for t in L.build(w, [16]).traffic(w) if t.name.startswith("pp"))

    inter = pp({"pipeline_schedule": "interleaved", "pipeline_virtual_stages": 2})
    assert inter.overlappable and inter.calls[0] == 2 * 2 * 8
    assert inter.exposed_share[0] == pytest.approx(1 / 32)
    off = pp({"pipeline_schedule": "interleaved", "pipeline_virtual_stages": 2, "overlap_p2p_comm": False})
    assert not off.overlappable and off.exposed_share == 1.0
    assert pp({}).exposed_share == 1.0 and not pp({}).overlappable


def test_overlap_p2p_comm_needs_the_interleaved_schedule():
    from advisor.errors import InputError

    with pytest.raises(InputError, match="overlap_p2p_comm"):
        spec({"strategy": "fsdp", "pipeline_parallel_degree": 2, "overlap_p2p_comm": True},
             batch={"per_gpu_samples": 8, "micro_samples": 1})


def test_distributed_optimizer_calls_follow_megatron_buckets():
    """Megatron-Core's bucket: max(40M, 1M x dp) parameters (one bucket without overlap_grad_reduce):
    8.0B parameters over dp 8 → 40M-parameter buckets, 200 calls; over dp 64 → 64M, 125 calls."""
    w = spec({"strategy": "ddp", "distributed_optimizer": True})
    for gpus, calls in ((8, 200), (64, 125)):
        rs, ag = _dp(w, gpus)
        assert rs.latency_calls[0] == calls and ag.latency_calls[0] == calls
        assert rs.exposed_share[0] == pytest.approx(1 / calls)  # the last bucket waits
    whole = spec({"strategy": "ddp", "distributed_optimizer": True, "overlap_grad_reduce": False})
    assert _dp(whole)[0].latency_calls[0] == 1 and _dp(whole)[0].exposed_share == 1.0
