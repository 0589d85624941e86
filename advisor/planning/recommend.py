"""Choosing a plan: objectives, odds of meeting a budget or deadline, the cost-time frontier.

Given a `Sweep` (advisor.planning.billing: every GPU count on every tier, priced), `recommend` picks one
plan for an `Objective` under `Limits` (advisor.planning.limits):

- worth-the-cost (default): answer "at what count does the next step stop being worth its cost".
  Walk the cost-time frontier (plans nothing beats on both time and cost) from its cheapest plan
  towards faster ones. From plan i, step to the nearest faster frontier plan j whose relative time
  saved, (h_i − h_j)/h_i, is at least its relative cost added, (c_j − c_i)/c_i; stop where no faster
  plan is worth it (`WorthStop` says where, and what the next plan would have cost and saved). On a
  dense frontier the rule is "continue while −d ln(hours) ≥ d ln(cost)"; for T(N) = s + p/N it
  stops where p/N = s, i.e. where the parallel part has shrunk to the serial one.
- speedup-per-dollar: the literal speedup / cost maximum;
- `budget`: the fastest plan within budget; `deadline`: the cheapest that finishes in time; both:
  the cheapest that meets both.

A plan qualifies on its median prediction, or, with `confidence` c, when the probability of meeting
every limit is at least c. When nothing qualifies it says so and keeps the closest plans (smallest
max(cost/budget, hours/deadline)). SkyPilot's optimizer (sky/optimizer.py: OptimizeTarget COST or
TIME, a candidate table with the chosen row ticked) is the model for the shape of this.

Odds: the model gives a 90% interval [low, high] around the median step time T. We read it as a
two-piece log-normal (each side's sigma = ln(high/median)/z or ln(median/low)/z, z =
advisor.step_model.Z90 = 1.645, the 95th percentile of the standard normal). Preemptions add
their own randomness: the wall time's coefficient of variation v (billing.Preemption.cv) enters as
an independent log-normal factor, so each side's sigma becomes sqrt(sigma² + ln(1 + v²)). Hours
and dollars rise monotonically with T and the wall time, so P(hours <= D) and P(cost <= B) are
that distribution at the point where the plan just meets the limit
(billing.TierBilling.affordable_hours inverts the bill), and both limits together at the smaller
of the two.

Knife-edge budgets: when the budget falls inside the 90% cost interval of the chosen plan and of
faster plans too, the budget does not tell them apart (`KnifeEdge`): the output says so and what the
fastest of them needs to be within budget with 90% odds.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor.planning.billing import Sweep
from advisor.planning.explain import explain
from advisor.planning.limits import LIKELY, Limits, Objective
from advisor.planning.runnable import Runnable, baseline
from advisor.planning.runnable import of as runnable_of
from advisor.step_model import Z90, StepTimeModel
from advisor.text import count, gigabytes, percent, plural, times
from advisor.topology.memory import memory_evidence, split_evidence

if TYPE_CHECKING:
    import numpy as np

    from advisor.spec import Workload
    from advisor.topology.memory import MeasuredPeak

#: z of the 90th percentile: the one-sided bound a "90% odds" budget needs.
Z_ONE_SIDED_90 = 1.2815515655446004

#: A knife-edge group holds the plans whose P(within budget) lies between these: the budget falls
#: inside their 90% cost interval (5%-95%).
EDGE_LOW, EDGE_HIGH = 0.05, 0.95

#: Warn when a plan's global batch exceeds the largest measured one by more than this factor and
#: no gradient noise scale is declared: half again the largest batch the recipe was ever run at. Past the
#: critical batch (McCandlish et al. 2018) more samples per step stop buying fewer steps, and nothing
#: measured says where that is for this job.
BATCH_GROWTH_WARN = 1.5

Plan = tuple[int, int]  # (tier index, count index)


def probability_at_most(limit: "np.ndarray", median, low, high, extra_cv=0.0) -> "np.ndarray":
    """P(value <= limit) for a value with median `median` and 90% interval [low, high] (two-piece
    log-normal), times an independent log-normal factor of coefficient of variation `extra_cv`."""
    import numpy as np
    from scipy.special import ndtr

    arrays = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (limit, median, low, high, extra_cv)))
    limit, median, low, high, extra = arrays
    below = limit < median
    spread = np.where(below, np.log(median / np.maximum(low, 1e-300)), np.log(np.maximum(high, median) / median)) / Z90
    spread = np.sqrt(spread**2 + np.log1p(extra**2))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log(np.maximum(limit, 0) / median) / spread
    sharp = np.where(limit >= median, 1.0, 0.0)
    return np.where(spread > 0, ndtr(np.nan_to_num(z, nan=0.0, posinf=np.inf, neginf=-np.inf)), sharp)


def limit_probabilities(sw: Sweep, limits: Limits) -> dict[str, "np.ndarray" | None]:
    """(tiers, counts) probabilities: within budget, within deadline, and both (None where unset)."""
    import numpy as np

    median, low, high = sw.step_seconds
    hours_per_step_second = sw.wall_hours[0] / median  # steps x preemption factor / 3600
    limit_t = np.full(sw.available.shape, np.inf)
    out: dict[str, np.ndarray | None] = {"budget": None, "deadline": None, "both": None}
    odds = functools.partial(probability_at_most, median=median, low=low, high=high, extra_cv=sw.wall_cv)
    if limits.deadline is not None:
        t_deadline = limits.deadline / hours_per_step_second
        out["deadline"] = odds(t_deadline)
        limit_t = np.minimum(limit_t, t_deadline)
    if limits.budget is not None:
        t_budget = sw.billing.affordable_hours(sw.gpus, limits.budget) / hours_per_step_second
        out["budget"] = odds(t_budget)
        limit_t = np.minimum(limit_t, t_budget)
    if limits.any:
        out["both"] = odds(limit_t)
    return out


def pareto_frontier(hours: "np.ndarray", cost: "np.ndarray") -> "np.ndarray":
    """Indices (into the flat arrays) of plans no other plan beats on both time and cost, fastest first."""
    import numpy as np

    order = np.lexsort((cost, hours))
    sorted_cost = cost[order]
    best_before = np.concatenate([[np.inf], np.minimum.accumulate(sorted_cost)[:-1]])
    return order[sorted_cost < best_before]


@dataclass(frozen=True)
class WorthStop:
    """Where the worth-the-cost walk stopped: at `at` (a frontier index, cheapest first) and why."""

    at: int
    steps: int  # steps taken from the cheapest plan
    next: int | None  # the next faster frontier plan (None: the fastest plan was reached)
    time_saved: float | None  # relative time that step would save
    cost_added: float | None  # relative cost it would add


def worth_the_cost(hours: "np.ndarray", cost: "np.ndarray") -> WorthStop:
    """Walk a frontier ordered cheapest (slowest) first; see the module docstring."""
    import numpy as np

    i, steps, n = 0, 0, hours.size
    while i < n - 1:
        saved = (hours[i] - hours[i + 1 :]) / hours[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            added = np.where(cost[i] > 0, (cost[i + 1 :] - cost[i]) / cost[i], np.where(cost[i + 1 :] > 0, np.inf, 0.0))
        worth = np.flatnonzero(saved >= added)
        if worth.size == 0:
            return WorthStop(i, steps, i + 1, float(saved[0]), float(added[0]))
        i, steps = i + 1 + int(worth[0]), steps + 1
    return WorthStop(i, steps, None, None, None)


@dataclass(frozen=True)
class SpotPayoff:
    """Where a preemptible tier stops being cheaper than the cheapest tier without preemptions."""

    tier: str
    stops_at_gpus: int | None  # None: still cheaper at the largest count considered
    nodes: int | None
    compared_with: str | None  # the tier it loses to at that count
    never_pays_off: bool = False
    cheaper_everywhere: bool = False


def spot_payoff(sw: Sweep) -> list[SpotPayoff]:
    """For each preemptible tier: the smallest count from which, at that count and every larger one,
    its expected cost is at least the cheapest non-preemptible tier's at the same count."""
    import numpy as np

    cost = np.where(sw.available, sw.cost_usd[0], np.inf)
    steady = [i for i, t in enumerate(sw.tiers) if t.preemptions_per_node_hour == 0]
    out = []
    for i, tier in enumerate(sw.tiers):
        if tier.preemptions_per_node_hour == 0:
            continue
        if not steady:
            out.append(SpotPayoff(tier.name, None, None, None))
            continue
        alt_cost = cost[steady].min(axis=0)
        alt_tier = np.asarray(steady)[cost[steady].argmin(axis=0)]
        idx = np.flatnonzero(np.isfinite(cost[i]) & np.isfinite(alt_cost))
        if idx.size == 0:
            out.append(SpotPayoff(tier.name, None, None, sw.tiers[steady[0]].name))
            continue
        worse = cost[i, idx] >= alt_cost[idx]
        tail_all_worse = np.logical_and.accumulate(worse[::-1])[::-1]
        if not tail_all_worse[-1]:
            out.append(
                SpotPayoff(
                    tier.name, None, None, sw.tiers[int(alt_tier[idx[-1]])].name, cheaper_everywhere=not worse.any()
                )
            )
            continue
        first = idx[int(np.argmax(tail_all_worse))]
        out.append(
            SpotPayoff(
                tier.name,
                int(sw.gpus[first]),
                int(sw.nodes[first]),
                sw.tiers[int(alt_tier[first])].name,
                never_pays_off=bool(tail_all_worse[0]),
            )
        )
    return out


