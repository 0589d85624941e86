"""Choosing a plan: objectives, odds of meeting a budget or deadline, the cost-time frontier, why.

Given a `Sweep` (advisor.planning.billing: every GPU count on every tier, priced), `recommend` picks one plan:

- default objective: the most speedup per dollar (speedup / cost; speedup from the baseline count);
- `budget`: the fastest plan that costs at most the budget;
- `deadline`: the cheapest plan that finishes in time;
- both: the cheapest plan that meets both.

A plan qualifies on its median prediction (the model's step time), or, with `confidence` c, when
the probability of meeting every limit is at least c. When nothing qualifies it says so and keeps
the closest plans (smallest max(cost/budget, hours/deadline)). SkyPilot's optimizer
(sky/optimizer.py: OptimizeTarget COST or TIME, a candidate table with the chosen row ticked) is
the model for the shape of this.

Odds: the model gives a 90% interval [low, high] around the median step time T. We read it as a
two-piece log-normal (each side's sigma = ln(high/median)/z or ln(median/low)/z, z = 1.645, the
95th percentile of the standard normal), so P(T <= t) = Phi(ln(t/median)/sigma). Hours and dollars
rise monotonically with T, so P(hours <= D) and P(cost <= B) are that distribution at the step time
where the plan just meets the limit, and both limits together at the smaller of the two. The odds
carry the model's uncertainty only; preemptions enter through their expected cost.
"""

from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from advisor.planning.billing import StepTimeModel, Sweep, checkpoint_interval_hours, sweep
from advisor.errors import InputError
from advisor.text import plural

if TYPE_CHECKING:
    import numpy as np

    from advisor.spec import Workload

#: z of the 95th percentile of the standard normal: a two-sided 90% interval spans median ± z·sigma.
Z90 = 1.6448536269514722

OBJECTIVES = {
    "speedup-per-dollar": "best speedup per dollar",
    "fastest-within-budget": "fastest plan within budget",
    "cheapest-within-deadline": "cheapest plan that finishes in time",
    "cheapest-within-budget-and-deadline": "cheapest plan within budget and deadline",
}


def objective_for(budget: Optional[float], deadline: Optional[float]) -> str:
    if budget is not None and deadline is not None:
        return "cheapest-within-budget-and-deadline"
    if budget is not None:
        return "fastest-within-budget"
    if deadline is not None:
        return "cheapest-within-deadline"
    return "speedup-per-dollar"


def probability_at_most(limit: "np.ndarray", median, low, high) -> "np.ndarray":
    """P(step time <= limit) under the two-piece log-normal read of the 90% interval."""
    import numpy as np
    from scipy.special import ndtr

    limit, median, low, high = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (limit, median, low, high)))
    below = limit < median
    spread = np.where(below, np.log(median / np.maximum(low, 1e-300)), np.log(np.maximum(high, median) / median)) / Z90
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log(np.maximum(limit, 0) / median) / spread
    sharp = np.where(limit >= median, 1.0, 0.0)
    return np.where(spread > 0, ndtr(np.nan_to_num(z, nan=0.0, posinf=np.inf, neginf=-np.inf)), sharp)


def limit_probabilities(sw: Sweep, budget: Optional[float], deadline: Optional[float]) -> dict[str, "np.ndarray"]:
    """(tiers, counts) probabilities: within budget, within deadline, and both (None where unset)."""
    import numpy as np

    median, low, high = sw.step_seconds
    hours_per_step_second = sw.wall_hours[0] / median  # steps x preemption factor / 3600
    limit_t = np.full(sw.available.shape, np.inf)
    out: dict[str, Optional[np.ndarray]] = {"budget": None, "deadline": None}
    if deadline is not None:
        t_deadline = deadline / hours_per_step_second
        out["deadline"] = probability_at_most(t_deadline, median, low, high)
        limit_t = np.minimum(limit_t, t_deadline)
    if budget is not None:
        price_per_hour = sw.gpus * np.array([t.usd_per_gpu_hour for t in sw.tiers])[:, None]
        with np.errstate(divide="ignore"):
            t_budget = np.where(price_per_hour > 0, budget / (price_per_hour * hours_per_step_second), np.inf)
        t_budget = np.where(sw.billed_floor_usd() > budget, -np.inf, t_budget)
        out["budget"] = probability_at_most(t_budget, median, low, high)
        limit_t = np.minimum(limit_t, t_budget)
    out["both"] = probability_at_most(limit_t, median, low, high) if (budget is not None or deadline is not None) else None
    return out


