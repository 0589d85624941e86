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
    # all_reduce of 1 GB over 16 ranks on 2 nodes (8 per node): 2·15/16 GB per rank on NVLink (450 GB/s)
    # and through each node's NICs (400 GB/s); tree hops 2·log2(16) = 8 at 10 us
    links = F.probe_link_seconds(LLM7B, "all_reduce", np.array([16.0]), np.array([2.0]), np.array([1e9]))
    bus = 2 * 15 / 16 * 1e9
    assert links.intra_bandwidth[0] == pytest.approx(bus / 450e9)
    assert links.inter_bandwidth[0] == pytest.approx(bus / 400e9)
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