@dataclass(frozen=True)
class KnifeEdge:
    """Plans the budget cannot tell apart: each one's 90% cost interval contains the budget."""

    plans: tuple[Plan, ...]  # chosen included, fastest first
    fastest: Plan
    budget_for_fastest: float  # the budget that keeps `fastest` within with 90% odds


@dataclass(kw_only=True)
class Recommendation:
    """One workload's decision: the sweep, the chosen plan, the frontier, and why (built by keyword:
    three of its fields are plans and two lists of plans, easy to swap by position)."""

    workload: str
    objective: Objective
    limits: Limits
    sweep: Sweep
    chosen: Plan | None
    closest: list[Plan]
    frontier: list[Plan]  # fastest first
    spot: list[SpotPayoff]
    probabilities: dict
    stop: WorthStop | None = None  # worth-the-cost: where the walk stopped (indices into frontier[::-1])
    safer: Plan | None = None  # the plan the same objective picks at 90% odds, when the chosen one's are poor
    knife_edge: KnifeEdge | None = None
    calibrated: bool = True  # False: the model is a prior, no measurements behind it
    measured_batch: float | None = None  # the largest global batch the calibration ran
    recompute: dict = field(default_factory=dict)  # activation_checkpoint mode -> smallest count that would fit
    peaks: list = field(default_factory=list)  # memory.memory_evidence: MeasuredPeak and MeasuredFit
    gradient_noise_scale: float | None = None
    params: float = 0.0
    runnable: Runnable | None = None  # why each count can or cannot run (the left-out sentences name it)
    message: str = ""
    why: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def budget_usd(self) -> float | None:
        return self.limits.budget

    @property
    def deadline_hours(self) -> float | None:
        return self.limits.deadline

    @property
    def confidence(self) -> float | None:
        return self.limits.confidence

    def plan(self, t: int, c: int) -> dict:
        """One candidate as JSON fields (plus nodes, steps, batch, memory, intervals, odds)."""
        return self.plans([(t, c)])[0]

    def plans(self, pairs: list[Plan]) -> list[dict]:
        """Candidates as JSON rows, built column-wise (65,536 counts x 3 tiers in about a second)."""
        import numpy as np

        sw, p = self.sweep, self.probabilities
        if not pairs:
            return []
        t, c = (np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True))
        interval = sw.preemption.interval_hours[t, c]
        per_tier = {
            "hours": sw.wall_hours[0, t, c],
            "hours_low": sw.wall_hours[1, t, c],
            "hours_high": sw.wall_hours[2, t, c],
            "cost_usd": sw.cost_usd[0, t, c],
            "cost_usd_low": sw.cost_usd[1, t, c],
            "cost_usd_high": sw.cost_usd[2, t, c],
            "speedup": sw.speedup[t, c],
            "efficiency": sw.efficiency[t, c],
            "preemption_loss": 1 - 1 / sw.factor[t, c],
            "preemption_factor": sw.factor[t, c],
            "wall_time_cv": sw.wall_cv[t, c],
            "preemption_exposure": sw.preemption.exposure[t, c],
        }
        columns = {
            "gpus": sw.gpus[c].tolist(),
            "nodes": sw.nodes[c].tolist(),
            "tier": [sw.tiers[i].name for i in t.tolist()],
            "steps": sw.steps[c].astype(np.int64).tolist(),
            "global_batch": sw.global_batch[c].tolist(),
            "per_gpu_batch": (sw.global_batch[c] / sw.gpus[c]).tolist(),
            "memory_bytes_per_gpu": sw.memory_bytes[c].tolist(),
            "step_seconds": sw.step_seconds[0, c].tolist(),
            "step_seconds_low": sw.step_seconds[1, c].tolist(),
            "step_seconds_high": sw.step_seconds[2, c].tolist(),
            **{k: v.tolist() for k, v in per_tier.items()},
            "checkpoint_interval_hours": [x if np.isfinite(x) and x > 0 else None for x in interval.tolist()],
        }
        for key, name in (("p_within_budget", "budget"), ("p_within_deadline", "deadline"), ("p_meet", "both")):
            columns[key] = [None] * len(pairs) if p[name] is None else p[name][t, c].tolist()
        if sw.layouts is not None:
            columns["layout"] = [sw.layouts.label(i) for i in c.tolist()]
            columns["strategy"] = [sw.layouts.strategy(i) for i in c.tolist()]
            columns["layout_why"] = [sw.layouts.why(i) for i in c.tolist()]
        columns["chosen"] = [pair == self.chosen for pair in pairs]
        columns["on_frontier"] = [pair in self.frontier_set for pair in pairs]
        head = {"workload": self.workload, "objective": self.objective.value, "calibrated": self.calibrated}
        return [dict(head, **dict(zip(columns, row, strict=True))) for row in zip(*columns.values(), strict=True)]

    @functools.cached_property
    def frontier_set(self) -> set:
        return set(self.frontier)

    def candidates(self) -> list[Plan]:
        import numpy as np

        tiers, counts = np.nonzero(self.sweep.available)
        order = np.lexsort((tiers, counts))
        return [(int(tiers[i]), int(counts[i])) for i in order]

    def _memory_json(self) -> dict:
        """The GPU's memory, the measured peaks and the runs that trained without one (their count fit, at
        most bound_bytes per GPU)."""
        peaks, fits = split_evidence(self.peaks)
        capacity = self.sweep.gpu_memory
        return {"gpu_memory_bytes": capacity,
                "measured_peaks": [{"gpus": p.gpus, "peak_bytes": p.peak_bytes, "where": p.where} for p in peaks],
                "ran_without_peak": [{"gpus": f.gpus, "global_batch": f.global_batch,
                                      "bound_bytes": f.bound_bytes or capacity, "where": f.where} for f in fits]}

    def summary(self) -> dict:
        """Per-workload facts beside the plans: status, message, why, frontier, spot pay-off, model."""
        from advisor.planning.explain import spot_sentence

        sw = self.sweep
        status = "ok" if self.chosen is not None else "none-qualifies"
        return {
            "workload": self.workload,
            "objective": self.objective.value,
            "status": status,
            "budget_usd": self.limits.budget,
            "deadline_hours": self.limits.deadline,
            "confidence": self.limits.confidence,
            "baseline_gpus": sw.baseline_gpus,
            "model": {"calibrated": self.calibrated},
            "message": self.message,
            "why": self.why,
            "closest": self.plans(self.closest),
            "frontier": [{"gpus": int(sw.gpus[c]), "tier": sw.tiers[t].name} for t, c in self.frontier],
            "spot": [
                {
                    "tier": payoff.tier,
                    "stops_paying_off_gpus": payoff.stops_at_gpus,
                    "nodes": payoff.nodes,
                    "compared_with": payoff.compared_with,
                    "never_pays_off": payoff.never_pays_off,
                    "sentence": spot_sentence(payoff),
                }
                for payoff in self.spot
            ],
            "knife_edge": None
            if self.knife_edge is None
            else {
                "plans": self.plans(list(self.knife_edge.plans)),
                "budget_for_fastest_usd": self.knife_edge.budget_for_fastest,
            },
            "stop": self._stop_json(),
            "memory": self._memory_json(),
            "measured_global_batch": self.measured_batch,
            "statistical_efficiency": sw.statistical_efficiency,
            "gradient_noise_scale": self.gradient_noise_scale,
            "warnings": self.warnings,
        }


    def _stop_json(self) -> dict | None:
        """Where the worth-the-cost walk stopped: steps taken, and the declined next plan with its shares."""
        stop = self.stop
        if stop is None:
            return None
        cheapest_first = self.frontier[::-1]
        declined = None if stop.next is None else self.plan(*cheapest_first[stop.next])
        return {"steps": stop.steps, "declined_next": declined, "time_saved": stop.time_saved,
                "cost_added": stop.cost_added}


