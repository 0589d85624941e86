"""How fast, and in how much memory, a large measurement CSV is read (issue 15: a 1M-row CSV took
~258 s and 1.4 GB in `predict`).

Writes a synthetic CSV (timings only: the values are random, nothing is fitted on them) of ROWS rows
over the tiny-cpu spec's placements, then in a fresh process per repeat reads it with
`advisor.measurements.read_csv_table` (parse + every cell check) and `read_measurements_csv`
(+ one MeasuredRun per row), and prints the median seconds and the peak resident memory above the
process's baseline. Run: `python benchmarks/csv_speed.py [--rows 1000000] [--repeats 3]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
from advisor.spec import load_workload
from advisor import measurements
w = load_workload(sys.argv[2])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
getattr(measurements, sys.argv[3])(sys.argv[1], *([w] if sys.argv[3] == "read_measurements_csv" else []))
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "extra_mib": (peak - base) / 1024}))
"""


def write_csv(path: Path, rows: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    gpus = rng.choice([1, 2, 4], rows)
    step = 0.5 + rng.permutation(rows) / rows  # distinct: exact copies of a row are refused
    with path.open("w") as f:
        f.write("# synthetic timing input for benchmarks/csv_speed.py\n"
                "gpus,nodes,step_seconds,global_batch,comm_seconds\n")
        f.writelines(f"{g},1,{s:.9f},32,{s / 4:.9f}\n" for g, s in zip(gpus.tolist(), step.tolist(), strict=True))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    spec = ROOT / "workloads" / "tiny-cpu.toml"
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "big.csv"
        write_csv(csv_path, args.rows)
        size = csv_path.stat().st_size / 2**20
        print(f"{args.rows:,} rows, {size:.1f} MiB")
        for function in ("read_csv_table", "read_measurements_csv"):
            runs = []
            for _ in range(args.repeats):
                out = subprocess.run([sys.executable, "-c", CHILD, str(csv_path), str(spec), function], cwd=ROOT,
                                     capture_output=True, text=True, check=False, env={"PYTHONPATH": str(ROOT)})
                if out.returncode:
                    raise SystemExit(out.stderr)
                runs.append(json.loads(out.stdout))
            seconds = statistics.median(r["seconds"] for r in runs)
            mib = statistics.median(r["extra_mib"] for r in runs)
            print(f"{function:24s} median {seconds:6.2f} s  ({args.rows / seconds:,.0f} rows/s)  "
                  f"peak RSS +{mib:,.0f} MiB ({mib / size:.1f}x the file)")
        predict_end_to_end(csv_path, spec, args.repeats)


def predict_end_to_end(csv_path: Path, spec: Path, repeats: int) -> None:
    """`advisor predict SPEC --measurements CSV --gpus 8` as a user runs it: wall time and the
    child's peak resident memory (issue 15 measured 258 s and 1.4 GB for 1M rows)."""
    import time

    walls, peaks = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        pid = subprocess.Popen([sys.executable, "-m", "advisor", "predict", str(spec), "--measurements", str(csv_path),
                                "--gpus", "8"], cwd=ROOT, env={"PYTHONPATH": str(ROOT)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid
        _, status, usage = os.wait4(pid, 0)
        if status:
            raise SystemExit(f"predict failed with status {status}")
        walls.append(time.perf_counter() - start)
        peaks.append(usage.ru_maxrss / 1024)
    print(f"{'predict (whole command)':24s} median {statistics.median(walls):6.2f} s  peak RSS "
          f"{statistics.median(peaks):,.0f} MiB")


if __name__ == "__main__":
    main()
