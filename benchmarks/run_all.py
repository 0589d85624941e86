"""Every benchmark in one command: accuracy and interval coverage, CLI latency, model speed,
recommendation sweep time, calibration cost. Each runs as its own process (their timings must not
share a warm interpreter) and prints its own numbers.

Run: python benchmarks/run_all.py [--emulated]   (--emulated adds the ~3 min emulated-cluster
experiment and the ~3 min DDP/FSDP/HSDP one, which need root and network namespaces).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ["accuracy.py", "layout_accuracy.py", "cli_latency.py", "model_speed.py", "recommend_sweep.py",
              "recommend_picks.py",
              "calibration_cost.py"]


def main(argv: list[str]) -> int:
    names = BENCHMARKS + (["emulated_cluster.py", "emulated_layouts.py"] if "--emulated" in argv else [])
    failed = []
    for name in names:
        print(f"\n=== {name}", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(HERE / name)], cwd=HERE.parent)
        print(f"=== {name}: exit {code}, {time.perf_counter() - start:.1f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