def select_tiers(w: "Workload", tier: str | None):
    """The workload's tiers, or the one named (InputError with a suggestion if unknown)."""
    return tuple(w.tiers) if tier is None else (w.tier_named(tier),)


def frontier_of(sw: Sweep) -> list[Plan]:
    """The cost-time frontier among available plans, fastest first."""
    import numpy as np

    flat = np.flatnonzero(sw.available)
    front = pareto_frontier(sw.wall_hours[0].ravel()[flat], sw.cost_usd[0].ravel()[flat])
    return list(zip(*(i.tolist() for i in np.unravel_index(flat[front], sw.available.shape)), strict=True))


def qualifying(sw: Sweep, limits: Limits, probabilities) -> "np.ndarray":
    """(tiers, counts): available plans that meet the limits (on the median, or with the asked odds)."""
    qualifies = sw.available.copy()
    if limits.confidence is not None and probabilities["both"] is not None:
        return qualifies & (probabilities["both"] >= limits.confidence)
    if limits.budget is not None:
        qualifies &= sw.cost_usd[0] <= limits.budget
    if limits.deadline is not None:
        qualifies &= sw.wall_hours[0] <= limits.deadline
    return qualifies


def choose(
    sw: Sweep, objective: Objective, limits: Limits, probabilities, frontier: Sequence[Plan] = ()
) -> tuple[Plan | None, list[Plan], WorthStop | None]:
    """The chosen (tier, count), or None and the three closest plans; and, for worth-the-cost, where it stopped."""
    import numpy as np

    hours, cost = sw.wall_hours[0], sw.cost_usd[0]
    if objective is Objective.WORTH_THE_COST:
        if not frontier:
            return None, [], None
        cheapest_first = list(frontier)[::-1]
        stop = worth_the_cost(np.array([hours[p] for p in cheapest_first]), np.array([cost[p] for p in cheapest_first]))
        return cheapest_first[stop.at], [], stop
    qualifies = qualifying(sw, limits, probabilities)
    gpus = np.broadcast_to(sw.gpus, hours.shape)
    if objective is Objective.SPEEDUP_PER_DOLLAR:
        with np.errstate(divide="ignore"):
            value = np.where(cost > 0, sw.speedup / cost, np.inf)
        keys = (gpus, cost, -value)
    elif objective is Objective.FASTEST_WITHIN_BUDGET:
        keys = (gpus, cost, hours)
    else:
        keys = (gpus, hours, cost)
    flat = np.flatnonzero(qualifies)
    if flat.size:
        best = flat[np.lexsort(tuple(k.ravel()[flat] for k in keys))[0]]
        return tuple(int(i) for i in np.unravel_index(best, hours.shape)), [], None
    return None, closest_plans(sw, limits), None


