"""advisor.planning.recommend: objectives at their edges (hand-computed), the default worth-the-cost walk
on frontiers built by hand, odds from the model's interval and from preemptions, knife-edge budgets,
the bar properties checked by brute force over every candidate, and where spot stops paying off.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.errors import InputError
from advisor.planning.limits import Limits, Objective
from advisor.planning.recommend import pareto_frontier, probability_at_most, recommend, worth_the_cost
from advisor.spec import load_workload
from advisor.step_model import StepTimeModel
from conftest import WORKLOADS
from recommend_inputs import Amdahl, exact_factor, workload

# On-demand alone, T(N) = 0.2 + 3.2/N h (3600 steps), cost = N x T x $2:
#   N   1     2     4    8    16
#   h   3.4   1.8   1.0  0.6  0.4
#   $   6.8   7.2   8.0  9.6  12.8
# (12 GPUs would not divide the global batch of 64: left out)


def chosen(rec):
    t, c = rec.chosen
    return int(rec.sweep.gpus[c]), rec.sweep.tiers[t].name


@pytest.mark.parametrize("budget, gpus", [(8.0, 4), (7.999, 2), (6.9, 1), (12.8, 16), (12.7, 8), (100.0, 16)])
def test_budget_edge_fastest_within(budget, gpus):
    rec = recommend(workload(), Amdahl(), budget=budget, tier="on-demand")
    assert chosen(rec) == (gpus, "on-demand")
    assert rec.objective is Objective.FASTEST_WITHIN_BUDGET


@pytest.mark.parametrize("deadline, gpus", [(1.0, 4), (0.999, 8), (3.5, 1), (0.4, 16), (0.59, 16)])
def test_deadline_edge_cheapest_within(deadline, gpus):
    rec = recommend(workload(), Amdahl(), deadline=deadline, tier="on-demand")
    assert chosen(rec) == (gpus, "on-demand")


def test_budget_and_deadline_cheapest_meeting_both():
    # within 0.7 h: 8 and 16 GPUs; within $12.8: both; cheapest: 8 GPUs ($9.6)
    rec = recommend(workload(), Amdahl(), budget=12.8, deadline=0.7, tier="on-demand")
    assert chosen(rec) == (8, "on-demand") and rec.objective is Objective.CHEAPEST_WITHIN_BOTH


def test_nothing_qualifies_says_so_and_shows_the_closest():
    rec = recommend(workload(), Amdahl(), budget=5.0, tier="on-demand")
    assert rec.chosen is None and "No plan qualifies" in rec.message
    assert [int(rec.sweep.gpus[c]) for _, c in rec.closest] == [1, 2, 4]  # cheapest first: $6.8, 7.2, 8.0
    rec = recommend(workload(), Amdahl(), deadline=0.1, tier="on-demand")
    assert [int(rec.sweep.gpus[c]) for _, c in rec.closest] == [16, 8, 4]  # fastest first
    # both: max(cost/6, hours/0.5): N=8 1.6, N=4 max(1.33, 2) = 2, N=16 max(2.13, 0.8) = 2.13 -> 8, 4, 16
    rec = recommend(workload(), Amdahl(), budget=6.0, deadline=0.5, tier="on-demand")
    assert [int(rec.sweep.gpus[c]) for _, c in rec.closest] == [8, 4, 16]
    assert "closest: 8 GPUs" in rec.message


def test_speedup_per_dollar_by_name_is_the_literal_ratio_by_brute_force():
    w = load_workload(WORKLOADS / "llm7b.toml")
    rec = recommend(w, Amdahl(serial=0.5, parallel=60.0, per_node=0.05), objective=Objective.SPEEDUP_PER_DOLLAR)
    sw = rec.sweep
    best, best_value = None, -1.0
    for t in range(len(sw.tiers)):
        for c in range(sw.gpus.size):
            if sw.available[t, c]:
                value = (sw.baseline_hours / sw.wall_hours[0, t, c]) / sw.cost_usd[0, t, c]
                if value > best_value:
                    best, best_value = (t, c), value
    assert rec.chosen == best and rec.objective is Objective.SPEEDUP_PER_DOLLAR


def test_probability_reads_the_90_percent_interval():
    # symmetric in log: median 1, [0.5, 2] -> the bounds are the 5th and 95th percentiles
    assert probability_at_most(np.array([0.5, 1.0, 2.0]), 1.0, 0.5, 2.0) == pytest.approx([0.05, 0.5, 0.95], abs=1e-9)
    # asymmetric: each side keeps its own spread
    assert probability_at_most(np.array([0.9, 1.5]), 1.0, 0.9, 1.5) == pytest.approx([0.05, 0.95], abs=1e-9)
    # no interval: certain on either side of the median
    assert probability_at_most(np.array([0.99, 1.0, 3.0]), 1.0, 1.0, 1.0).tolist() == [0.0, 1.0, 1.0]
    assert probability_at_most(np.array([-np.inf, np.inf]), 1.0, 0.5, 2.0).tolist() == [0.0, 1.0]


def test_odds_of_budget_and_deadline_per_plan():
    rec = recommend(workload(), Amdahl(low_ratio=0.8, high_ratio=1.2), budget=9.6, deadline=1.2)
    t, c = [x.name for x in rec.sweep.tiers].index("on-demand"), 2  # 4 GPUs
    # on-demand at 4 GPUs: cost 8 x [0.8, 1, 1.2] -> budget 9.6 is the high end (95%); deadline 1.2 h also (95%)
    assert rec.probabilities["budget"][t, c] == pytest.approx(0.95)
    assert rec.probabilities["deadline"][t, c] == pytest.approx(0.95)
    assert rec.probabilities["both"][t, c] == pytest.approx(0.95)
    # reserved at 4 GPUs always bills 2 h = $12 > 9.6: no chance, whatever the step time
    r = [x.name for x in rec.sweep.tiers].index("reserved")
    assert rec.probabilities["budget"][r, c] == 0.0


def test_confidence_asks_for_likely_plans():
    # median cost $8 at 4 GPUs: a $8 budget is a coin flip there; 2 GPUs ($7.2, at most $7.92 at the
    # interval's top) keep within it with over 95% odds, so at 90% confidence 2 GPUs win
    model = Amdahl(low_ratio=0.9, high_ratio=1.1)
    rec = recommend(workload(), model, budget=8.0, tier="on-demand")
    assert chosen(rec) == (4, "on-demand")
    assert any("likely" in line for line in rec.why)
    sure = recommend(workload(), model, budget=8.0, tier="on-demand", confidence=0.9)
    assert chosen(sure) == (2, "on-demand")
    assert any("with 90% odds: 2 GPUs" in line for line in rec.why)


def test_bad_limits_and_tier_are_one_line_errors():
    with pytest.raises(InputError, match=r"--budget: must be a positive number \(got -1"):
        recommend(workload(), Amdahl(), budget=-1)
    with pytest.raises(InputError, match=r"--deadline: must be a positive number \(got nan\)"):
        recommend(workload(), Amdahl(), deadline=float("nan"))
    with pytest.raises(InputError, match=r"no tier named 'spott'; did you mean 'spot'\?"):
        recommend(workload(), Amdahl(), tier="spott")


def brute_force_checks(rec, budget, deadline):
    """The bar, checked over every candidate independently of the selection code."""
    sw = rec.sweep
    plans = [(t, c, sw.wall_hours[0, t, c], sw.cost_usd[0, t, c])
             for t in range(len(sw.tiers)) for c in range(sw.gpus.size) if sw.available[t, c]]
    ok = [p for p in plans if (budget is None or p[3] <= budget) and (deadline is None or p[2] <= deadline)]
    if not ok:
        assert rec.chosen is None and rec.closest
        return
    t, c = rec.chosen
    hours, cost = sw.wall_hours[0, t, c], sw.cost_usd[0, t, c]
    if budget is not None:
        assert cost <= budget
    if deadline is not None:
        assert hours <= deadline
    if budget is None and deadline is None:
        return  # the default objective: test_default_objective_is_best_speedup_per_dollar_by_brute_force
    if budget is not None and deadline is None:
        assert not any(p[2] < hours for p in ok), "a plan within budget is faster"
    else:
        assert not any(p[3] < cost for p in ok), "a plan meeting the limits is cheaper"


@settings(max_examples=60, deadline=None)
@given(
    serial=st.floats(0.01, 5), parallel=st.floats(1, 500), per_node=st.floats(0, 0.5),
    budget=st.one_of(st.none(), st.floats(1e3, 1e7)), deadline=st.one_of(st.none(), st.floats(10, 1e4)),
)
def test_bar_properties_by_brute_force(serial, parallel, per_node, budget, deadline):
    w = load_workload(WORKLOADS / "llm7b.toml")
    rec = recommend(w, Amdahl(serial, parallel, per_node, 0.8, 1.3), budget=budget, deadline=deadline)
    brute_force_checks(rec, budget, deadline)


def test_frontier_is_exactly_the_undominated_plans():
    w = load_workload(WORKLOADS / "llm7b.toml")
    rec = recommend(w, Amdahl(serial=0.5, parallel=60.0, per_node=0.05))
    sw = rec.sweep
    plans = [(t, c) for t in range(len(sw.tiers)) for c in range(sw.gpus.size) if sw.available[t, c]]
    h, k = sw.wall_hours[0], sw.cost_usd[0]
    undominated = {
        p for p in plans
        if not any(h[q] <= h[p] and k[q] <= k[p] and (h[q] < h[p] or k[q] < k[p]) for q in plans)
    }
    assert set(rec.frontier) == undominated
    assert pareto_frontier(np.array([1.0, 2.0, 3.0]), np.array([3.0, 1.0, 2.0])).tolist() == [0, 1]


def test_high_spot_rate_cost_rises_with_nodes_and_the_output_names_where_it_stops_paying_off():
    # Perfect scaling (no serial part): on-demand costs the same at every count, so only preemptions
    # move spot's cost. 2 preemptions per node-hour, checkpoint 72 s, restart 6 min, spot at half price.
    w = workload(**{"tiers.1.preemptions_per_node_hour": 2.0, "cluster.max_gpus": 256})
    w = w.model_copy(update={"tiers": w.tiers[:2]})
    rec = recommend(w, Amdahl(serial=0.0, parallel=3600.0))
    sw = rec.sweep
    spot = [x.name for x in sw.tiers].index("spot")
    whole = sw.gpus % 4 == 0
    assert np.all(np.diff(sw.cost_usd[0, spot, whole]) > 0), "spot's expected cost must rise with node count"
    # Independent: spot (half price) pays while the exponential-model factor at Λ = 2n stays below 2
    nodes = next(n for n in range(1, 65) if exact_factor(2.0 * n, 0.02, 0.1)[0] >= 2)
    assert rec.spot[0].stops_at_gpus == 4 * nodes and rec.spot[0].compared_with == "on-demand"
    text = " ".join([rec.message, *rec.why])
    assert f"spot stops paying off at {4 * nodes} GPUs ({nodes} nodes)" in text


def test_spot_that_always_pays_is_said_to():
    rec = recommend(workload(), Amdahl(serial=0.0, parallel=3.2))
    assert rec.spot[0].stops_at_gpus is None
    assert any("stays cheaper than" in line for line in rec.why)


def test_sweep_over_65536_counts_and_every_tier():
    w = workload(**{"cluster.gpus_per_node": 1, "cluster.max_gpus": 65536, "batch.global_samples": 65536})
    rec = recommend(w, Amdahl(serial=0.1, parallel=100.0, low_ratio=0.9, high_ratio=1.2), budget=50.0, deadline=1.0)
    # every one of the first 4,096 counts, then 256 a doubling (billing.gpu_counts): 4,096 + 4 x 256
    assert rec.sweep.cost_usd.shape == (3, 3, 4096 + 4 * 256) and rec.sweep.gpus[-1] == 65536
    brute_force_checks(rec, 50.0, 1.0)


def test_no_possible_count_says_why():
    rec = recommend(workload(**{"model.params": 6.7e9}), Amdahl())  # DDP: 107 GB of states on an 80 GB GPU
    assert rec.chosen is None and rec.closest == [] and rec.message.startswith("No plan")
    assert rec.why[:1] == ["Left out at every count: the footprint per GPU exceeds the 80.0 GB of GPU memory; at "
                           "16 GPUs it is 107.2 GB (model state 16 bytes per parameter, 107.2 GB for the whole model, "
                           "split where the layout shards it, plus activations; advisor.topology.memory)."]


def test_statistical_efficiency_is_shown_when_used():
    w = workload(**{"batch.policy": "fixed-per-gpu", "batch.global_samples": None, "batch.per_gpu_samples": 10,
                    "batch.gradient_noise_scale": 100, "job.steps": None, "job.samples": 1_000_000})
    rec = recommend(w, Amdahl(), budget=1e6)
    assert rec.sweep.statistical_efficiency and rec.summary()["statistical_efficiency"]
    _, c = rec.chosen
    # the chosen count's steps from S = S_min (1 + 100 / (10 N)), S_min = 1e5 / 11
    n = int(rec.sweep.gpus[c])
    steps = math.ceil(1e5 / 11 * (1 + 100 / (10 * n)))
    assert f"{steps:,} at {n} GPUs" in " ".join(rec.why) and "100,000 at 1 GPU" in " ".join(rec.why)
    plain = recommend(workload(), Amdahl(), budget=1e6)
    assert not any("noise scale" in line for line in plain.why)


@pytest.mark.parametrize("budget, changes, sentence", [
    (8.0, {}, "Doubling to 8 GPUs on on-demand would finish 1.67x sooner for 1.20x the cost."),  # 1.0/0.6 h, 9.6/8
    # counts 1, 2, 4, 8, 12 (48 samples): T(12) = 0.4667 h, $11.2: 0.6/0.4667 = 1.29x sooner, 11.2/9.6 = 1.17x the cost
    (9.7, {"cluster.max_gpus": 12, "batch.global_samples": 48},
     "Going to 12 GPUs (the most on this tier) on on-demand would finish 1.29x sooner for 1.17x the cost."),
    (12.8, {}, "16 GPUs is the most considered on on-demand."),
])
def test_why_says_what_more_gpus_would_buy(budget, changes, sentence):
    rec = recommend(workload(**changes), Amdahl(), budget=budget, tier="on-demand")
    assert rec.why[0] == sentence


def test_a_plan_below_the_smallest_measured_count_is_flagged():
    rec = recommend(workload(), Amdahl(baseline_gpus=4), budget=7.5, tier="on-demand")  # 2 GPUs: $7.2
    assert chosen(rec) == (2, "on-demand")
    assert rec.warnings == ["2 GPUs is below the smallest measured count (4): the step time there is extrapolated "
                            "downwards (efficiency 111% of the baseline); measure it before trusting it"]
    # T(4) = 1.0 h, T(2) = 1.8 h: speedup 1/1.8 = 0.556 over 2/4 of the GPUs = 111%


# ---- the default objective: worth the cost -----------------------------------------------------------


def test_worth_the_cost_walk_on_hand_built_frontiers():
    # cheapest first. 0 -> 1 saves 40% of the time for 20% more cost: taken; 1 -> 2 saves 16.7% for 66.7%, 1 -> 3
    # saves 66.7% for 75%: neither, so it stops at 1 and names 2 as the declined next step
    stop = worth_the_cost(np.array([10.0, 6.0, 5.0, 2.0]), np.array([10.0, 12.0, 20.0, 21.0]))
    assert (stop.at, stop.steps, stop.next) == (1, 1, 2)
    assert stop.time_saved == pytest.approx(1 / 6) and stop.cost_added == pytest.approx(2 / 3)
    # a bump is stepped over: 0 -> 1 saves 10% for 30% (no) but 0 -> 2 saves 70% for 40% (yes)
    stop = worth_the_cost(np.array([10.0, 9.0, 3.0]), np.array([10.0, 13.0, 14.0]))
    assert (stop.at, stop.next) == (2, None)
    # perfect scaling at constant cost goes all the way
    assert worth_the_cost(np.array([8.0, 4.0, 2.0, 1.0]), np.array([5.0, 5.0, 5.0, 5.0])).at == 3


def test_default_objective_stops_where_the_next_doubling_is_not_worth_it():
    # on-demand alone, T = 0.3 + 3.2/N h at $2/GPU-h: hours 3.5, 1.9, 1.1, 0.7, 0.5 and $7, 7.6, 8.8, 11.2, 16 at
    # N = 1, 2, 4, 8, 16. 4 -> 8 saves 36% for 27% more: taken; 8 -> 16 saves 28.6% for 42.9% more: stop at 8
    rec = recommend(workload(), Amdahl(serial=0.3), tier="on-demand")
    assert rec.objective is Objective.WORTH_THE_COST and chosen(rec) == (8, "on-demand")
    assert rec.stop.time_saved == pytest.approx(1 - 0.5 / 0.7) and rec.stop.cost_added == pytest.approx(16 / 11.2 - 1)
    assert rec.why[0].startswith("It stops here:") and "would save 29% of the time for 43% more cost" in rec.why[0]
    assert rec.message.startswith("Worth its cost: 8 GPUs (2 nodes) on on-demand")


def test_literal_ratio_drifts_to_the_cap_where_worth_the_cost_does_not():
    # 43%-efficient weak scaling past one node (the rental-ethernet shape): 8 GPUs take 100 h; every count past
    # one node runs each step 2.2x slower, so N GPUs take 100 x 8/N x 2.2 h. Speedup per dollar rises with N
    # (at 256 GPUs 14.5x the speed for 2.2x the cost); worth-the-cost stays on one node.
    w = load_workload(WORKLOADS / "rental-ethernet.toml")

    from advisor.calibration_data import load_workload_calibration
    from advisor.topology.memory import measured_peaks

    peaks = measured_peaks(load_workload_calibration(w.name, w.source))  # 88.5 GB at 8 GPUs: one node fits in 96 GB

    class Cliff(StepTimeModel):
        baseline_gpus = 8

        def step_time(self, gpus, nodes, global_batch=None):
            t = np.where(np.asarray(nodes) > 1, 2.2, 1.0) * 10.0
            return t, t, t

    default = recommend(w, Cliff(), tier="on-demand", peaks=peaks)
    literal = recommend(w, Cliff(), tier="on-demand", objective=Objective.SPEEDUP_PER_DOLLAR, peaks=peaks)
    assert chosen(default) == (8, "on-demand")
    assert chosen(literal) == (256, "on-demand")
    # by default recommend takes the peaks the model carries (a fitted model: its calibration's)
    Cliff.peaks = tuple(peaks)
    assert chosen(recommend(w, Cliff(), tier="on-demand")) == (8, "on-demand")


def bar_ok(rec) -> bool:
    """Issue 12's bar: the pick does not cost >= 2x the cheapest plan while running at < 50% efficiency."""
    sw = rec.sweep
    cheapest = sw.cost_usd[0][sw.available].min()
    t, c = rec.chosen
    return not (sw.cost_usd[0, t, c] >= 2 * cheapest and sw.efficiency[t, c] < 0.5)


