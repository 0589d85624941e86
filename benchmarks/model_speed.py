"""Speed of the scaling model: fit + predict on real measured steps, and the recommendation sweep.

1. Fit + predict on the Pollux ncf trace (1,661 measured steps, each its own run) and on cifar10
   (1,183), with the number of least-squares solves per fit (one full fit + one per held-out count
   of leave-one-count-out; intervals sample the posterior, no refits). Target: 2,000 steps < 1 s.
2. A 100,000-row measurement CSV (rows drawn with replacement from the real ncf trace, each step
   scaled by a random factor within +-1% so that no row repeats another; the timing, not the data,
   is the point): read, then fit (rows grouped by placement first). Target: seconds.
3. `step_time` over every count 1..65,536, three times (one per billing tier), on the checked-in
   bert-large calibration. Target: under 0.2 s.
4. `advisor recommend --budget 20000` (the README's main command, every workload), wall clock of
   the whole process. Target: under 1.5 s.

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

            def run(w=w, m=m, gpus=gpus):  # bind this iteration's values (B023)
                ScalingModel(w, m).predict(gpus, None, 64 * gpus)

            solves = count_solves(lambda w=w, m=m: ScalingModel(w, m))
            print(f"fit + predict, Pollux {name}: {m.n_steps} measured steps in {len(m.runs)} runs: "
                  f"{median_seconds(run):.2f} s, {solves} least-squares solves (target < 1 s for 2,000 steps)")
        big_csv(DEFAULT_DATA)
    else:
        print(f"skipped fit timing: {DEFAULT_DATA} not found", file=sys.stderr)

    w = load_workload(ROOT / "workloads" / "bert-large.toml")
    model = build_model(w, calibration=ROOT / "calibrations" / "bert-large_published_nvidia_dle.toml")
    counts = np.arange(1, 65537, dtype=float)

    def sweep():
        for _ in range(3):
            model.step_time(counts)

    print(f"step_time sweep, 65,536 counts x 3 tiers: {median_seconds(sweep):.3f} s (target < 0.2 s)")
    import subprocess

    cmd = [sys.executable, "-m", "advisor", "recommend", "--budget", "20000"]
    import os

    codes = []
    # Exit 3 is an answer (some workload has no plan within the budget); anything else is a failure.
    before = os.times()
    wall = median_seconds(lambda: codes.append(subprocess.run(cmd, cwd=ROOT, capture_output=True).returncode),
                          repeats=3)
    after = os.times()
    if set(codes) - {0, 3}:
        raise SystemExit(f"advisor recommend failed: exit {codes}")
    cpu = (after.children_user + after.children_system - before.children_user - before.children_system) / 3
    # CPU seconds do not grow with other jobs on the machine; wall time does.
    print(f"`advisor recommend --budget 20000` (all workloads), wall: {wall:.2f} s, CPU {cpu:.2f} s per run "
          f"(target < 1.5 s wall)")
    return 0


def count_solves(fn) -> int:
    """How many bounded least-squares solves (advisor.scaling.estimator._solve) `fn` runs."""
    from advisor.scaling import estimator

    real = estimator._solve
    calls = [0]

    def counting(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    estimator._solve = counting
    try:
        fn()
    finally:
        estimator._solve = real
    return calls[0]


def big_csv(data: Path, rows: int = 100_000) -> None:
    import csv
    import tempfile

    from accuracy import pollux_workload

    from advisor.measurements import read_measurements_csv
    from advisor.scaling.model import ScalingModel

    with (data / "ncf" / "placements.csv").open() as f:
        real = list(csv.DictReader(f))
    rng = np.random.default_rng(0)
    pick = rng.integers(0, len(real), rows)
    jitter = rng.uniform(0.99, 1.01, rows) + np.arange(rows) * 1e-12  # distinct rows
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.csv"
        with path.open("w") as f:
            f.write("gpus,nodes,step_seconds,global_batch\n")
            for i, j in zip(pick, jitter, strict=True):
                r = real[i]
                g = sum(int(c) for c in r["placement"])
                f.write(f"{g},{len(r['placement'])},{float(r['step_time']) * j:.15g},{int(r['local_bsz']) * g}\n")
        w = pollux_workload("ncf")
        t0 = time.perf_counter()
        m = read_measurements_csv(path, w)
        t1 = time.perf_counter()
        ScalingModel(w, m).predict(np.array([64.0, 256.0]))
        t2 = time.perf_counter()
    print(f"100,000-row CSV: read {t1 - t0:.2f} s, fit + predict {t2 - t1:.2f} s (target: seconds)")


if __name__ == "__main__":
    sys.exit(main())