def closest_plans(sw: Sweep, limits: Limits, n: int = 3) -> list[Plan]:
    """The n available plans nearest to meeting the limits: smallest max(cost/budget, hours/deadline)."""
    import numpy as np

    hours, cost = sw.wall_hours[0], sw.cost_usd[0]
    ratio = np.zeros(hours.shape)
    if limits.budget is not None:
        ratio = np.maximum(ratio, cost / limits.budget)
    if limits.deadline is not None:
        ratio = np.maximum(ratio, hours / limits.deadline)
    gpus = np.broadcast_to(sw.gpus, hours.shape)
    flat = np.flatnonzero(sw.available)
    order = flat[np.lexsort((gpus.ravel()[flat], cost.ravel()[flat], ratio.ravel()[flat]))[:n]]
    return [tuple(int(i) for i in np.unravel_index(k, hours.shape)) for k in order]


def knife_edge(sw: Sweep, probabilities, anchor: Plan | None, frontier: Sequence[Plan]) -> KnifeEdge | None:
    """The frontier plans a budget cannot tell apart from `anchor` (the chosen plan, or the closest when
    none qualifies): the budget lies inside each one's 90% cost interval, and one of them is faster."""
    import numpy as np

    p = probabilities["budget"]
    if p is None or anchor is None or not (EDGE_LOW < p[anchor] < EDGE_HIGH):
        return None
    hours = sw.wall_hours[0]
    plans = sorted({x for x in (*frontier, anchor) if EDGE_LOW < p[x] < EDGE_HIGH}, key=lambda x: (hours[x], x))
    if not any(hours[x] < hours[anchor] for x in plans):
        return None
    fastest = plans[0]
    sigma = np.log(sw.cost_usd[2][fastest] / sw.cost_usd[0][fastest]) / Z90
    sigma = float(np.sqrt(sigma**2 + np.log1p(sw.wall_cv[fastest] ** 2)))
    budget = float(max(sw.cost_usd[0][fastest] * np.exp(Z_ONE_SIDED_90 * sigma), sw.billed_floor_usd()[fastest]))
    return KnifeEdge(tuple(plans), fastest, budget)


