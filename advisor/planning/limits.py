"""What a recommendation is asked for: the objective (a type, not a string) and the limits it must meet.

Objectives:
- `worth-the-cost` (the default without limits): walk the cost-time frontier from its cheapest plan
  towards faster ones, taking a step while the relative time it saves is at least the relative cost it
  adds, and stop where the next step is not worth its cost (advisor.planning.recommend.worth_the_cost);
- `speedup-per-dollar`: the literal ratio speedup / cost, kept by name (it drifts to the largest count
  whenever efficiency falls slower than 1/N);
- with `--budget`: the fastest plan within budget; with `--deadline`: the cheapest plan that finishes in
  time; with both: the cheapest plan meeting both.

`Limits` is the one value budget (USD), deadline (hours) and confidence (0-1) travel in.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from advisor.errors import InputError


class Objective(enum.StrEnum):
    WORTH_THE_COST = "worth-the-cost"
    SPEEDUP_PER_DOLLAR = "speedup-per-dollar"
    FASTEST_WITHIN_BUDGET = "fastest-within-budget"
    CHEAPEST_WITHIN_DEADLINE = "cheapest-within-deadline"
    CHEAPEST_WITHIN_BOTH = "cheapest-within-budget-and-deadline"


#: Below this probability of meeting the limits, the output names the plan that meets them with 90% odds.
LIKELY = 0.8

#: The objectives a user may name without limits (`--objective`); with limits the limits decide.
FREE_OBJECTIVES = (Objective.WORTH_THE_COST, Objective.SPEEDUP_PER_DOLLAR)


#: Largest budget (USD) and deadline (hours) a plan is asked to meet: a trillion dollars and a
#: century are past any rental, and far enough below the float limit that budget / price and
#: deadline / step time stay finite (1e308 overflowed numpy with RuntimeWarnings).
MAX_BUDGET_USD = 1e12
MAX_DEADLINE_HOURS = 1e6
#: Smallest budget and deadline: a cent (no bill is smaller) and a second (no job starts sooner).
#: Positive but tiny limits overflowed the same divisions from below: cost / 5e-324 is infinite, with
#: numpy RuntimeWarnings printing advisor's install path.
MIN_BUDGET_USD = 0.01
MIN_DEADLINE_HOURS = 1 / 3600


def limit_value(flag: str, value: float | None, bounds: tuple[float, float], unit: str) -> None:
    """InputError naming `flag` unless `value` is None or a finite number within `bounds` (low, high)."""
    if value is None:
        return
    low, high = bounds
    if not (math.isfinite(value) and value > 0):
        raise InputError.at(flag, "", "must be a positive number", value)
    if value < low:
        raise InputError.at(flag, "", f"must be at least {low:.3g} {unit}", value)
    if value > high:
        raise InputError.at(flag, "", f"must be at most {high:,.0f} {unit}", value)


@dataclass(frozen=True)
class Limits:
    """Budget in USD, deadline in hours, and the probability (0-1) of meeting them a plan needs
    (None: a plan qualifies on its median prediction)."""

    budget: float | None = None
    deadline: float | None = None
    confidence: float | None = None

    def __post_init__(self) -> None:
        limit_value("--budget", self.budget, (MIN_BUDGET_USD, MAX_BUDGET_USD), "USD")
        limit_value("--deadline", self.deadline, (MIN_DEADLINE_HOURS, MAX_DEADLINE_HOURS), "hours")
        if self.confidence is not None and not (0 < self.confidence < 1):
            raise InputError.at("--confidence", "", "must be between 0 and 1 (exclusive)", self.confidence)
        if self.confidence is not None and not self.any:
            raise InputError.at(
                "--confidence", "", "needs --budget or --deadline (the odds are of meeting them)", self.confidence
            )

    @property
    def any(self) -> bool:
        return self.budget is not None or self.deadline is not None

    def objective(self, free: Objective | None = None) -> Objective:
        """The objective these limits imply; `free` (default worth-the-cost) when there are none."""
        if free is not None:
            free_objective(free.value)
        if self.budget is not None and self.deadline is not None:
            chosen = Objective.CHEAPEST_WITHIN_BOTH
        elif self.budget is not None:
            chosen = Objective.FASTEST_WITHIN_BUDGET
        elif self.deadline is not None:
            chosen = Objective.CHEAPEST_WITHIN_DEADLINE
        else:
            return free or Objective.WORTH_THE_COST
        if free is not None:
            raise InputError.at(
                "--objective", "", f"applies only without --budget/--deadline (with them: {chosen.value})", free.value
            )
        return chosen


def free_objective(name: str | None) -> Objective | None:
    """`--objective NAME` as an Objective, one of FREE_OBJECTIVES (None when not given)."""
    if name is None:
        return None
    try:
        objective = Objective(name)
    except ValueError:
        objective = None
    if objective not in FREE_OBJECTIVES:
        raise InputError.at("--objective", "", f"choose from {', '.join(o.value for o in FREE_OBJECTIVES)}", name)
    return objective
