"""Physical features against hand-computed values from the workload's declared numbers."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.scaling import features as F
from advisor.spec import workload_from_dict
from advisor.topology import collectives as C


def spec(**over):
    """A fixed spec (not the examples, which follow their sources): a 7B FSDP job on H100 nodes."""
    data = {
        "name": "t",
        "model": {"params": "6.7B", "layers": 32, "hidden": 4096, "heads": 32, "seq_len": 4096, "precision": "bf16"},
        "batch": {"policy": "fixed-global", "global_samples": 1024, "micro_samples": 2},
        "parallelism": {"strategy": "fsdp"},
        "cluster": {"gpu": "H100-SXM", "gpus_per_node": 8, "max_gpus": 1024, "intra_node_bandwidth": "450 GB/s",
                    "intra_node_latency": "3 us", "inter_node_bandwidth": "3200 Gbit/s", "inter_node_latency": "10 us"},
        "job": {"samples": "250M"},
        "tiers": [{"name": "on-demand", "usd_per_gpu_hour": 2.64}],
    }
    for key, value in over.items():
        section, field = key.split("__")
        data[section][field] = value
    return workload_from_dict(data)


LLM7B = spec()
RESNET = workload_from_dict({
    "name": "r", "model": {"params": "25.6M", "precision": "fp16", "flops_per_sample": 2.3e10},
    "batch": {"policy": "fixed-per-gpu", "per_gpu_samples": 32}, "parallelism": {"strategy": "ddp"},
    "cluster": {"gpu": "A100-SXM", "max_gpus": 64, "inter_node_bandwidth": "1600 Gbit/s"},
    "job": {"samples": "1M"}, "tiers": [{"name": "x", "usd_per_gpu_hour": 1}]})


def test_fsdp_volume_is_three_passes_of_the_gradient():
    # 6.7e9 params in bf16 = 13.4e9 bytes; at 8 GPUs 3 * 7/8 of it (nccl-tests busbw factors).
    assert F.volume_bytes(LLM7B, np.array([8.0]))[0] == pytest.approx(3 * 7 / 8 * 6.7e9 * 2)


def test_ddp_volume_is_one_ring_all_reduce():
    # 25.6e6 params in fp16 = 51.2e6 bytes; ring all-reduce 2(N-1)/N of it.
    assert F.volume_bytes(RESNET, np.array([4.0]))[0] == pytest.approx(2 * 3 / 4 * 25.6e6 * 2)
    assert F.volume_bytes(RESNET, np.array([1.0]))[0] == 0


def test_bottleneck_is_the_intra_link_in_one_node_and_the_node_nics_across():
    bw = C.bus_bandwidth(LLM7B, np.array([1, 2, 16]))
    assert bw[0] == pytest.approx(450e9)
    assert bw[1] == bw[2] == pytest.approx(3200e9 / 8)  # 3200 Gbit/s = 400 GB/s, under NVLink's 450


def test_latency_hops_ring_inside_tree_across():
    lat = C.hop_latency_seconds(LLM7B, np.array([8.0, 64.0]), np.array([1.0, 8.0]))
    assert lat[0] == pytest.approx(2 * 7 * 3e-6)
    assert lat[1] == pytest.approx(2 * 6 * 10e-6)
    ring = C.hop_latency_seconds(LLM7B, np.array([64.0]), np.array([8.0]), inter_hops="ring")
    assert ring[0] == pytest.approx(2 * 63 * 10e-6)


def test_compute_is_flops_per_gpu_at_peak():
    # llm7b: (6·P + 12·L·H·T)·T FLOPs per sample, 1024 samples over 64 GPUs, H100 bf16 dense peak.
    per_sample = (6 * 6.7e9 + 12 * 32 * 4096 * 4096) * 4096
    peak = LLM7B.peak_flops
    assert peak and peak > 1e14
    got = F.compute_seconds(LLM7B, np.array([64.0]), np.array([1024.0]))[0]
    assert got == pytest.approx(per_sample * 16 / peak)


def test_bus_bandwidth_matches_nccl_tests_definition():
    # nccl-tests: busbw = size/time * 2(n-1)/n for all_reduce.
    assert C.bus_bandwidth_gbps("all_reduce", 8, 1e9, 0.01) == pytest.approx(100 * 2 * 7 / 8)
    assert C.bus_bandwidth_gbps("all_gather", 8, 1e9, 0.01) == pytest.approx(100 * 7 / 8)