def recommend(
    w: "Workload",
    model: StepTimeModel,
    budget: float | None = None,
    deadline: float | None = None,
    tier: str | None = None,
    confidence: float | None = None,
    baseline_gpus: int | None = None,
    gpus: "np.ndarray" | None = None,
    *,
    objective: Objective | None = None,
    limits: Limits | None = None,
    peaks: Sequence["MeasuredPeak"] | None = None,
) -> Recommendation:
    """Price every plan for workload `w` with step times from `model`, pick one, and say why.

    budget in USD, deadline in hours (or one `limits` value), tier restricts to one billing tier,
    confidence (0..1) asks that a plan meet its limits with at least that probability (default: on
    the median); `objective` chooses worth-the-cost (default) or speedup-per-dollar when there are
    no limits; `peaks` are measured memory peaks (advisor.topology.memory.measured_peaks; default: the
    model's own, read with the calibration it was fitted on). Nothing here opens a file.
    """
    if peaks is None:
        peaks = memory_evidence(model)
    limits = limits if limits is not None else Limits(budget, deadline, confidence)
    chosen_objective = limits.objective(objective)
    from advisor.planning.layout_choice import sweep as layout_sweep  # strategy auto: the fastest that fits

    baseline_gpus = baseline(w, model, peaks)[0] if baseline_gpus is None else baseline_gpus  # as predict's
    sw = layout_sweep(w, model, select_tiers(w, tier), baseline_gpus, gpus, peaks)
    probabilities = limit_probabilities(sw, limits)
    frontier = frontier_of(sw)
    chosen, closest, stop = choose(sw, chosen_objective, limits, probabilities, frontier)
    rec = Recommendation(
        workload=w.name,
        objective=chosen_objective,
        limits=limits,
        sweep=sw,
        chosen=chosen,
        closest=closest,
        frontier=frontier,
        spot=spot_payoff(sw),
        probabilities=probabilities,
        stop=stop,
        calibrated=bool(model.calibrated),
        measured_batch=_measured_batch(model, w, sw),
        peaks=list(peaks),
        gradient_noise_scale=w.batch.gradient_noise_scale,
        params=w.model.params,
    )
    p = probabilities["both"]
    if chosen is not None and p is not None and p[chosen] < LIKELY:
        rec.safer, _, _ = choose(sw, chosen_objective, Limits(limits.budget, limits.deadline, 0.9), probabilities)
    rec.recompute = recompute_alternatives(w, sw)
    rec.runnable = runnable_of(w, sw.gpus, sw.nodes, peaks)
    rec.knife_edge = knife_edge(sw, probabilities, chosen or (closest[0] if closest else None), frontier)
    rec.message, rec.why = explain(rec)
    rec.warnings = model_warnings(model, rec, chosen or (closest[0] if closest else None))
    return rec