def pareto_frontier(hours: "np.ndarray", cost: "np.ndarray") -> "np.ndarray":
    """Indices (into the flat arrays) of plans no other plan beats on both time and cost, fastest first."""
    import numpy as np

    order = np.lexsort((cost, hours))
    sorted_cost = cost[order]
    best_before = np.concatenate([[np.inf], np.minimum.accumulate(sorted_cost)[:-1]])
    return order[sorted_cost < best_before]


@dataclass(frozen=True)
class SpotPayoff:
    """Where a preemptible tier stops being cheaper than the cheapest tier without preemptions."""

    tier: str
    stops_at_gpus: Optional[int]   # None: still cheaper at the largest count considered
    nodes: Optional[int]
    compared_with: Optional[str]   # the tier it loses to at that count
    never_pays_off: bool = False
    cheaper_everywhere: bool = False

    def sentence(self) -> str:
        if self.compared_with is None:
            return f"{self.tier}: no tier without preemptions to compare with."
        if self.never_pays_off:
            return f"{self.tier} never pays off here: at every count its expected cost (preemptions included) is above {self.compared_with}'s."
        if self.cheaper_everywhere:
            return f"{self.tier} stays cheaper than {self.compared_with} at every count considered, preemptions included."
        if self.stops_at_gpus is None:
            return f"{self.tier} is still cheaper than {self.compared_with} at the largest count considered, preemptions included."
        return (f"{self.tier} stops paying off at {plural(self.stops_at_gpus, 'GPU')} ({plural(self.nodes, 'node')}): from there on its "
                f"expected cost per job, preemptions included, is at or above {self.compared_with}'s.")


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
        both = np.isfinite(cost[i]) & np.isfinite(alt_cost)
        idx = np.flatnonzero(both)
        if idx.size == 0:
            out.append(SpotPayoff(tier.name, None, None, sw.tiers[steady[0]].name))
            continue
        worse = cost[i, idx] >= alt_cost[idx]
        tail_all_worse = np.logical_and.accumulate(worse[::-1])[::-1]
        if not tail_all_worse[-1]:
            out.append(SpotPayoff(tier.name, None, None, sw.tiers[int(alt_tier[idx[-1]])].name,
                                  cheaper_everywhere=not worse.any()))
            continue
        first = idx[int(np.argmax(tail_all_worse))]
        out.append(SpotPayoff(tier.name, int(sw.gpus[first]), int(sw.nodes[first]), sw.tiers[int(alt_tier[first])].name,
                              never_pays_off=bool(tail_all_worse[0])))
    return out