@pytest.mark.parametrize("spec", sorted(p.name for p in WORKLOADS.glob("*.toml")))
@settings(max_examples=25, deadline=None)
@given(serial=st.floats(0.01, 5), parallel=st.floats(1, 500), per_node=st.floats(0, 0.5))
def test_default_pick_meets_the_bar_on_amdahl_curves(spec, serial, parallel, per_node):
    w = load_workload(WORKLOADS / spec)
    rec = recommend(w, Amdahl(serial, parallel, per_node, 0.8, 1.3, baseline_gpus=min(w.calibration.gpus)))
    assert rec.chosen is None or bar_ok(rec)


def test_objective_is_a_type_and_limits_one_value():
    assert Limits().objective() is Objective.WORTH_THE_COST
    assert Limits(budget=5).objective() is Objective.FASTEST_WITHIN_BUDGET
    assert Limits(budget=5, deadline=2).objective() is Objective.CHEAPEST_WITHIN_BOTH
    assert Limits().objective(Objective.SPEEDUP_PER_DOLLAR) is Objective.SPEEDUP_PER_DOLLAR
    with pytest.raises(InputError, match="--objective: applies only without --budget/--deadline"):
        Limits(budget=5).objective(Objective.SPEEDUP_PER_DOLLAR)
    rec = recommend(workload(), Amdahl(), limits=Limits(budget=8.0), tier="on-demand")
    assert chosen(rec) == (4, "on-demand") and rec.budget_usd == 8.0