#: Activation checkpointing modes, least recomputation first.
RECOMPUTE_ORDER = ("none", "selective", "full")


def recompute_alternatives(w: "Workload", sw: Sweep) -> dict:
    """When memory rules counts out: for each stronger activation_checkpoint mode than the spec's, the
    smallest count that would fit (None: none would), from advisor.topology.memory's estimate alone."""
    from advisor.topology.layouts import build

    if sw.fits_memory.all() or not w.model.is_transformer:
        return {}
    out = {}
    for mode in RECOMPUTE_ORDER[RECOMPUTE_ORDER.index(w.parallelism.activation_checkpoint) + 1:]:
        alt = w.model_copy(update={"parallelism": w.parallelism.model_copy(update={"activation_checkpoint": mode})})
        ok = build(alt, sw.gpus).fits(alt) & sw.fits_batch & sw.offered.any(axis=0)
        out[mode] = int(sw.gpus[ok][0]) if ok.any() else None
    return out


def _measured_batch(model: StepTimeModel, w: "Workload", sw: Sweep) -> float:
    """The largest global batch behind the model: its measurements', else the batch at the baseline count."""
    import numpy as np

    if model.measured_batch is not None:
        return float(model.measured_batch)
    from advisor.batch import global_batch

    return float(global_batch(w, np.array([sw.baseline_gpus]))[0])


