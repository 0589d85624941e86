"""A whole calibration: which counts, where the file goes, lock, resume, save after every count.

`calibrate(...)` measures locally, one launch per GPU count (advisor.calibrate.launcher);
`collect(...)` merges results of emitted multi-node runs (advisor.calibrate.emit). Both hold an
exclusive lock on the output file for their whole run (a second calibration writing the same file
is refused), and write the file atomically after every completed count, so Ctrl-C, a crash or a
hung count loses only the count in progress, and a failed write leaves the previous file whole.
"""

from __future__ import annotations

import re
import shutil
import socket
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

from advisor.calibrate.launcher import launch_local
from advisor.calibrate.results import add_result, find_result_dirs, read_result_dir
from advisor.calibration_data import Calibration, Provenance, calibrations_dir, load_calibration, now_utc, save_calibration
from advisor.errors import InputError, Problem
from advisor.fileio import exclusive_lock
from advisor.placement import parse_placements
from advisor.spec import Workload, load_workload
from advisor.text import plural

#: Note added to provenance of CPU calibrations.
CPU_NOTE = "CPU processes with gloo stand in for GPUs, one OpenMP thread each; the proxy ran in fp32 on CPU"


def resolve_device(device: str) -> tuple[str, Optional[int]]:
    """('cpu', None) or ('cuda', visible GPUs). `auto` is cuda when torch sees a GPU."""
    if device == "cpu":
        return "cpu", None
    try:
        import torch
    except ImportError:
        raise InputError.at("--device", "", "calibration needs torch: pip install -e '.[calibrate]' (from the advisor checkout)", device) from None
    if torch.cuda.is_available():
        return "cuda", torch.cuda.device_count()
    if device == "cuda":
        raise InputError.at("--device", "", "torch sees no CUDA GPU on this machine", device)
    return "cpu", None


def device_slug(name: str) -> str:
    """A device name as a file-name part: `NVIDIA H200` -> `h200`."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug.removeprefix("nvidia-") or "cuda"


def device_label(device: str) -> str:
    """`cpu`, or this machine's GPU model as a file-name slug."""
    if device == "cpu":
        return "cpu"
    import torch

    return device_slug(torch.cuda.get_device_name(0))


def default_out(w: Workload, label: str) -> Path:
    """calibrations/<name>_<device>_<date>.toml (beside the spec's workloads/ folder)."""
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    return calibrations_dir(w.source) / f"{w.name}_{label}_{date}.toml"


def local_counts(w: Workload, gpus: Optional[str], device: str, available: Optional[int]) -> list[int]:
    """Counts to measure on this machine: --gpus, else the spec's calibration.gpus; on CUDA capped
    by the visible GPUs (explicit counts above it are an error, default ones are dropped)."""
    if gpus is None:
        counts = list(w.calibration.gpus)
        if available is not None:
            counts = [n for n in counts if n <= available] or [available]
        return counts
    # A bare N here means N ranks on this machine (one node), whatever the cluster's node size:
    # on CPU any N is allowed; on CUDA the visible GPUs cap it below.
    placements = parse_placements(gpus, gpus_per_node=sys.maxsize)
    if len({n for n, _ in placements}) != len(placements):
        raise InputError.at("--gpus", "", "counts must be unique", gpus)
    for n, nodes in placements:
        if nodes != 1:
            raise InputError.at("--gpus", "", f"{n}@{nodes} spans nodes: use --emit torchrun|slurm and --collect", gpus)
        if available is not None and n > available:
            raise InputError.at("--gpus", "", f"{n} GPUs asked, this machine has {available}", gpus)
    return [n for n, _ in placements]


def _new_calibration(w: Workload, device: str, notes: Optional[str], command: Optional[str]) -> Calibration:
    parts = [CPU_NOTE] if device == "cpu" else []
    if notes:
        parts.append(notes)
    return Calibration(
        workload=w.name,
        provenance=Provenance(
            source="measured", created=now_utc(), host=socket.gethostname(), command=command,
            notes="; ".join(parts) or None,
        ),
    )