def test_explain_reads_a_finished_recommendation_without_importing_recommend():
    import subprocess
    import sys

    code = "import sys, advisor.planning.explain; print('advisor.planning.recommend' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- odds, knife edges, batch and preemption randomness ---------------------------------------------------


def test_preemption_randomness_enters_the_odds():
    # no step-time uncertainty: on spot, P(within budget) comes from the wall time's spread alone
    w = workload(**{"tiers.1.preemptions_per_node_hour": 2.0})
    plain = recommend(w, Amdahl(), budget=1e6)
    sw = plain.sweep
    t, c = [x.name for x in sw.tiers].index("spot"), 2  # 4 GPUs, one node
    cv = float(sw.wall_cv[t, c])
    assert 0.01 < cv < 0.5
    sigma = math.sqrt(math.log1p(cv**2))
    budget = float(sw.cost_usd[0, t, c]) * math.exp(1.6448536269514722 * sigma)
    rec = recommend(w, Amdahl(), budget=budget)
    assert rec.probabilities["budget"][t, c] == pytest.approx(0.95, abs=1e-6)
    # on-demand has no preemptions and no interval: certain either side of the median
    assert rec.probabilities["budget"][0, c] == 1.0


def test_knife_edge_budget_is_said_with_what_a_little_more_buys():
    # near-perfect scaling: on-demand costs $6.42, 6.44, 6.48, 6.56, 6.72 at 1, 2, 4, 8, 16 GPUs (T = 0.01 + 3.2/N h);
    # interval ±10% -> sigma = ln(1.1)/1.645 = 0.0579. A $6.5 budget: 4 GPUs chosen (fastest with median <= 6.5), but
    # every plan has P(within) between 28% and 58%; the fastest, 16 GPUs, needs 6.72 x e^{1.2816 sigma} = $7.24 for 90%.
    model = Amdahl(serial=0.01, parallel=3.2, low_ratio=1 / 1.1, high_ratio=1.1)
    rec = recommend(workload(), model, budget=6.5, tier="on-demand")
    assert chosen(rec) == (4, "on-demand")
    edge = rec.knife_edge
    assert [int(rec.sweep.gpus[c]) for _, c in edge.plans] == [16, 8, 4, 2, 1]
    sigma = math.log(1.1) / 1.6448536269514722
    assert edge.budget_for_fastest == pytest.approx(6.72 * math.exp(1.2815515655446004 * sigma), rel=1e-6)
    text = " ".join(rec.why)
    assert "The budget does not discriminate: 5 plans" in text and "$7.24 (+11%) with 90% odds" in text
    # a budget far from every plan's interval discriminates: nothing said
    assert recommend(workload(), model, budget=100.0, tier="on-demand").knife_edge is None


