"""CLI start-up cost: median wall time of `advisor validate workloads/llm7b.toml` vs `python -c pass`.

Target (issue: foundation): under 0.4 s more than bare Python. Prints medians over repeats; these
machines are noisy, so compare medians, not single runs.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def median_seconds(argv: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(repeats: int = 15) -> dict:
    bare = median_seconds([sys.executable, "-c", "pass"], repeats)
    validate = median_seconds([sys.executable, "-m", "advisor", "validate", "workloads/llm7b.toml"], repeats)
    extra = validate - bare
    print(f"cli_latency: python -c pass median {bare:.3f} s; advisor validate median {validate:.3f} s; "
          f"overhead {extra:.3f} s (target < 0.4 s: {'ok' if extra < 0.4 else 'MISSED'})")
    return {"bare_s": bare, "validate_s": validate, "overhead_s": extra}


if __name__ == "__main__":
    main()
