"""advisor.planning.billing against hand-computed cases: GPU counts, steps, on-demand, spot under the
exponential preemption model (Daly 2006), reserved below and above min_hours, caps and whole instances.

Expected values are worked out in the comments or computed here independently of the implementation:
the preemption factor from Daly's closed form with τ found by a bounded scalar minimisation (the code
uses the Lambert-W optimum), the wall-time spread by simulating preemptions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.planning.billing import Preemption, gpu_counts, job_steps, sweep
from recommend_inputs import Amdahl, exact_factor, workload


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
    counts = gpu_counts(8, 32768)  # 4,096 nodes: every one
    assert counts[-1] == 32768 and counts.size == 3 + 32768 // 8


@pytest.mark.parametrize("per_node, max_gpus", [(8, 65536), (1, 2**20), (8, 2**20), (6, 100_001)])
def test_past_4096_nodes_the_counts_thin_to_256_a_doubling(per_node, max_gpus):
    """Every whole node up to 4,096 nodes, then counts no more than 2^(1/256) (+ one node's rounding) apart
    up to the largest whole-node count: a 2^20-count sweep did not finish in 10 minutes."""
    counts = gpu_counts(per_node, max_gpus)
    whole = counts[counts >= per_node]
    assert np.all(whole % per_node == 0) and np.all(np.diff(counts) > 0)
    assert whole[-1] == max_gpus // per_node * per_node
    assert whole[:4096].tolist() == [per_node * n for n in range(1, 4097)]
    ratios = whole[4096:] / whole[4095:-1]
    assert ratios.max() <= 2 ** (1 / 256) + 1.0 / 4096
    nodes = max_gpus // per_node
    assert whole.size <= 4096 + 256 * np.log2(nodes / 4096) + 2


def per_gpu(**more):
    return workload(**{"batch.policy": "fixed-per-gpu", "batch.global_samples": None, "batch.per_gpu_samples": 10,
                       "job.steps": None, "job.samples": 1_000_000, **more})


def test_steps_fixed_per_gpu_shrink_with_the_global_batch():
    # 1e6 / (N x 10): N=1 100000, N=4 25000, N=3 ceil(33333.3) = 33334
    assert job_steps(per_gpu(), np.array([1, 4, 3]), 1).tolist() == [100000, 25000, 33334]


def test_max_global_samples_caps_the_batch_and_shrinks_the_per_gpu_share():
    # cap 25: N=1 10, N=2 20, N=4 floor(25/4)=6 per GPU -> 24, N=8 3 -> 24, N=12 2 -> 24, N=16 1 -> 16
    w = per_gpu(**{"batch.max_global_samples": 25})
    sw = sweep(w, Amdahl())
    assert sw.global_batch.tolist() == [10, 20, 24, 24, 24, 16]
    assert sw.steps.tolist() == [math.ceil(1e6 / b) for b in (10, 20, 24, 24, 24, 16)]
    # a cap below N leaves under one sample per GPU: left out
    sw = sweep(per_gpu(**{"batch.max_global_samples": 8}), Amdahl())
    assert sw.gpus[sw.fits_batch].tolist() == [1, 2, 4, 8]


def test_steps_fixed_global_from_samples_round_up():
    w = workload(**{"job.steps": None, "job.samples": 1000})
    assert job_steps(w, np.array([1, 8]), 1).tolist() == [16, 16]  # ceil(1000 / 64) = 16 at every N


def test_steps_follow_gradient_noise_scale_when_declared():
    w = per_gpu(**{"batch.gradient_noise_scale": 100})
    # Reference batch B0 = 10 (baseline 1 GPU), S0 = 1e6/10 = 1e5, S_min = S0/(1 + 100/10) = 9090.9.
    # N=10: B=100, S = S_min (1 + 100/100) = 18181.8 -> 18182 (linear scaling would say 10000).
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


def test_spot_with_known_preemption_rate():
    sw = sweep(workload(), Amdahl())
    # 1 node: Λ = 0.5/h, δ = 0.02 h, R = 0.1 h: minimising e^{ΛR}(e^{Λ(τ+δ)} − 1)/(Λτ) gives τ = 0.26967 h and
    # 1.215110 (first-order Young/Daly said 1.191421); 2 nodes: Λ = 1/h, τ = 0.18689 h, 1.359198 (first order 1.3)
    for gpus, rate, hours, expected, tau in ((4, 0.5, 1.0, 1.2151102, 0.2696695), (8, 1.0, 0.6, 1.3591981, 0.1868949)):
        t, c = at(sw, "spot", gpus)
        factor, tau_numeric = exact_factor(rate, 0.02, 0.1)
        assert factor == pytest.approx(expected, abs=1e-6) and tau_numeric == pytest.approx(tau, abs=1e-5)
        assert sw.wall_hours[0, t, c] == pytest.approx(hours * factor, rel=1e-7)
        assert sw.cost_usd[0, t, c] == pytest.approx(gpus * hours * factor * 1.0, rel=1e-7)
        assert sw.preemption.interval_hours[t, c] == pytest.approx(tau_numeric, rel=1e-5)
    t, c = at(sw, "spot", 8)
    assert sw.speedup[t, c] == pytest.approx(3.4 / (0.6 * 1.3591981), rel=1e-6)  # preemption loss counted


def test_high_rate_example_from_the_issue():
    # 73 nodes x 0.05/h = 3.65/h, checkpoint 2 min, restart 10 min: the exponential model says ~3.1x,
    # first-order Young/Daly 2.1x; Λ·(τ + R) is far from small.
    pre = Preemption.of(0.05, 73, 120, 600)
    factor, tau = exact_factor(3.65, 2 / 60, 10 / 60)
    assert factor == pytest.approx(3.1448, abs=1e-3)
    assert float(pre.factor) == pytest.approx(factor, rel=1e-6)
    assert float(pre.first_order_factor) == pytest.approx(1 + math.sqrt(2 * 3.65 / 30) + 3.65 / 6)
    assert float(pre.exposure) == pytest.approx(3.65 * (tau + 10 / 60), rel=1e-4) and float(pre.exposure) > 0.5


def test_small_rates_agree_with_first_order_young_daly():
    pre = Preemption.of(1e-3, 1, 60, 60)  # Λ·(τ + R) ~ 0.01
    assert float(pre.factor) == pytest.approx(float(pre.first_order_factor), rel=1e-3)


def test_spot_without_checkpoint_cost_pays_restarts_and_their_own_failures():
    sw = sweep(workload(**{"tiers.1.checkpoint": 0}), Amdahl())
    t, c = at(sw, "spot", 8)
    # δ = 0: τ -> 0, the factor tends to e^{ΛR} = e^{0.1} (a restart is retried when it fails too); 0.6 h -> 0.6 e^{0.1}
    assert sw.wall_hours[0, t, c] == pytest.approx(0.6 * math.exp(0.1), rel=1e-6)


def simulate_wall_hours(rng, compute, tau, delta, restart, rate, jobs):
    """Wall hours of `jobs` runs of `compute` hours: segments of τ work + δ checkpoint, an exponential
    clock that strikes during work, checkpoints and restarts alike; a strike loses the segment."""
    out = np.empty(jobs)
    segments = round(compute / tau)
    for j in range(jobs):
        wall = 0.0
        for _ in range(segments):
            while True:
                strike = rng.exponential(1 / rate)
                if strike >= tau + delta:
                    wall += tau + delta
                    break
                wall += strike
                while True:  # restart, itself interrupted by strikes
                    again = rng.exponential(1 / rate)
                    if again >= restart:
                        wall += restart
                        break
                    wall += again
        out[j] = wall
    return out


def test_wall_time_mean_and_spread_match_a_simulation():
    rate, delta, restart = 2.0, 0.02, 0.1
    pre = Preemption.of(rate, 1, delta * 3600, restart * 3600)
    tau = float(pre.interval_hours)
    compute = 40 * tau  # a whole number of segments, as the simulation runs
    wall = simulate_wall_hours(np.random.default_rng(7), compute, tau, delta, restart, rate, 4000)
    assert wall.mean() / compute == pytest.approx(float(pre.factor), rel=0.01)
    assert wall.std() / wall.mean() == pytest.approx(float(pre.cv(compute)), rel=0.06)


def test_spot_wall_time_over_on_demand_matches_the_exact_factor_on_a_real_spec():
    from advisor.spec import load_workload
    from conftest import WORKLOADS

    w = load_workload(WORKLOADS / "llm7b.toml")
    sw = sweep(w, Amdahl(serial=0.5, parallel=60.0, per_node=0.05))
    od, spot = at(sw, "on-demand", 8)[0], at(sw, "spot", 8)[0]
    tier = sw.tiers[spot]
    for c in range(0, sw.gpus.size, 7):
        nodes = int(sw.nodes[c])
        factor, _ = exact_factor(tier.preemptions_per_node_hour * nodes, tier.checkpoint / 3600, tier.restart / 3600)
        assert sw.wall_hours[0, spot, c] / sw.wall_hours[0, od, c] == pytest.approx(factor, rel=0.05)


def test_reserved_bills_min_hours_below_and_actual_hours_above():
    sw = sweep(workload(), Amdahl())
    t, c = at(sw, "reserved", 1)
    # 1 GPU: 3.4 h > min 2 h -> billed 3.4 h: 1 x 3.4 x 1.5 = $5.10
    assert sw.cost_usd[0, t, c] == pytest.approx(5.1)
    t, c = at(sw, "reserved", 4)
    # 4 GPUs: 1.0 h < 2 h -> billed 2 h: 4 x 2 x 1.5 = $12; the wall time is still 1.0 h
    assert sw.cost_usd[0, t, c] == pytest.approx(12.0)
    assert sw.wall_hours[0, t, c] == pytest.approx(1.0)
    # the floor and the inverse of the same rule: $12 floor; $20 buys 20 / (4 x 1.5) = 3.33 h; $11 buys nothing
    assert sw.billed_floor_usd()[t, c] == pytest.approx(12.0)
    assert sw.billing.affordable_hours(sw.gpus, 20.0)[t, c] == pytest.approx(20 / 6)
    assert sw.billing.affordable_hours(sw.gpus, 11.0)[t, c] == -np.inf


def test_caps_per_tier_and_a_global_batch_that_does_not_divide():
    sw = sweep(workload(**{"tiers.1.max_gpus": 8}), Amdahl())
    t, _ = at(sw, "spot", 8)
    assert sw.gpus[sw.available[t]].tolist() == [1, 2, 4, 8]
    t, _ = at(sw, "on-demand", 8)
    # global batch 64: 12 GPUs would split it 5.33 per GPU, not the recipe: left out
    assert sw.gpus[sw.available[t]].tolist() == [1, 2, 4, 8, 16]
    sw = sweep(workload(**{"batch.global_samples": 8}), Amdahl())
    assert sw.gpus[sw.available[0]].tolist() == [1, 2, 4, 8]
    assert sw.global_batch.tolist() == [8] * 6


def test_whole_instances_only():
    w = workload(**{"tiers.0.instance_gpus": 8, "cluster.max_gpus": 64})
    sw = sweep(w, Amdahl())
    t, _ = at(sw, "on-demand", 8)
    assert sw.gpus[sw.available[t]].tolist() == [8, 16, 32, 64]  # 24, 40, 48, 56 do not divide 64
    assert all(g % 8 == 0 for g in sw.gpus[sw.offered[t]].tolist())
    assert sw.gpus[sw.offered[t]].tolist() == [8, 16, 24, 32, 40, 48, 56, 64]


def test_interval_scales_hours_and_cost():
    sw = sweep(workload(), Amdahl(low_ratio=0.5, high_ratio=1.5))
    t, c = at(sw, "on-demand", 4)
    assert sw.cost_usd[:, t, c] == pytest.approx([8.0, 4.0, 12.0])
    t, c = at(sw, "reserved", 4)
    # reserved floors every bound at 2 h: 4 x 2 x 1.5 = 12 for low, median; high 1.5 h < 2 h too
    assert sw.cost_usd[:, t, c] == pytest.approx([12.0, 12.0, 12.0])


def test_counts_whose_gpus_cannot_hold_the_model_states_are_left_out():
    # No transformer shape: state only. 6.7B params x 16 bytes (ZeRO §3.1) = 107.2 GB; an H100-SXM holds 80 GB.
    # FSDP shards: 1 GPU 107.2 GB (no), 2 GPUs 53.6 GB (yes). DDP keeps all on each GPU: never fits.
    assert sweep(workload(), Amdahl()).fits_memory.all()  # DDP at 1e9 params: 16 GB per GPU
    sw = sweep(workload(**{"model.params": 6.7e9, "parallelism.strategy": "fsdp"}), Amdahl())
    assert sw.gpus[sw.fits_memory].tolist() == [2, 4, 8, 12, 16]
    assert sw.memory_bytes[1] == pytest.approx(53.6e9)
    assert not sw.available[:, 0].any()
    sw = sweep(workload(**{"model.params": 6.7e9}), Amdahl())
    assert not sw.fits_memory.any() and not sw.available.any()
    # [cluster] gpu_memory overrides the catalog: 120 GB holds 107.2 GB on one GPU
    sw = sweep(workload(**{"model.params": 6.7e9, "cluster.gpu_memory": "120 GB"}), Amdahl())
    assert sw.fits_memory.all() and sw.gpu_memory == 120e9


def test_optimal_interval_solver_matches_lambert_w():
    from scipy.special import lambertw

    from advisor.planning.billing import optimal_exposure

    c = np.logspace(-6, 3, 500)
    exact = 1 + lambertw(-np.exp(-(1 + c))).real
    assert np.allclose(optimal_exposure(c), exact, rtol=1e-8)
    # tiny Λδ: first order, Λτ = sqrt(2Λδ)
    assert float(optimal_exposure(1e-12)) == pytest.approx(math.sqrt(2e-12), rel=1e-5)


def test_a_job_preempted_too_often_to_finish_is_no_plan():
    # 60 preemptions per node-hour (the spec's upper bound) against a 12-hour restart: e^{ΛR} overflows;
    # such plans are left out, not priced
    sw = sweep(workload(**{"tiers.1.preemptions_per_node_hour": 60, "tiers.1.restart": "12 h"}), Amdahl())
    t, _ = at(sw, "spot", 4)
    assert not sw.available[t].any() and sw.available[0].any()
