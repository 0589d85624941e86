"""What calibrating costs, relative to the job it sizes: calibration GPU-hours / job GPU-hours.

Target (issue: checked-in calibrations): under 1% for llm7b.

Calibration GPU-hours, per count N in the spec's `[calibration] gpus`:
  N x [ (warmup + steps) x (full step + compute-only step)   # advisor calibrate alternates the two
        + probe time + start-up ]
- step times: the fitted model's median at N (from the checked-in calibration). The proxy
  (`proxy_layers` of the model's layers) is cheaper than the full model, so using the full
  model's step time is an upper bound; the compute-only step is taken as long as the full one
  (also an upper bound).
- probes: 3 collectives x 5 sizes x (5 warm-up + 20 timed) repeats of at most the gradient size
  at the declared intra-node bandwidth (advisor/calibrate defaults; small next to the steps).
- start-up: STARTUP_S per count (process launch, NCCL init, model build). An assumption, not a
  measurement: 60 s is the order of torchrun + NCCL initialisation on an 8-GPU node.

Job GPU-hours: GPUs x wall hours of the plan `advisor recommend` chooses by default (best speedup
per dollar), and of the fastest plan within a $20,000 budget.

Run: python benchmarks/calibration_cost.py [WORKLOAD ...] (default: workloads/llm7b.toml).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
STARTUP_S = 60.0
PROBE_OPS, PROBE_SIZES, PROBE_REPEATS = 3, 5, 25


def calibration_gpu_hours(w, model) -> float:
    counts = np.array(w.calibration.gpus, dtype=float)
    step, _, _ = model.step_time(counts, w.nodes(counts))
    steps = w.calibration.warmup_steps + w.calibration.steps
    probe_s = np.where(counts > 1,
                       PROBE_OPS * PROBE_SIZES * PROBE_REPEATS * w.model.gradient_bytes / w.intra_node_bandwidth, 0.0)
    seconds = counts * (steps * 2 * step + probe_s + STARTUP_S)
    return float(seconds.sum() / 3600)


def main(paths: list[str]) -> list[dict]:
    from advisor.planning.recommend import recommend
    from advisor.scaling.model import build_model
    from advisor.spec import load_workload

    out = []
    for path in paths:
        w = load_workload(path)
        model = build_model(w)
        cal = calibration_gpu_hours(w, model)
        for label, kwargs in (("default (speedup per dollar)", {}), ("fastest within $20,000", {"budget": 20000.0})):
            rec = recommend(w, model, **kwargs)
            if rec.chosen is None:
                print(f"calibration_cost: {w.name}: {label}: no plan qualifies")
                continue
            plan = rec.plan(*rec.chosen)
            job = plan["gpus"] * plan["hours"]
            ratio = cal / job
            print(f"calibration_cost: {w.name}: calibration {cal:.2f} GPU-h "
                  f"(counts {w.calibration.gpus}, upper bound) vs job {job:,.0f} GPU-h "
                  f"({label}: {plan['gpus']} GPUs x {plan['hours']:.1f} h on {plan['tier']}): "
                  f"{ratio:.3%} (target < 1%: {'ok' if ratio < 0.01 else 'MISSED'})")
            out.append({"workload": w.name, "plan": label, "calibration_gpu_hours": cal, "job_gpu_hours": job,
                        "ratio": ratio})
    return out


if __name__ == "__main__":
    main(sys.argv[1:] or [str(ROOT / "workloads" / "llm7b.toml")])
