"""Physical features against hand-computed values from the workload's declared numbers."""

from __future__ import annotations

import numpy as np
import pytest
from h100_job import LLM7B

from advisor.scaling import features as F


def test_compute_is_flops_per_gpu_at_peak():
    # llm7b: (6·P + 12·L·H·T)·T FLOPs per sample, 1024 samples over 64 GPUs, H100 bf16 dense peak.
    per_sample = (6 * 6.7e9 + 12 * 32 * 4096 * 4096) * 4096
    peak = LLM7B.peak_flops
    assert peak and peak > 1e14
    got = F.compute_seconds(LLM7B, np.array([64.0]), np.array([1024.0]))[0]
    assert got == pytest.approx(per_sample * 16 / peak)


def test_a_probe_is_priced_by_the_step_models_crossing_rule():
    # all_reduce of 1 GB over 16 ranks on 2 nodes (8 per node), NCCL's tree: the buffer once through
    # each node's NICs (400 GB/s), an all-reduce over the node's 8 on NVLink (2·7/8 GB at 450 GB/s),
    # pipelined: the slower (NVLink here) is the crossing time; tree hops 2·log2(16) = 8 at 10 us
    links = F.probe_link_seconds(LLM7B, "all_reduce", np.array([16.0]), np.array([2.0]), np.array([1e9]))
    assert links.intra_bandwidth[0] == 0
    assert links.inter_bandwidth[0] == pytest.approx(max(1e9 / 400e9, 2 * 7 / 8 * 1e9 / 450e9))
    assert links.inter_latency[0] == pytest.approx(8 * 10e-6) and links.intra_latency[0] == 0
    # in one node: NVLink only, ring hops 2·7 at 3 us; a reduce-scatter is half the hops
    one = F.probe_link_seconds(LLM7B, "reduce_scatter", np.array([8.0]), np.array([1.0]), np.array([1e9]))
    assert one.intra_bandwidth[0] == pytest.approx(7 / 8 * 1e9 / 450e9) and one.inter_bandwidth[0] == 0
    assert one.intra_latency[0] == pytest.approx(7 * 3e-6)


def test_a_probe_with_one_rank_per_node_uses_no_intra_node_link():
    # HSDP's replica group: 4 ranks on 4 nodes, GPU -> NIC directly (as the step model charges that group)
    links = F.probe_link_seconds(LLM7B, "all_reduce", np.array([4.0]), np.array([4.0]), np.array([1e9]))
    assert links.intra_bandwidth[0] == 0
    assert links.inter_bandwidth[0] == pytest.approx(2 * 3 / 4 * 1e9 / 400e9)


def test_the_probe_and_the_step_charge_hsdps_replica_group_alike():
    # HSDP at 32 GPUs on 4 nodes: shard group of 8 in each node, replica groups of 4 ranks, one per node.
    # The step's replica all-reduce and a probe of that group (4 ranks on 4 nodes) meet the same rule:
    # no NVLink bytes, tree hops 2·log2(4) across nodes. (The step's NICs also carry the node's 7 other
    # replica rings, which run at the same time: a probe record names its group, not the world.)
    from advisor.topology.layouts import build

    w = LLM7B.model_copy(update={"parallelism": LLM7B.parallelism.model_copy(update={"strategy": "hsdp"})})
    lay = build(w, [32], [4])
    replica = [t for t in lay.traffic(w) if t.name.startswith("hsdp replica")]
    step = lay.link_seconds(w, traffic=replica)
    probe = F.probe_link_seconds(w, "all_reduce", np.array([4.0]), np.array([4.0]), np.array([1e9]))
    assert step.intra_bandwidth[0] == probe.intra_bandwidth[0] == 0
    # per call: the step issues one replica all-reduce per wrapped block (32 layers + the root)
    assert step.inter_latency[0] / 33 == pytest.approx(probe.inter_latency[0])
    assert probe.inter_latency[0] == pytest.approx(2 * 2 * 10e-6)
