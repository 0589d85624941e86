"""A whole calibration: which counts, where the file goes, lock, resume, save after every count.

`calibrate(...)` measures locally, one launch per GPU count (advisor.calibrate.launchers.local);
`collect(...)` merges results of emitted multi-node runs (advisor.calibrate.launchers). Both hold an
exclusive lock on the output file for their whole run (a second calibration writing the same file
is refused), and write the file atomically after every completed count, so Ctrl-C, a crash or a
hung count loses only the count in progress, and a failed write leaves the previous file whole.

A count that finished is never lost: its save (and its being recorded as saved) runs with SIGINT and
SIGTERM held (`fileio.signals_deferred`), and an interrupt that lands after the ranks finished but
before the save keeps the result folder and names it (`CalibrationInterrupted.kept`). The file
records what defines its measurements (`[setup]`, advisor.calibrate.plan.measurement_setup):
`--resume` and `--collect` refuse a spec that changed since, naming the field.
"""

from __future__ import annotations

import re
import shlex
import socket
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from advisor.calibrate import quality, scratch
from advisor.calibrate.launchers.local import CalibrationFailed, launch_local
from advisor.calibrate.plan import batch_plan, measurement_setup
from advisor.calibrate.results import add_result, find_result_dirs, read_result_dir
from advisor.calibration_data import (
    Calibration,
    Provenance,
    calibrations_dir,
    load_calibration,
    now_utc,
    save_calibration,
)
from advisor.errors import InputError, Problem
from advisor.fileio import check_output_target, exclusive_lock, signals_deferred
from advisor.placement import check_layout_splits, parse_placements
from advisor.setup_record import UNSET, setup_differences
from advisor.spec import Workload, load_workload
from advisor.text import plural

#: Most ranks one local calibration starts: each is a process with its own torch import (~300 MB);
#: 256 already needs ~75 GB of memory, more than any one host this is meant for.
MAX_LOCAL_RANKS = 256

#: Note added to provenance of CPU calibrations.
CPU_NOTE = "CPU processes with gloo stand in for GPUs, one OpenMP thread each; the proxy ran in fp32 on CPU"


def resolve_device(device: str) -> tuple[str, int | None]:
    """('cpu', None) or ('cuda', visible GPUs). `auto` is cuda when torch sees a GPU."""
    if device == "cpu":
        return "cpu", None
    try:
        import torch
    except ImportError:
        raise InputError.at("--device", "", "calibration needs torch: pip install -e '.[calibrate]' "
                            "(from the advisor checkout)", device) from None
    if torch.cuda.is_available():
        return "cuda", torch.cuda.device_count()
    if device == "cuda":
        raise InputError.at("--device", "", "torch sees no CUDA GPU on this machine", device)
    return "cpu", None


def check_warmup(device: str, warmup: int, option: str = "--warmup") -> None:
    """Refuse an unwarmed CUDA calibration: the first steps create the NCCL communicators, cuBLAS
    handles and the caching allocator's segments (seconds, once), and a timed step that pays them
    is no step of the job. `option` names where the value came from (the CLI's --warmup, or the
    spec's calibration.warmup_steps). Called by `calibrate` and, for emitted runs, by the CLI."""
    if device == "cuda" and warmup < 1:
        raise InputError.at(option, "", "a CUDA calibration needs at least 1 warm-up step (the first steps "
                            "set up NCCL and cuBLAS and would be timed)", warmup)


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
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    return calibrations_dir(w.source) / f"{w.name}_{label}_{date}.toml"


def local_counts(w: Workload, gpus: str | None, device: str, available: int | None) -> list[int]:
    """Counts to measure on this machine: --gpus, else the spec's calibration.gpus; on CUDA capped
    by the visible GPUs (explicit counts above it are an error, default ones are dropped)."""
    if gpus is None:
        counts = list(w.calibration.gpus)
        if available is not None:
            counts = [n for n in counts if n <= available] or [available]
        return counts
    # A bare N here means N ranks on this machine (one node), whatever the cluster's node size:
    # on CPU up to MAX_LOCAL_RANKS; on CUDA the visible GPUs cap it below.
    placements = parse_placements(gpus, gpus_per_node=sys.maxsize, keep_repeats=True)
    if len({n for n, _ in placements}) != len(placements):
        raise InputError.at("--gpus", "", "counts must be unique", gpus)
    for n, nodes in placements:
        if nodes != 1:
            raise InputError.at("--gpus", "", f"{n}@{nodes} spans nodes: use --emit torchrun|slurm and --collect", gpus)
        if available is not None and n > available:
            raise InputError.at("--gpus", "", f"{n} GPUs asked, this machine has {available}", gpus)
        if n > MAX_LOCAL_RANKS:
            raise InputError.at("--gpus", "", f"{n} ranks on one host: at most {MAX_LOCAL_RANKS} (more ranks run "
                                "as multi-node counts: --emit torchrun)", gpus)
    check_layout_splits(w, placements, "--gpus", gpus)
    return [n for n, _ in placements]