def test_batch_growth_past_the_measured_batch_is_warned_and_a_cap_stops_it():
    w = workload(**{"batch.policy": "fixed-per-gpu", "batch.global_samples": None, "batch.per_gpu_samples": 10,
                    "job.steps": None, "job.samples": 1_000_000})
    rec = recommend(w, Amdahl(serial=0.0), budget=1e6)  # the fastest: 16 GPUs, global batch 160 vs 10 at 1 GPU
    assert chosen(rec)[0] == 16
    assert any("global batch of 160 samples, 16.0x the largest measured (10)" in x for x in rec.warnings)
    assert rec.plan(*rec.chosen)["global_batch"] == 160
    capped = recommend(w.model_copy(update={"batch": w.batch.model_copy(update={"max_global_samples": 15})}),
                       Amdahl(serial=0.0), budget=1e6)
    assert not any("global batch" in x for x in capped.warnings)
    noise = recommend(w.model_copy(update={"batch": w.batch.model_copy(update={"gradient_noise_scale": 50})}),
                      Amdahl(serial=0.0), budget=1e6)
    assert not any("global batch of" in x for x in noise.warnings)


def test_an_uncalibrated_model_is_marked():
    class Prior(Amdahl):
        calibrated = False

    rec = recommend(workload(), Prior(), budget=10.0)
    assert rec.calibrated is False and rec.summary()["model"] == {"calibrated": False}
    assert rec.warnings[0].startswith("no calibration data")
    assert rec.plan(*rec.chosen)["calibrated"] is False


