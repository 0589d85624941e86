"""Recommendation sweep speed: 65,536 GPU counts x 3 billing tiers, priced, chosen and explained.

Target (issue: cost and recommendation): under 0.2 s for 65,536 counts x 3 tiers.

1. The recommendation itself, with limits and with the default objective (the frontier walk)
   (advisor.planning.billing + advisor.planning.recommend: steps, hours, dollars, odds,
   objective, frontier, spot pay-off, why) on workloads/llm7b.toml with one GPU per "node" and
   max_gpus 65,536, so every count from 1 to 65,536 is a candidate on each of its 3 tiers
   (196,608 plans), --budget and --deadline set. Step times come from an explicit function
   (T = 0.05 + 40/N s, ±10% interval) so that this times the recommendation arithmetic alone.
2. End to end with the fitted scaling model (advisor.scaling.model) on real measurements: the Pollux
   OSDI'21 imagenet placements (../shared/data/pollux-osdi21, every batch size, read in place
   by benchmarks/accuracy.py; skipped when absent),
   fit excluded, the model's step_time over every count included; once with every count to
   65,536 and once with 4-GPU nodes (powers of two, then whole nodes: 16,386 counts).

Prints medians over repeats; these machines are noisy.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

from advisor.step_model import StepTimeModel

ROOT = Path(__file__).resolve().parent.parent
POLLUX = ROOT.parent / "shared" / "data" / "pollux-osdi21" / "imagenet" / "placements.csv"
TARGET_S = 0.2


class AmdahlStepTime(StepTimeModel):
    """T(N) = serial + parallel / N seconds, 90% interval ±10%: an explicit step-time function."""

    baseline_gpus = 1

    def step_time(self, gpus, nodes, global_batch=None):
        t = 0.05 + 40.0 / np.asarray(gpus, dtype=float)
        return t, 0.9 * t, 1.1 * t


def with_cluster(w, gpus_per_node: int, max_gpus: int = 65536):
    """The workload on a cluster of `max_gpus`; a fixed global batch raised so every count holds a sample."""
    cluster = w.cluster.model_copy(update={"gpus_per_node": gpus_per_node, "max_gpus": max_gpus})
    update = {"cluster": cluster}
    if w.batch.policy == "fixed-global":
        update["batch"] = w.batch.model_copy(update={"global_samples": max_gpus, "micro_samples": None})
    return w.model_copy(update=update)


def time_recommend(w, model, repeats: int, **limits) -> tuple[float, object]:
    from advisor.planning.recommend import recommend

    recommend(w, model, **limits)  # warm imports (scipy.special) outside the timing
    times, rec = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        rec = recommend(w, model, **limits)
        times.append(time.perf_counter() - start)
    return statistics.median(times), rec


def report(label: str, median: float, rec, repeats: int, target: bool) -> None:
    sw = rec.sweep
    verdict = f"; target < {TARGET_S} s: {'ok' if median < TARGET_S else 'MISSED'}" if target else ""
    print(f"recommend_sweep: {label}: {sw.gpus.size:,} counts x {len(sw.tiers)} tiers "
          f"({int(sw.available.sum()):,} plans): median {median:.3f} s over {repeats}{verdict}")


def pollux_model():
    """(workload, fitted model) from the Pollux imagenet placements trace, or None without the data."""
    if not POLLUX.is_file():
        return None
    from advisor.scaling.model import build_model
    from advisor.spec import workload_from_dict

    w = workload_from_dict({
        "name": "pollux-imagenet",
        "model": {"params": "25.6M", "flops_per_sample": 1.23e10, "precision": "fp32"},
        "batch": {"policy": "fixed-per-gpu", "per_gpu_samples": 81},
        "parallelism": {"strategy": "ddp"},
        "cluster": {"gpu": "T4", "gpus_per_node": 4, "max_gpus": 64, "inter_node_bandwidth": "50 Gbit/s"},
        "job": {"samples": "115.3M"},
        "tiers": [
            {"name": "on-demand", "usd_per_gpu_hour": 0.98},
            {"name": "spot", "usd_per_gpu_hour": 0.40, "preemptions_per_node_hour": 0.1, "restart": "5 min",
             "checkpoint": "30 s"},
            {"name": "reserved", "usd_per_gpu_hour": 0.62, "min_hours": 24},
        ],
    }, "<pollux imagenet>")
    from accuracy import pollux_measurements  # benchmarks/accuracy.py: the traces as measured runs

    return w, build_model(w, measurements=pollux_measurements(POLLUX.parent))


def main(repeats: int = 15) -> dict:
    from advisor.spec import load_workload

    out = {}
    w = with_cluster(load_workload(ROOT / "workloads" / "llm7b.toml"), gpus_per_node=1)
    median, rec = time_recommend(w, AmdahlStepTime(), repeats, budget=2e6, deadline=100.0)
    report("recommendation arithmetic (explicit step-time function), llm7b tiers", median, rec, repeats, True)
    out["arithmetic_s"] = median
    median, rec = time_recommend(w, AmdahlStepTime(), repeats)
    report("the default objective (worth-the-cost frontier walk), same sweep", median, rec, repeats, True)
    out["default_objective_s"] = median
    fitted = pollux_model()
    if fitted is None:
        print("recommend_sweep: fitted model: skipped (../shared/data/pollux-osdi21 not here)")
        return out
    w, model = fitted
    for per_node, key in ((1, "fitted_every_count_s"), (4, "fitted_whole_nodes_s")):
        median, rec = time_recommend(with_cluster(w, per_node), model, max(3, repeats // 3), budget=100.0,
                                     deadline=10.0)
        report(f"end to end with the fitted model (Pollux imagenet), {per_node} GPU(s) per node", median, rec,
               max(3, repeats // 3), per_node == 1)
        out[key] = median
    return out


if __name__ == "__main__":
    main()
