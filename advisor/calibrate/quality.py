"""A calibration checks its own measurements: what makes a number untrustworthy becomes a warning.

After every count (advisor.calibrate.session) the new run is checked for: a host busier than its
cores (the ranks shared the CPUs with other work, or with each other), timed steps that spread
more than SPREAD_LIMIT, a per-GPU throughput above the smallest count's by more than the runs'
own noise (superlinear scaling: the proxy has no cache effect that could earn it, so a busy
baseline is the usual cause), and a memory peak near the device's capacity (the allocator starts
to retry and free, and the step slows). Each becomes a warning in the output and a note in the
file's `[provenance] notes`, so a reader of the file sees what the person at the terminal saw
(issue #21: a 4-rank CPU calibration at load 7.6 on 2 cores recorded a 112% point without a word).
An imported torchtitan log is checked the same way when it is added (advisor.imports.torchtitan).
Pure Python: no torch.
"""

from __future__ import annotations

import statistics

from advisor.calibration_data import Calibration, Run
from advisor.scaling.ceiling import NOISE, superlinear_ratio
from advisor.scaling.evidence import MEMORY_NEAR
from advisor.spec import Workload

#: Largest (max - min) / median of a run's timed steps accepted without a warning.
SPREAD_LIMIT = 0.25
#: Smallest noise assumed when comparing two runs' throughput (a run's spread can be ~0 by luck): the
#: model's own allowance (advisor.scaling.ceiling.NOISE), so a calibration warns where predict does.
NOISE_FLOOR = NOISE
#: Share of device memory above which a peak is "near capacity": the model's (advisor.scaling.evidence).
MEMORY_LIMIT = MEMORY_NEAR


def spread(run: Run) -> float:
    """(max - min) / median of the run's timed steps: 0 for a single step."""
    steps = run.step_seconds
    return (max(steps) - min(steps)) / statistics.median(steps)


def per_gpu_throughput(run: Run, w: Workload) -> float:
    return (run.global_batch or w.global_batch(run.gpus)) / statistics.median(run.step_seconds) / run.gpus


def _per_count(env: dict, key: str, gpus: int):
    table = env.get(key)
    return table.get(str(gpus)) if isinstance(table, dict) else None


def load_warning(cal: Calibration, run: Run) -> str | None:
    load, cpus = _per_count(cal.environment, "load_average", run.gpus), cal.environment.get("cpus")
    if not load or not isinstance(cpus, int) or load[0] <= cpus:
        return None
    return (f"N={run.gpus}: host load {load[0]:g} on {cpus} cores at the end of the run: the ranks shared "
            "the CPUs, so the step times include waiting for them")


def spread_warning(run: Run) -> str | None:
    if spread(run) <= SPREAD_LIMIT:
        return None
    return (f"N={run.gpus}: timed steps spread {spread(run):.0%} (from {min(run.step_seconds):.3g} s to "
            f"{max(run.step_seconds):.3g} s): more steps or a quieter host give a steadier median")


def superlinear_warning(cal: Calibration, w: Workload, run: Run) -> str | None:
    base = min(cal.runs, key=lambda r: (r.gpus, r.nodes))
    if run is base or run.gpus == base.gpus:
        return None
    noise = max(spread(run), spread(base), NOISE_FLOOR)
    ratio = superlinear_ratio(per_gpu_throughput(run, w), per_gpu_throughput(base, w), noise)
    if ratio is None:
        return None
    return (f"N={run.gpus}: per-GPU throughput {ratio:.0%} of N={base.gpus}'s, above the runs' noise ({noise:.0%}): "
            f"superlinear scaling data parallelism cannot earn; the N={base.gpus} baseline was probably slowed "
            "(other work on the host, memory near capacity): remeasure it (a calibration: --resume after "
            "removing it, or a new --out)")


def memory_warning(cal: Calibration, run: Run) -> str | None:
    capacity = cal.environment.get("device_memory_bytes")
    peak = run.peak_reserved_bytes or run.peak_memory_bytes
    if not isinstance(capacity, int) or not peak or peak <= MEMORY_LIMIT * capacity:
        return None
    return (f"N={run.gpus}: peak memory {peak / 2**30:.1f} GiB is {peak / capacity:.0%} of the device's "
            f"{capacity / 2**30:.1f} GiB: near capacity the allocator frees and retries, and steps slow")


def run_warnings(cal: Calibration, w: Workload, gpus: int, nodes: int) -> list[str]:
    """Warnings about the run at (gpus, nodes) of `cal`, and about the runs it is the new baseline of."""
    run = next(r for r in cal.runs if (r.gpus, r.nodes) == (gpus, nodes))
    found = [load_warning(cal, run), spread_warning(run), memory_warning(cal, run)]
    base = min(cal.runs, key=lambda r: (r.gpus, r.nodes))
    targets = [r for r in cal.runs if r is not base] if run is base else [run]
    found += [superlinear_warning(cal, w, r) for r in targets]
    return [text for text in found if text]


def with_notes(cal: Calibration, warnings: list[str]) -> Calibration:
    """`cal` with each warning not already there appended to `[provenance] notes`."""
    notes = cal.provenance.notes or ""
    new = [text for text in warnings if text not in notes]
    if not new:
        return cal
    joined = "; ".join([notes, *new] if notes else new)
    return cal.model_copy(update={"provenance": cal.provenance.model_copy(update={"notes": joined})})