def test_whole_instances_through_recommend():
    w = workload(**{"tiers.0.instance_gpus": 8, "cluster.max_gpus": 64})
    rec = recommend(w, Amdahl(), tier="on-demand")
    assert {int(rec.sweep.gpus[c]) for _, c in rec.candidates()} == {8, 16, 32, 64}
    assert any("rents whole 8-GPU instances" in x for x in rec.why)


def test_a_measured_peak_above_the_spec_gpu_memory_is_noticed():
    # llm7b's calibration peaked at 88.5 GB per GPU at 8 GPUs on 96 GB cards; on the 80 GB H100-SXM of the catalog
    # 8 and 16 GPUs do not fit (88.5 and 80.5 GB), 24 do (88.5 - 16 + 5.3 = 77.8 GB)
    from advisor.calibration_data import load_workload_calibration
    from advisor.topology.memory import measured_peaks

    w = load_workload(WORKLOADS / "llm7b.toml")
    w = w.model_copy(update={"cluster": w.cluster.model_copy(update={"gpu_memory": None})})
    peaks = measured_peaks(load_workload_calibration("llm7b", WORKLOADS / "llm7b.toml"))
    rec = recommend(w, Amdahl(serial=0.5, parallel=60.0, baseline_gpus=8), peaks=peaks)
    assert min(int(rec.sweep.gpus[c]) for _, c in rec.candidates()) == 24
    assert any("measured a peak of 88.5 GB per GPU at 8 GPUs, more than the 80.0 GB" in x for x in rec.warnings)
    assert any(x.startswith("Left out below 24 GPUs") for x in rec.why)


