"""Synthetic check of memory pressure (docs/validation.md, "Memory pressure as a fitted term").

Each published FSDP series, fitted on its smallest measured row only, that row's steps slowed by
SLOW (default 1.22: issue "Read real measurements better"'s series, the linear guess 18% off) and
flagged memory_bound or not; priors learned without the series, as benchmarks/accuracy.py learns
them; MAPE (%) of the predicted steps against the series' real larger rows, and the linear guess's.
Synthetic: the slowdown is ours, the rows predicted are the published ones.

    python benchmarks/memory_pressure_check.py [SLOW]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import accuracy
import corpus


def main(argv: list[str]) -> int:
    from threadpoolctl import threadpool_limits

    from advisor.measurements import MeasuredRun, Measurements
    from advisor.scaling.fitting import naive_step
    from advisor.scaling.model import ScalingModel

    slow = float(argv[0]) if argv else 1.22
    with threadpool_limits(limits=1):
        series = [s for s in corpus.load(corpus.POLLUX.parent / "nowhere") if s.test is not None]
        samples = {s.name: accuracy.evidence(s) for s in series}
        samples.update(accuracy.run_samples())  # the published one-row runs: MFU evidence only
        table = accuracy.density_table(series, samples)
        rows = []
        for s in (s for s in series if s.workload.parallelism.strategy == "fsdp"):
            priors = accuracy.tuned(samples, table, without=s.name)
            small = s.fit.gpus.min()
            out = {}
            for flag in (False, True):
                runs = [MeasuredRun(r.gpus, r.nodes, r.global_batch, r.step_seconds * slow, r.comm_seconds, flag)
                        for r in s.fit.runs if r.gpus == small]
                m = ScalingModel(s.workload, Measurements(runs, s.fit.probes, s.fit.source, s.fit.peaks, s.fit.layout),
                                 n_bootstrap=64, priors=priors)
                t = s.test
                med, lo, hi = m.step_time(t.gpus, t.nodes, t.global_batch)
                out[flag] = (float(np.mean(np.abs(med - t.step) / t.step) * 100),
                             float(np.mean((t.step >= lo) & (t.step <= hi)) * 100))
                naive = naive_step(m.record.problem.data, t.gpus, t.global_batch)
                out["naive"] = float(np.mean(np.abs(naive - t.step) / t.step) * 100)
            print(f"{s.name:24s} fit {int(small):3d}  linear {out['naive']:5.1f}  unflagged {out[False][0]:5.1f}  "
                  f"flagged {out[True][0]:5.1f} (coverage {out[True][1]:3.0f}%)", flush=True)
            rows.append((out["naive"], out[False][0], out[True][0], out[True][1]))
    mean = np.mean(np.array(rows), axis=0)
    print(f"mean: linear {mean[0]:.1f}  unflagged {mean[1]:.1f}  flagged {mean[2]:.1f} (coverage {mean[3]:.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
