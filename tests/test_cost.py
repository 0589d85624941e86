"""advisor.planning.billing against hand-computed cases: GPU counts, steps, on-demand, spot with a known
preemption rate (Young/Daly), reserved below and above min_hours, availability caps.

Expected values are worked out in the comments from the formulas of DESIGN.md §6, written
independently of the implementation (spot uses the τ form, the code uses the closed form).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.planning.billing import checkpoint_interval_hours, gpu_counts, job_steps, sweep
from recommend_inputs import Amdahl, workload


def at(sw, tier_name, gpus):
    """(tier index, count index) of a plan in a sweep."""
    t = [x.name for x in sw.tiers].index(tier_name)
    c = int(np.flatnonzero(sw.gpus == gpus)[0])
    return t, c


@pytest.mark.parametrize("per_node, max_gpus, expected", [
    (4, 16, [1, 2, 4, 8, 12, 16]),
    (8, 40, [1, 2, 4, 8, 16, 24, 32, 40]),
    (6, 20, [1, 2, 4, 6, 12, 18]),       # not a power of two: the whole node is a count too
    (8, 4, [1, 2, 4]),                   # the cluster is smaller than a node
    (1, 5, [1, 2, 3, 4, 5]),             # one GPU per node: every count
])
def test_gpu_counts_are_powers_of_two_in_a_node_then_whole_nodes(per_node, max_gpus, expected):
    assert gpu_counts(per_node, max_gpus).tolist() == expected


def test_gpu_counts_reach_65536_vectorised():
    counts = gpu_counts(8, 65536)
    assert counts[-1] == 65536 and counts.size == 3 + 65536 // 8


def test_steps_fixed_per_gpu_shrink_with_the_global_batch():
    w = workload(**{"batch.policy": "fixed-per-gpu", "batch.global_samples": None, "batch.per_gpu_samples": 10,
                    "job.steps": None, "job.samples": 1_000_000})
    # 1e6 / (N x 10): N=1 100000, N=4 25000, N=3 ceil(33333.3) = 33334
    assert job_steps(w, np.array([1, 4, 3]), 1).tolist() == [100000, 25000, 33334]


def test_steps_fixed_global_from_samples_round_up():
    w = workload(**{"job.steps": None, "job.samples": 1000})
    assert job_steps(w, np.array([1, 8]), 1).tolist() == [16, 16]  # ceil(1000 / 64) = 16 at every N


def test_steps_follow_gradient_noise_scale_when_declared():
    w = workload(**{"batch.policy": "fixed-per-gpu", "batch.global_samples": None, "batch.per_gpu_samples": 10,
                    "batch.gradient_noise_scale": 100, "job.steps": None, "job.samples": 1_000_000})
    # Reference batch B0 = 10 (baseline 1 GPU), S0 = 1e6/10 = 1e5, S_min = S0/(1 + 100/10) = 9090.9.
    # N=10: B=100, S = S_min (1 + 100/100) = 18181.8 -> 18182 (linear scaling would say 10000).
    # N=1: S0 = 100000 exactly.
    assert job_steps(w, np.array([1, 10]), 1).tolist() == [100000, 18182]


def test_gradient_noise_scale_changes_nothing_under_fixed_global():
    w = workload(**{"batch.gradient_noise_scale": 100})
    assert job_steps(w, np.array([1, 16]), 1).tolist() == [3600, 3600]


def test_on_demand_hours_and_cost():
    sw = sweep(workload(), Amdahl())
    t, c = at(sw, "on-demand", 4)
    # T(4) = 0.2 + 3.2/4 = 1.0 s; 3600 steps -> 1.0 h; 4 GPUs x 1.0 h x $2 = $8
    assert sw.wall_hours[0, t, c] == pytest.approx(1.0)
    assert sw.cost_usd[0, t, c] == pytest.approx(8.0)
    t, c = at(sw, "on-demand", 16)
    # T(16) = 0.2 + 0.2 = 0.4 h; 16 x 0.4 x 2 = $12.8; speedup vs 1 GPU (3.4 h) = 8.5, efficiency 8.5/16
    assert sw.cost_usd[0, t, c] == pytest.approx(12.8)
    assert sw.speedup[t, c] == pytest.approx(8.5)
    assert sw.efficiency[t, c] == pytest.approx(8.5 / 16)


def young_daly_factor(rate_per_node_hour, nodes, checkpoint_h, restart_h):
    """1 + δ/τ + Λ(τ/2 + restart), τ = sqrt(2δ/Λ), Λ = rate x nodes: the DESIGN.md §6 form."""
    lam = rate_per_node_hour * nodes
    tau = math.sqrt(2 * checkpoint_h / lam)
    return 1 + checkpoint_h / tau + lam * (tau / 2 + restart_h)


def test_spot_with_known_preemption_rate():
    sw = sweep(workload(), Amdahl())
    t, c = at(sw, "spot", 4)
    # 1 node: Λ = 0.5/h, δ = 0.02 h, τ = sqrt(0.08) = 0.28284 h; factor = 1 + 0.070711 + 0.5(0.141421 + 0.1) = 1.191421
    assert young_daly_factor(0.5, 1, 0.02, 0.1) == pytest.approx(1.191421, abs=1e-6)
    assert sw.wall_hours[0, t, c] == pytest.approx(1.0 * 1.191421, abs=1e-6)
    assert sw.cost_usd[0, t, c] == pytest.approx(4 * 1.191421 * 1.0, abs=1e-5)
    assert checkpoint_interval_hours(0.5, 1, 72.0) == pytest.approx(math.sqrt(0.08))
    t, c = at(sw, "spot", 8)
    # 2 nodes: Λ = 1/h, τ = 0.2 h; factor = 1 + 0.1 + 1(0.1 + 0.1) = 1.3; T(8) = 0.6 h -> 0.78 h, 8 x 0.78 x $1 = $6.24
    assert sw.wall_hours[0, t, c] == pytest.approx(0.78)
    assert sw.cost_usd[0, t, c] == pytest.approx(6.24)
    # spot's speedup counts the preemption loss: 3.4 h / 0.78 h
    assert sw.speedup[t, c] == pytest.approx(3.4 / 0.78)


def test_spot_without_checkpoint_cost_pays_only_restarts():
    sw = sweep(workload(**{"tiers.1.checkpoint": 0}), Amdahl())
    t, c = at(sw, "spot", 8)
    # δ = 0: τ -> 0, only Λ·restart remains: 1 + 1 x 0.1 = 1.1; 0.6 h -> 0.66 h
    assert sw.wall_hours[0, t, c] == pytest.approx(0.66)


def test_reserved_bills_min_hours_below_and_actual_hours_above():
    sw = sweep(workload(), Amdahl())
    t, c = at(sw, "reserved", 1)
    # 1 GPU: 3.4 h > min 2 h -> billed 3.4 h: 1 x 3.4 x 1.5 = $5.10
    assert sw.cost_usd[0, t, c] == pytest.approx(5.1)
    t, c = at(sw, "reserved", 4)
    # 4 GPUs: 1.0 h < 2 h -> billed 2 h: 4 x 2 x 1.5 = $12; the wall time is still 1.0 h
    assert sw.cost_usd[0, t, c] == pytest.approx(12.0)
    assert sw.wall_hours[0, t, c] == pytest.approx(1.0)


def test_caps_per_tier_and_batch():
    sw = sweep(workload(**{"tiers.1.max_gpus": 8}), Amdahl())
    t, _ = at(sw, "spot", 8)
    assert sw.gpus[sw.available[t]].tolist() == [1, 2, 4, 8]
    t, _ = at(sw, "on-demand", 8)
    assert sw.gpus[sw.available[t]].tolist() == [1, 2, 4, 8, 12, 16]
    # global batch 8: 12 and 16 GPUs would hold under one sample each
    sw = sweep(workload(**{"batch.global_samples": 8}), Amdahl())
    assert sw.gpus[sw.available[0]].tolist() == [1, 2, 4, 8]


def test_interval_scales_hours_and_cost():
    sw = sweep(workload(), Amdahl(low_ratio=0.5, high_ratio=1.5))
    t, c = at(sw, "on-demand", 4)
    assert sw.cost_usd[:, t, c] == pytest.approx([8.0, 4.0, 12.0])
    t, c = at(sw, "reserved", 4)
    # reserved floors every bound at 2 h: 4 x 2 x 1.5 = 12 for low, median; high 1.5 h < 2 h too
    assert sw.cost_usd[:, t, c] == pytest.approx([12.0, 12.0, 12.0])


def test_counts_whose_gpus_cannot_hold_the_model_states_are_left_out():
    # 6.7B params x 16 bytes (ZeRO §3.1) = 107.2 GB; an H100-SXM holds 80 GB.
    # FSDP shards: 1 GPU 107.2 GB (no), 2 GPUs 53.6 GB (yes). DDP keeps all on each GPU: never fits.
    assert sweep(workload(), Amdahl()).fits_memory.all()  # DDP at 1e9 params: 16 GB per GPU
    sw = sweep(workload(**{"model.params": 6.7e9, "parallelism.strategy": "fsdp"}), Amdahl())
    assert sw.gpus[sw.fits_memory].tolist() == [2, 4, 8, 12, 16]
    assert not sw.available[:, 0].any()
    sw = sweep(workload(**{"model.params": 6.7e9}), Amdahl())
    assert not sw.fits_memory.any() and not sw.available.any()