def test_the_stop_is_in_the_json_summary():
    rec = recommend(workload(), Amdahl(serial=0.3), tier="on-demand")
    stop = rec.summary()["stop"]
    assert stop["declined_next"]["gpus"] == 16 and stop["time_saved"] == pytest.approx(1 - 0.5 / 0.7)
    assert recommend(workload(), Amdahl(), budget=10.0).summary()["stop"] is None


def test_a_high_preemption_exposure_is_said_with_both_factors():
    # one node at 2 preemptions/h, checkpoint 0.02 h, restart 0.1 h: τ = 0.1284 h, Λ·(τ + R) = 2 x 0.2284 = 0.46;
    # first order 1 + sqrt(2 x 2 x 0.02) + 2 x 0.1 = 1.48x, the exponential model 1.64x (exact_factor(2, 0.02, 0.1))
    w = workload(**{"tiers.1.preemptions_per_node_hour": 2.0})
    rec = recommend(w, Amdahl(), budget=7.5, tier="spot")  # 4 GPUs on one node
    assert chosen(rec) == (4, "spot")
    factor, tau = exact_factor(2.0, 0.02, 0.1)
    text = " ".join(rec.why)
    assert f"Λ·(τ + restart) = {2 * (tau + 0.1):.2g} at 1 node" in text
    assert f"first-order Young/Daly ({1 + math.sqrt(0.08) + 0.2:.2f}x" in text and f"gives {factor:.2f}x" in text


def test_choosing_layouts_with_a_model_that_cannot_predict_them_is_refused():
    # strategy auto needs StepTimeModel.for_workload; the stand-in keeps the contract's default, which refuses
    with pytest.raises(InputError, match="choosing a layout needs a scaling model that predicts other layouts"):
        recommend(workload(**{"parallelism.strategy": "auto"}), Amdahl(), budget=10.0)