@dataclass
class Recommendation:
    """One workload's decision: the sweep, the chosen plan, the frontier, and why."""

    workload: str
    objective: str
    budget_usd: Optional[float]
    deadline_hours: Optional[float]
    confidence: Optional[float]
    sweep: Sweep
    chosen: Optional[tuple[int, int]]          # (tier index, count index)
    closest: list[tuple[int, int]]
    frontier: list[tuple[int, int]]
    spot: list[SpotPayoff]
    probabilities: dict
    message: str
    why: list[str] = field(default_factory=list)
    gradient_noise_scale: Optional[float] = None
    params: float = 0.0                                 # model parameters (for the memory sentence)
    warnings: list[str] = field(default_factory=list)   # the model's caveats for the chosen plan

    def plan(self, t: int, c: int) -> dict:
        """One candidate as the JSON fields of DESIGN.md §4 (plus nodes, steps, intervals, odds)."""
        return self.plans([(t, c)])[0]

    def plans(self, pairs: list[tuple[int, int]]) -> list[dict]:
        """Candidates as JSON rows, built column-wise (65,536 counts x 3 tiers in about a second)."""
        import numpy as np

        sw, p = self.sweep, self.probabilities
        if not pairs:
            return []
        t, c = (np.array(x, dtype=np.int64) for x in zip(*pairs))
        rates = np.array([x.preemptions_per_node_hour for x in sw.tiers])[t]
        checkpoints = np.array([x.checkpoint for x in sw.tiers])[t]
        interval = checkpoint_interval_hours(rates, sw.nodes[c], checkpoints)
        columns = {
            "gpus": sw.gpus[c].tolist(),
            "nodes": sw.nodes[c].tolist(),
            "tier": [sw.tiers[i].name for i in t.tolist()],
            "steps": sw.steps[c].astype(np.int64).tolist(),
            "step_seconds": sw.step_seconds[0, c].tolist(),
            "step_seconds_low": sw.step_seconds[1, c].tolist(),
            "step_seconds_high": sw.step_seconds[2, c].tolist(),
            "hours": sw.wall_hours[0, t, c].tolist(),
            "hours_low": sw.wall_hours[1, t, c].tolist(),
            "hours_high": sw.wall_hours[2, t, c].tolist(),
            "cost_usd": sw.cost_usd[0, t, c].tolist(),
            "cost_usd_low": sw.cost_usd[1, t, c].tolist(),
            "cost_usd_high": sw.cost_usd[2, t, c].tolist(),
            "speedup": sw.speedup[t, c].tolist(),
            "efficiency": sw.efficiency[t, c].tolist(),
            "preemption_loss": (1 - 1 / sw.factor[t, c]).tolist(),
            "checkpoint_interval_hours": [x if np.isfinite(x) and x > 0 else None for x in interval.tolist()],
        }
        for key, name in (("p_within_budget", "budget"), ("p_within_deadline", "deadline"), ("p_meet", "both")):
            columns[key] = [None] * len(pairs) if p[name] is None else p[name][t, c].tolist()
        columns["chosen"] = [pair == self.chosen for pair in pairs]
        columns["on_frontier"] = [pair in self.frontier_set for pair in pairs]
        head = {"workload": self.workload, "objective": self.objective}
        return [dict(head, **dict(zip(columns, row))) for row in zip(*columns.values())]

    @functools.cached_property
    def frontier_set(self) -> set:
        return set(self.frontier)

    def candidates(self) -> list[tuple[int, int]]:
        import numpy as np

        tiers, counts = np.nonzero(self.sweep.available)
        order = np.lexsort((tiers, counts))
        return [(int(tiers[i]), int(counts[i])) for i in order]

    def summary(self) -> dict:
        """Per-workload facts beside the plans: status, message, why, frontier, spot pay-off."""
        return {
            "workload": self.workload,
            "objective": self.objective,
            "status": "ok" if self.chosen is not None else "none-qualifies",
            "budget_usd": self.budget_usd,
            "deadline_hours": self.deadline_hours,
            "confidence": self.confidence,
            "baseline_gpus": self.sweep.baseline_gpus,
            "message": self.message,
            "why": self.why,
            "closest": self.plans(self.closest),
            "frontier": [{"gpus": int(self.sweep.gpus[c]), "tier": self.sweep.tiers[t].name} for t, c in self.frontier],
            "spot": [{"tier": s.tier, "stops_paying_off_gpus": s.stops_at_gpus, "nodes": s.nodes,
                      "compared_with": s.compared_with, "never_pays_off": s.never_pays_off, "sentence": s.sentence()}
                     for s in self.spot],
            "statistical_efficiency": self.sweep.statistical_efficiency,
            "gradient_noise_scale": self.gradient_noise_scale,
            "warnings": self.warnings,
        }