def calibrate(
    workload_path: str | Path,
    gpus: Optional[str] = None,
    device: str = "auto",
    steps: Optional[int] = None,
    warmup: Optional[int] = None,
    out: Optional[str | Path] = None,
    resume: bool = False,
    timeout: Optional[float] = None,
    notes: Optional[str] = None,
    command: Optional[str] = None,
    on_event: Optional[Callable[[str, str], None]] = None,
) -> tuple[Calibration, Path]:
    """Measure the workload at each GPU count on this machine; returns (calibration, file path).

    The file is written after every count. `resume` continues an existing file (counts already in
    it are skipped); without it an existing file is refused rather than overwritten. `on_event`
    receives ("start"|"progress"|"saved"|"skip", text) for progress display.
    Raises InputError for bad input, CalibrationFailed when a count fails or times out.
    """
    event = on_event or (lambda kind, text: None)
    workload_path = Path(workload_path)
    w = load_workload(workload_path)
    device, available = resolve_device(device)
    counts = local_counts(w, gpus, device, available)
    steps = steps if steps is not None else w.calibration.steps
    warmup = warmup if warmup is not None else w.calibration.warmup_steps
    out = Path(out) if out is not None else default_out(w, device_label(device))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError.at(out, "", f"cannot create folder {out.parent}: {exc.strerror}") from None
    with exclusive_lock(out):
        if out.exists():
            if not resume:
                raise InputError.at(out, "", "exists; pass --resume to add the missing counts, or choose another --out")
            cal = load_calibration(out, w.name)
        else:
            cal = _new_calibration(w, device, notes, command)
        done = cal.measured_counts()
        for n in counts:
            if (n, 1) in done:
                event("skip", f"N={n}: already in {out}")
                continue
            event("start", f"N={n}: starting {n} rank{'s' if n > 1 else ''} ({device})")
            if n > w.cluster.gpus_per_node:
                event("warn", f"N={n}: more than cluster.gpus_per_node ({w.cluster.gpus_per_node}) on this one "
                              "host; recorded as 1 node, though the spec's cluster would need "
                              f"{w.nodes(n)} (multi-node counts: --emit torchrun, then --collect)")
            results = Path(tempfile.mkdtemp(prefix=f"advisor-calibrate-{w.name}-{n}-"))
            try:
                result = launch_local(
                    workload_path.resolve(), n, device, steps, warmup, results, timeout,
                    on_progress=lambda text: event("progress", text),
                )
            except KeyboardInterrupt:
                shutil.rmtree(results, ignore_errors=True)
                raise
            measured = add_result(cal, w, result)
            try:
                save_calibration(measured, out)
            except InputError as exc:  # the old file is intact; keep this count's measurement too
                keep = Problem(str(results), "", f"the N={n} measurement is kept here; when {out.parent} is "
                               f"writable again add it with: advisor calibrate {workload_path} --collect {results} --out {out}")
                raise InputError([*exc.problems, keep]) from None
            cal = measured
            shutil.rmtree(results, ignore_errors=True)
            event("saved", f"N={n}: saved to {out}")
    return cal, out


def collect(
    workload_path: str | Path,
    results_root: str | Path,
    out: Optional[str | Path] = None,
    notes: Optional[str] = None,
    command: Optional[str] = None,
    on_event: Optional[Callable[[str, str], None]] = None,
) -> tuple[Calibration, Path]:
    """Merge results of emitted (multi-node) runs under `results_root` into the calibration file.

    An existing file is extended (placements already in it are kept, not replaced); a new one is
    created. Raises InputError when a result belongs to another workload or is incomplete.
    """
    event = on_event or (lambda kind, text: None)
    workload_path = Path(workload_path)
    w = load_workload(workload_path)
    results_root = Path(results_root)
    folders = find_result_dirs(results_root)
    if not folders:
        raise InputError.at(results_root, "", "no result.json found: did the emitted runs finish?")
    results = [(f, read_result_dir(f)) for f in folders]
    for folder, result in results:
        if result.get("workload") not in (None, w.name):
            raise InputError.at(folder / "result.json", "workload", f"result is for another workload, not {w.name!r}", result["workload"])
    backend = results[0][1].get("environment", {}).get("backend", "gloo")
    device = "cuda" if backend == "nccl" else "cpu"
    if out is None:
        label = "cpu" if device == "cpu" else device_slug(results[0][1]["environment"].get("device", "cuda"))
        out = default_out(w, label)
    out = Path(out)
    with exclusive_lock(out):
        cal = load_calibration(out, w.name) if out.exists() else _new_calibration(w, device, notes, command)
        for folder, result in results:
            key = (int(result["gpus"]), int(result["nodes"]))
            if key in cal.measured_counts():
                event("skip", f"{folder}: N={key[0]} over {key[1]} nodes already in {out}; kept the old one")
                continue
            cal = add_result(cal, w, result)
            event("saved", f"{folder}: N={key[0]} over {plural(key[1], 'node')} added")
        save_calibration(cal, out)
    return cal, out
