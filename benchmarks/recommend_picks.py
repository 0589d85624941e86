"""What the default objective and the budget pick on every checked-in workload, against issue 12's bars.

For each workload in workloads/ with calibration data (fitted model, checked-in calibration, its
measured memory peaks): the default (worth-the-cost) pick, its cost over the cheapest plan's and its
efficiency (bar: not >= 2x the cheapest while < 50% efficient), the smallest count offered, the
fastest plan within $20,000 with its global batch over the largest measured one, and the largest
deviation of spot wall time / on-demand wall time at the same count from the exact exponential-model
factor (Daly 2006, τ found by a bounded scalar search here, independently of advisor's solver; bar: 5%).

Run: python benchmarks/recommend_picks.py
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy.optimize import minimize_scalar

ROOT = Path(__file__).resolve().parent.parent


def exact_factor(rate: float, checkpoint_h: float, restart_h: float) -> float:
    mtbf = 1 / rate
    wall = lambda tau: mtbf * math.exp(restart_h / mtbf) * math.expm1((tau + checkpoint_h) / mtbf) / tau  # noqa: E731
    return float(minimize_scalar(wall, bounds=(1e-9 * mtbf, 10 * mtbf), method="bounded",
                                 options={"xatol": 1e-12}).fun)


def spot_deviation(rec) -> float:
    """Largest |(spot wall / on-demand wall) / exact factor - 1| over the counts both tiers offer."""
    sw = rec.sweep
    steady = [i for i, t in enumerate(sw.tiers) if t.preemptions_per_node_hour == 0 and t.min_hours == 0]
    worst = 0.0
    for s, tier in enumerate(sw.tiers):
        if tier.preemptions_per_node_hour == 0 or not steady:
            continue
        od = steady[0]
        for c in np.flatnonzero(sw.available[s] & sw.available[od])[::5]:
            factor = exact_factor(tier.preemptions_per_node_hour * int(sw.nodes[c]), tier.checkpoint / 3600,
                                  tier.restart / 3600)
            worst = max(worst, abs(sw.wall_hours[0, s, c] / sw.wall_hours[0, od, c] / factor - 1))
    return worst


def main() -> None:
    from advisor.calibration_data import find_calibrations
    from advisor.planning.recommend import recommend
    from advisor.scaling.model import build_model
    from advisor.spec import load_workload
    from advisor.text import plural

    for path in sorted((ROOT / "workloads").glob("*.toml")):
        w = load_workload(path)
        if not find_calibrations(w.name, path):
            print(f"recommend_picks: {w.name}: no calibration data, skipped")
            continue
        model = build_model(w)
        rec = recommend(w, model)
        sw = rec.sweep
        t, c = rec.chosen
        cheapest = float(sw.cost_usd[0][sw.available].min())
        ratio, eff = float(sw.cost_usd[0, t, c]) / cheapest, float(sw.efficiency[t, c])
        bar = "ok" if not (ratio >= 2 and eff < 0.5) else "FAILED"
        smallest = int(sw.gpus[sw.available.any(axis=0)].min())
        budget = recommend(w, model, budget=20000.0)
        pick = "none"
        if budget.chosen is not None:
            bt, bc = budget.chosen
            growth = budget.sweep.global_batch[bc] / rec.measured_batch
            pick = (f"{plural(int(budget.sweep.gpus[bc]), 'GPU')} on {budget.sweep.tiers[bt].name}, "
                    f"batch {growth:.2f}x the largest measured")
        where = f"{plural(int(sw.gpus[c]), 'GPU')} ({plural(int(sw.nodes[c]), 'node')}) on {sw.tiers[t].name}"
        print(f"recommend_picks: {w.name}: default {where}, {ratio:.2f}x the cheapest plan's cost at {eff:.0%} "
              f"efficiency: bar {bar}; smallest count {smallest}; $20,000: {pick}; spot/on-demand vs exact factor: "
              f"{spot_deviation(rec):.2%} at most (bar 5%)")


if __name__ == "__main__":
    main()
