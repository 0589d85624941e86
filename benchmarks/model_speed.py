"""Speed of the scaling model: fit + predict on real measured steps, and the recommendation sweep.

1. Fit + predict on the Pollux ncf trace (1,661 measured steps, each its own run: the worst case
   for cross-validation and the bootstrap, 4 families x 15 held-out counts + 40 refits), and on
   cifar10 (1,183). Target: 2,000 measured steps in under a second.
2. `step_time` over every count 1..65,536, three times (one per billing tier), on the checked-in
   bert-large calibration. Target: under 0.2 s.

Medians of 5 repeats (other processes share this machine). Skips part 1 without the Pollux traces.
Run: python benchmarks/model_speed.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def median_seconds(fn, repeats=5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    from accuracy import DEFAULT_DATA, pollux_measurements, pollux_workload
    from advisor.scaling.model import ScalingModel, build_model
    from advisor.spec import load_workload

    if DEFAULT_DATA.is_dir():
        for name in ("ncf", "cifar10"):
            w, m = pollux_workload(name), pollux_measurements(DEFAULT_DATA / name)
            gpus = np.array([8, 16, 64, 256, 1024], float)

            def run():
                ScalingModel(w, m).predict(gpus, None, 64 * gpus)

            print(f"fit + predict, Pollux {name}: {m.n_steps} measured steps in {len(m.runs)} runs: "
                  f"{median_seconds(run):.2f} s (target < 1 s for 2,000 steps)")
    else:
        print(f"skipped fit timing: {DEFAULT_DATA} not found", file=sys.stderr)

    w = load_workload(ROOT / "workloads" / "bert-large.toml")
    model = build_model(w, calibration=ROOT / "calibrations" / "bert-large_published_nvidia_dle.toml")
    counts = np.arange(1, 65537, dtype=float)

    def sweep():
        for _ in range(3):
            model.step_time(counts)

    print(f"step_time sweep, 65,536 counts x 3 tiers: {median_seconds(sweep):.3f} s (target < 0.2 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