def model_warnings(model: StepTimeModel, rec: Recommendation, plan: Plan | None) -> list[str]:
    """The model's own caveats (its fit, and predicting at the plan's count: StepTimeModel.warnings)
    and the plan's: below the measured counts, a batch grown past the measured one, a measured memory
    peak above the GPU's memory."""
    import numpy as np

    sw = rec.sweep
    if plan is None:
        out = model.warnings()
    else:
        out = model.warnings(np.array([sw.gpus[plan[1]]]), np.array([sw.nodes[plan[1]]]))
    if plan is not None and sw.gpus[plan[1]] < sw.baseline_gpus:
        t, c = plan
        out.append(
            f"{plural(int(sw.gpus[c]), 'GPU')} is below the smallest measured count ({sw.baseline_gpus}): "
            "the step time there "
            f"is extrapolated downwards (efficiency {percent(sw.efficiency[t, c])} of the baseline); "
            "measure it before trusting it"
        )
    out += _batch_warning(rec, plan) + _memory_warnings(rec)
    return out


def _batch_warning(rec: Recommendation, plan: Plan | None) -> list[str]:
    sw = rec.sweep
    if plan is None or rec.gradient_noise_scale is not None or not rec.measured_batch:
        return []
    batch = float(sw.global_batch[plan[1]])
    if batch <= BATCH_GROWTH_WARN * rec.measured_batch:
        return []
    reference = "the largest measured" if rec.calibrated else "the one at the baseline count, nothing measured"
    return [
        f"{plural(int(sw.gpus[plan[1]]), 'GPU')} train with a global batch of {count(batch)} samples, "
        f"{times(batch / rec.measured_batch, 1)} {reference} ({count(rec.measured_batch)}): "
        f"without batch.gradient_noise_scale the plan assumes the same "
        f"samples reach the same quality at any batch, which fails past the critical batch (McCandlish et al. 2018); "
        f"declare gradient_noise_scale or cap the batch with batch.max_global_samples"
    ]


def _memory_warnings(rec: Recommendation) -> list[str]:
    sw = rec.sweep
    if sw.gpu_memory is None:
        return []
    return [
        f"{p.where} measured a peak of {gigabytes(p.peak_bytes)} per GPU at {plural(p.gpus, 'GPU')}, more than the "
        f"{gigabytes(sw.gpu_memory)} per GPU this spec's GPU has: plans are sized for the smaller memory; "
        f"if your GPUs "
        f"have more, set [cluster] gpu_memory"
        for p in split_evidence(rec.peaks)[0]
        if p.peak_bytes > sw.gpu_memory
    ]