def select_tiers(w: "Workload", tier: Optional[str]):
    """The workload's tiers, or the one named (InputError with a suggestion if unknown)."""
    if tier is None:
        return tuple(w.tiers)
    names = [t.name for t in w.tiers]
    if tier not in names:
        close = difflib.get_close_matches(tier, names, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; tiers: {', '.join(names)}"
        raise InputError.at(w.source or w.name, "tiers", f"no tier named {tier!r}{hint}", tier)
    return tuple(t for t in w.tiers if t.name == tier)


def check_limits(budget, deadline, confidence) -> None:
    """InputError for a budget or deadline that is not a positive number, or odds outside (0, 1)."""
    for flag, value in (("--budget", budget), ("--deadline", deadline)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise InputError.at(flag, "", "must be a positive number", value)
    if confidence is not None and not (0 < confidence < 1):
        raise InputError.at("--confidence", "", "must be between 0 and 1 (exclusive)", confidence)
    if confidence is not None and budget is None and deadline is None:
        raise InputError.at("--confidence", "", "needs --budget or --deadline (the odds are of meeting them)", confidence)


def choose(sw: Sweep, objective: str, budget, deadline, confidence, probabilities) -> tuple[Optional[tuple[int, int]], list[tuple[int, int]]]:
    """The chosen (tier, count), or None and the three closest plans."""
    import numpy as np

    hours, cost = sw.wall_hours[0], sw.cost_usd[0]
    qualifies = sw.available.copy()
    if confidence is not None and probabilities["both"] is not None:
        qualifies &= probabilities["both"] >= confidence
    else:
        if budget is not None:
            qualifies &= cost <= budget
        if deadline is not None:
            qualifies &= hours <= deadline
    gpus = np.broadcast_to(sw.gpus, hours.shape)
    if objective == "speedup-per-dollar":
        with np.errstate(divide="ignore"):
            value = np.where(cost > 0, sw.speedup / cost, np.inf)
        keys = (gpus, cost, -value)
    elif objective == "fastest-within-budget":
        keys = (gpus, cost, hours)
    else:
        keys = (gpus, hours, cost)
    flat = np.flatnonzero(qualifies)
    if flat.size:
        best = flat[np.lexsort(tuple(k.ravel()[flat] for k in keys))[0]]
        return tuple(int(i) for i in np.unravel_index(best, hours.shape)), []
    ratio = np.zeros(hours.shape)
    if budget is not None:
        ratio = np.maximum(ratio, cost / budget)
    if deadline is not None:
        ratio = np.maximum(ratio, hours / deadline)
    flat = np.flatnonzero(sw.available)
    order = flat[np.lexsort((gpus.ravel()[flat], cost.ravel()[flat], ratio.ravel()[flat]))[:3]]
    return None, [tuple(int(i) for i in np.unravel_index(k, hours.shape)) for k in order]


def recommend(
    w: "Workload",
    model: StepTimeModel,
    budget: Optional[float] = None,
    deadline: Optional[float] = None,
    tier: Optional[str] = None,
    confidence: Optional[float] = None,
    baseline_gpus: Optional[int] = None,
    gpus: Optional["np.ndarray"] = None,
) -> Recommendation:
    """Price every plan for workload `w` with step times from `model`, pick one, and say why.

    budget in USD, deadline in hours, tier restricts to one billing tier, confidence (0..1) asks
    that a plan meet its limits with at least that probability (default: on the median).
    """
    import numpy as np

    check_limits(budget, deadline, confidence)
    sw = sweep(w, model, select_tiers(w, tier), baseline_gpus, gpus)
    objective = objective_for(budget, deadline)
    probabilities = limit_probabilities(sw, budget, deadline)
    chosen, closest = choose(sw, objective, budget, deadline, confidence, probabilities)
    flat = np.flatnonzero(sw.available)
    front = pareto_frontier(sw.wall_hours[0].ravel()[flat], sw.cost_usd[0].ravel()[flat])
    frontier = list(zip(*(i.tolist() for i in np.unravel_index(flat[front], sw.available.shape))))
    rec = Recommendation(w.name, objective, budget, deadline, confidence, sw, chosen, closest, frontier,
                         spot_payoff(sw), probabilities, "", gradient_noise_scale=w.batch.gradient_noise_scale,
                         params=w.model.params)
    from advisor.planning.explain import explain

    rec.message, rec.why = explain(rec)
    rec.warnings = model_warnings(model, sw, chosen or (closest[0] if closest else None))
    return rec


def model_warnings(model: StepTimeModel, sw: Sweep, plan: Optional[tuple[int, int]]) -> list[str]:
    """The model's own caveats (fit, and extrapolation to the plan's count), when it offers them."""
    import numpy as np

    out = list(getattr(model, "fit_warnings", None) or [])
    extrapolation = getattr(model, "extrapolation_warnings", None)
    if plan is not None and extrapolation is not None:
        c = plan[1]
        out += extrapolation(np.array([sw.gpus[c]]), np.array([sw.nodes[c]]))
    if plan is not None and sw.gpus[plan[1]] < sw.baseline_gpus:
        t, c = plan
        out.append(f"{plural(int(sw.gpus[c]), 'GPU')} is below the smallest measured count ({sw.baseline_gpus}): the step time there "
                   f"is extrapolated downwards (efficiency {sw.efficiency[t, c]:.0%} of the baseline); measure it before trusting it")
    return out
