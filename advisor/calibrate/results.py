"""From what the ranks wrote (`result.json`) to the calibration file's runs and collectives.

One path for local runs and for multi-node results gathered with `--collect`: a result directory
holds rank 0's `result.json` (see advisor.calibrate.worker) and one `rank<R>.json` per rank.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from advisor.calibrate.environment import merge_environments
from advisor.calibration_data import Calibration, Collective, Run
from advisor.errors import InputError
from advisor.spec import Workload


def run_from_result(w: Workload, result: dict) -> tuple[Run, list[Collective]]:
    """The Run and probes of one result.json. `global_batch` is recorded only when the run's
    batch differs from the workload's policy at that N (plan.batch_plan's rounding)."""
    gpus, nodes = int(result["gpus"]), int(result["nodes"])
    declared = w.global_batch(gpus)
    run = Run(
        gpus=gpus,
        nodes=nodes,
        step_seconds=result["step_seconds"],
        compute_seconds=result.get("compute_seconds"),
        global_batch=result["global_batch"] if result["global_batch"] != declared else None,
        micro_samples=result.get("micro_samples"),
        peak_memory_bytes=result.get("peak_memory_bytes"),
        tokens_per_second=result.get("tokens_per_second"),
        layout=result.get("layout"),
    )
    probes = [Collective(**{"gpus": gpus, "nodes": nodes, **c}) for c in result.get("collectives", [])]
    return run, probes


def add_result(cal: Calibration, w: Workload, result: dict) -> Calibration:
    """`cal` with one more run (and its probes, environment) from a result.json."""
    run, probes = run_from_result(w, result)
    env = merge_environments(cal.environment, result.get("environment", {}), run.gpus)
    return cal.model_copy(update={
        "runs": sorted([*cal.runs, run], key=lambda r: (r.gpus, r.nodes)),
        "collectives": [*cal.collectives, *probes],
        "environment": env,
    })


def read_result_dir(folder: Path) -> dict:
    """rank 0's result.json of one run, checked to have every rank's rank<R>.json beside it."""
    path = folder / "result.json"
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError.at(path, "", f"cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InputError.at(path, "", f"malformed JSON: {exc.msg} at line {exc.lineno}") from None
    for key in ("gpus", "nodes", "step_seconds", "global_batch"):
        if key not in result:
            raise InputError.at(path, key, "required (not a result written by advisor.calibrate.worker)")
    missing = [r for r in range(int(result["gpus"])) if not (folder / f"rank{r}.json").is_file()]
    if missing:
        raise InputError.at(folder, "", f"incomplete run: no rank<R>.json from ranks {missing}")
    return result


def find_result_dirs(root: Path) -> list[Path]:
    """Every folder under `root` (itself included) holding a result.json, sorted."""
    if not root.is_dir():
        raise InputError.at(root, "", "no such directory (--collect wants the --results folder of the emitted runs)")
    return sorted(p.parent for p in root.rglob("result.json"))


@dataclass(frozen=True)
class SummaryRow:
    gpus: int
    nodes: int
    step_seconds: float
    throughput: float
    speedup: float
    efficiency: float
    busbw: Optional[float]
    exposed_comm: Optional[float]


def summary(cal: Calibration, w: Workload) -> list[SummaryRow]:
    """Per run: median step, samples/s, speedup and efficiency against the smallest count, all_reduce
    busbw at the largest probed message, and the median exposed-communication share."""
    rows = []
    runs = sorted(cal.runs, key=lambda r: (r.gpus, r.nodes))
    base = None
    for r in runs:
        step = statistics.median(r.step_seconds)
        batch = r.global_batch or w.global_batch(r.gpus)
        thr = batch / step
        if base is None:
            base = (r.gpus, thr)
        speedup = thr / base[1]
        probes = [c for c in cal.collectives if c.op == "all_reduce" and c.gpus == r.gpus and c.nodes == r.nodes]
        busbw = max(probes, key=lambda c: c.bytes).busbw if probes else None
        exposed = None
        if r.compute_seconds:
            exposed = max(0.0, step - statistics.median(r.compute_seconds)) / step
        rows.append(SummaryRow(r.gpus, r.nodes, step, thr, speedup, speedup / (r.gpus / base[0]), busbw, exposed))
    return rows
