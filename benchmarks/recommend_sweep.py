"""Recommendation sweep speed: 65,536 GPU counts x 3 billing tiers, priced, chosen and explained.

Target (issue: cost and recommendation): under 0.2 s. The workload is workloads/llm7b.toml with
one GPU per "node" and max_gpus 65,536 so that every count from 1 to 65,536 is a candidate on each
of its three tiers (196,608 plans), global batch raised to 65,536 so that every count is a
data-parallel plan; --budget and --deadline set so the odds, frontier and why are all computed.

Step times: the fitted scaling model (advisor.predict) from the workload's checked-in calibration
when both exist, timed as part of the sweep; else an explicit Amdahl function T = 0.05 + 40/N s
with a ±10% interval, which times the recommendation arithmetic alone (and says so). Prints medians
over repeats; these machines are noisy.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


class AmdahlStepTime:
    """T(N) = serial + parallel / N seconds, 90% interval ±10%: stands in for a fitted model."""

    baseline_gpus = 1

    def step_time(self, gpus, nodes):
        t = 0.05 + 40.0 / np.asarray(gpus, dtype=float)
        return t, 0.9 * t, 1.1 * t


def sweep_workload():
    from advisor.spec import load_workload

    w = load_workload(ROOT / "workloads" / "llm7b.toml")
    cluster = w.cluster.model_copy(update={"gpus_per_node": 1, "max_gpus": 65536})
    batch = w.batch.model_copy(update={"global_samples": 65536, "micro_samples": None})
    return w.model_copy(update={"cluster": cluster, "batch": batch})


def step_time_model(w):
    """(model, description): the fitted model when available, else the Amdahl function."""
    try:
        from advisor.predict import build_model
    except ImportError:
        return AmdahlStepTime(), "explicit Amdahl step time (advisor.predict not in this build)"
    from advisor.calibration_data import find_calibrations

    if not find_calibrations("llm7b", ROOT / "workloads" / "llm7b.toml"):
        return AmdahlStepTime(), "explicit Amdahl step time (no llm7b calibration checked in)"
    return build_model(w), "fitted scaling model from calibrations/llm7b*.toml"


def main(repeats: int = 15) -> dict:
    from advisor.recommend import recommend

    w = sweep_workload()
    model, what = step_time_model(w)
    recommend(w, model, budget=2e6, deadline=100.0)  # warm imports (scipy.special) outside the timing
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        rec = recommend(w, model, budget=2e6, deadline=100.0)
        times.append(time.perf_counter() - start)
    plans = int(rec.sweep.available.sum())
    median = statistics.median(times)
    print(f"recommend_sweep: {rec.sweep.gpus.size:,} counts x {len(rec.sweep.tiers)} tiers ({plans:,} plans), {what}: "
          f"median {median:.3f} s over {repeats} (min {min(times):.3f}, max {max(times):.3f}); "
          f"target < 0.2 s: {'ok' if median < 0.2 else 'MISSED'}", file=sys.stdout)
    return {"median_s": median, "plans": plans, "step_times": what}


if __name__ == "__main__":
    main()