def _new_calibration(w: Workload, device: str, notes: str | None, command: str | None) -> Calibration:
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


class CalibrationInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a calibration: which counts are in `out`, and the folder holding a
    count that had finished but was not saved yet (None when there was none)."""

    def __init__(self, out: Path, saved: list[int], kept: Path | None = None, hint: str = ""):
        super().__init__()
        self.out, self.saved, self.kept, self.hint = out, list(saved), kept, hint

    def message(self) -> str:
        counts = ", ".join(f"N={n}" for n in self.saved) or "none"
        text = f"interrupted; ranks stopped; finished counts kept in {self.out}: {counts}"
        if self.kept is not None:
            text += f"; a finished count not yet saved is kept in {self.kept}: add it with: {self.hint}"
        return text + "; rerun with --resume to continue"


def command_hint(*words: object) -> str:
    """A command line to print for the user, every word quoted by emit's one quoting function; a
    word with a control character (which emit refuses) is still quoted safely by shlex.quote, so a
    hint never aborts the run that prints it."""
    from advisor.calibrate.launchers.quoting import join_words

    line = ["advisor", *map(str, words)]
    try:
        return join_words(line)
    except InputError:
        return shlex.join(line)


def _prepare_out(out: Path) -> None:
    """Refuse a target no file can be written to before anything is measured; create its folder."""
    check_output_target(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError.at(out, "", f"cannot create folder {out.parent}: {exc.strerror}") from None


def _legacy_setup(cal: Calibration) -> dict:
    """What a file written before `[setup]` existed says about its set-up, from [environment]."""
    env = cal.environment
    known = {"parallelism.strategy": env.get("strategy"), "model.precision": env.get("declared_precision"),
             "model.params": env.get("declared_params"),
             "device": {"gloo": "cpu", "nccl": "cuda"}.get(env.get("backend"))}
    return {k: v for k, v in known.items() if v is not None}


def check_setup(cal: Calibration, setup: dict, file: Path) -> Calibration:
    """Refuse a spec that changed since `cal` was measured (one line per changed field); return
    `cal` with `setup` recorded."""
    recorded = cal.setup if cal.setup is not None else _legacy_setup(cal)
    changed = setup_differences(recorded, setup)
    if changed:
        show = lambda v: "unset" if v == UNSET else repr(v)  # noqa: E731
        raise InputError([Problem(str(file), f"setup.{key}", f"the spec changed since this file was measured: "
                                  f"recorded {show(old)}, the spec now gives {show(new)}; measure into another "
                                  "--out, or restore the spec") for key, old, new in changed])
    return cal.model_copy(update={"setup": {**recorded, **setup}})


def _open_calibration(out: Path, w: Workload, resume: bool, setup: dict | None,
                      new: Callable[[], Calibration]) -> Calibration:
    """The file a calibration continues (`resume`: refused when the spec changed since, unless
    `setup` is None: not known yet) or starts; an existing file without `resume` is refused."""
    if out.exists():
        if not resume:
            raise InputError.at(out, "", "exists; pass --resume to add the missing counts, or choose another --out")
        cal = load_calibration(out, w.name)
        return check_setup(cal, setup, out) if setup is not None else cal
    return new().model_copy(update={"setup": setup})


def check_out(w: Workload, out: str | Path, resume: bool, device: str) -> None:
    """The checks of an explicit --out that need no torch, for the CLI to run before it looks for
    torch (a planner's install has none, and "install torch" would hide the real mistake): a
    target no file can be written to, a folder where no lock can be taken (read-only), an existing
    file without --resume, and with --resume a spec that changed since (when --device names the
    kind; under "auto" that check waits for the device). `calibrate` repeats them under its lock."""
    out = Path(out)
    _prepare_out(out)
    setup = measurement_setup(w, device) if device in ("cpu", "cuda") else None
    with exclusive_lock(out):
        _open_calibration(out, w, resume, setup, lambda: Calibration.model_construct())


def _sweep(event: Callable[[str, str], None]) -> None:
    """Remove result folders of calibrations whose process died (SIGKILL); name unowned ones."""
    removed, unowned = scratch.sweep()
    if removed:
        event("clean", f"removed {plural(len(removed), 'result folder')} left by calibrations that were killed: "
                       + ", ".join(map(str, removed)))
    if unowned:
        event("warn", "result folders of an older advisor, not removed (delete them when no calibration "
                      "runs): " + ", ".join(map(str, unowned)))


def _finished_result(folder: Path) -> dict | None:
    """The complete, valid result in `folder`, or None (no result yet, or a partial one)."""
    try:
        return read_result_dir(folder) if (folder / "result.json").is_file() else None
    except InputError:
        return None


def checked_result(cal: Calibration, w: Workload, result: dict) -> tuple[Calibration, list[str]]:
    """`cal` with one more count's result, its quality warnings (advisor.calibrate.quality) noted in
    `[provenance] notes`, and those warnings."""
    measured = add_result(cal, w, result)
    found = quality.run_warnings(measured, w, int(result["gpus"]), int(result["nodes"]))
    return quality.with_notes(measured, found), found


def _save_count(cal: Calibration, w: Workload, result: dict, out: Path, folder: Path, hint: str,
                event: Callable[[str, str], None]) -> Calibration:
    """Add one count's result and write the file; on a write failure keep the folder, named."""
    measured, found = checked_result(cal, w, result)
    for text in found:
        event("warn", text)
    try:
        save_calibration(measured, out)
    except InputError as exc:  # the old file is intact; keep this count's measurement too
        scratch.keep(folder)
        keep = Problem(str(folder), "", f"the N={result['gpus']} measurement is kept here; when {out.parent} is "
                       f"writable again add it with: {hint}")
        raise InputError([*exc.problems, keep]) from None
    return measured


def _measure_count(w: Workload, workload_path: Path, n: int, run: dict, cal: Calibration, out: Path,
                   saved: list[int], event: Callable[[str, str], None]) -> Calibration:
    """Measure one count into a fresh result folder, save it, remove the folder (see module docstring)."""
    folder = scratch.new_folder(w.name, n)
    hint = command_hint("calibrate", workload_path, "--collect", folder, "--out", out)
    try:
        result = launch_local(workload_path.resolve(), n, run["device"], run["steps"], run["warmup"], folder,
                              run["timeout"], on_progress=lambda text: event("progress", text))
    except CalibrationFailed as exc:
        logs = scratch.move_logs(folder, out, n)  # named in the message instead of the temp folder
        raise CalibrationFailed(str(exc).replace(str(folder), str(logs)), out=out, saved=saved) from None
    except KeyboardInterrupt:
        finished = _finished_result(folder)
        if finished is None:
            scratch.remove(folder)
            raise CalibrationInterrupted(out, saved) from None
        raise CalibrationInterrupted(out, saved, scratch.keep(folder), hint) from None
    except BaseException:
        scratch.remove(folder)
        raise
    with signals_deferred():  # saved, recorded as saved and cleaned up, or none of it
        cal = _save_count(cal, w, result, out, folder, hint, event)
        saved.append(n)
        event("saved", f"N={n}: saved to {out}")
        scratch.remove(folder)
    return cal


def calibrate(
    workload_path: str | Path,
    gpus: str | None = None,
    device: str = "auto",
    steps: int | None = None,
    warmup: int | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    timeout: float | None = None,
    notes: str | None = None,
    command: str | None = None,
    on_event: Callable[[str, str], None] | None = None,
) -> tuple[Calibration, Path]:
    """Measure the workload at each GPU count on this machine; returns (calibration, file path).

    The file is written after every count. `resume` continues an existing file (counts already in
    it are skipped; a spec that changed since is refused); without it an existing file is refused
    rather than overwritten. `on_event` receives ("start"|"progress"|"saved"|"skip"|"warn"|"clean",
    text) for progress display. Raises InputError for bad input, CalibrationFailed when a count
    fails or times out, CalibrationInterrupted (a KeyboardInterrupt) on Ctrl-C or SIGTERM.
    """
    event = on_event or (lambda kind, text: None)
    workload_path = Path(workload_path)
    w = load_workload(workload_path)
    device, available = resolve_device(device)
    counts = local_counts(w, gpus, device, available)
    run = {"device": device, "timeout": timeout,
           "steps": steps if steps is not None else w.calibration.steps,
           "warmup": warmup if warmup is not None else w.calibration.warmup_steps}
    check_warmup(device, run["warmup"], "--warmup" if warmup is not None else "calibration.warmup_steps")
    out = Path(out) if out is not None else default_out(w, device_label(device))
    _prepare_out(out)
    _sweep(event)
    saved: list[int] = []
    with exclusive_lock(out):
        cal = _open_calibration(out, w, resume, measurement_setup(w, device),
                                lambda: _new_calibration(w, device, notes, command))
        try:
            for n in counts:
                if (n, 1) in cal.measured_counts():
                    event("skip", f"N={n}: already in {out}")
                    continue
                event("start", f"N={n}: starting {n} rank{'s' if n > 1 else ''} ({device})")
                if n > w.cluster.gpus_per_node:
                    event("warn", f"N={n}: more than cluster.gpus_per_node ({w.cluster.gpus_per_node}) on this one "
                                  "host; recorded as 1 node, though the spec's cluster would need "
                                  f"{w.nodes(n)} (multi-node counts: --emit torchrun, then --collect)")
                cal = _measure_count(w, workload_path, n, run, cal, out, saved, event)
        except KeyboardInterrupt as exc:  # landed between counts: everything finished is saved
            if isinstance(exc, CalibrationInterrupted):
                raise
            raise CalibrationInterrupted(out, saved) from None
    return cal, out


def _check_result(w: Workload, folder: Path, result: dict) -> None:
    """A collected result must be of this workload as the spec stands: name, batch at its N, and
    the strategy, precision and size its environment declares."""
    file = folder / "result.json"
    if result.get("workload") not in (None, w.name):
        raise InputError.at(file, "workload", f"result is for another workload, not {w.name!r}", result["workload"])
    expected = batch_plan(w, result["gpus"]).global_batch
    if result["global_batch"] != expected:
        raise InputError.at(file, "global_batch", f"the spec's batch gives {expected} samples per step at "
                            f"{result['gpus']} GPUs: this run measured another set-up", result["global_batch"])
    env = result.get("environment", {})
    for key, want in (("strategy", w.parallelism.strategy), ("declared_precision", w.model.precision),
                      ("declared_params", int(w.model.params))):
        if key in env and env[key] != want:
            raise InputError.at(file, f"environment.{key}", f"the spec now gives {want!r}: this run measured "
                                "another set-up", env[key])


def collect(
    workload_path: str | Path,
    results_root: str | Path,
    out: str | Path | None = None,
    notes: str | None = None,
    command: str | None = None,
    on_event: Callable[[str, str], None] | None = None,
) -> tuple[Calibration, Path]:
    """Merge results of emitted (multi-node) runs under `results_root` into the calibration file.

    Every result.json is validated like any input (advisor.calibrate.results.RankResult) and must
    match the spec. An existing file is extended (placements already in it are kept, not
    replaced); a new one is created. Raises InputError naming the file and field.
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
        _check_result(w, folder, result)
    env0 = results[0][1].get("environment", {})
    device = "cuda" if env0.get("backend") == "nccl" else "cpu"
    label = "cpu" if device == "cpu" else device_slug(str(env0.get("device", "cuda")))
    out = Path(out) if out is not None else default_out(w, label)
    _prepare_out(out)
    with exclusive_lock(out):
        cal = _open_calibration(out, w, True, measurement_setup(w, device),
                                lambda: _new_calibration(w, device, notes, command))
        for folder, result in results:
            key = (result["gpus"], result["nodes"])
            if key in cal.measured_counts():
                event("skip", f"{folder}: N={key[0]} over {key[1]} nodes already in {out}; kept the old one")
                continue
            cal, found = checked_result(cal, w, result)
            for text in found:
                event("warn", text)
            event("saved", f"{folder}: N={key[0]} over {plural(key[1], 'node')} added")
        with signals_deferred():
            save_calibration(cal, out)
    return cal, out
