"""Read torchtitan training logs: the metrics line each logged step prints becomes one measured run.

torchtitan (pytorch/torchtitan, torchtitan/components/metrics.py `MetricsProcessor.log`; train.py
before 2025) logs, every `metrics.log_freq` steps, a line like

    [rank0]:[titan] 2025-07-21 15:57:46,090 - root - INFO - step: 10  loss:  3.9119  grad_norm:  1.6558
        memory:  0.00GiB(0.00%)  tps: 34,574  tflops: 3.54  mfu: 0.36%

(one line in the log, this one from pytorch/torchtitan#1437; ANSI colour codes around the fields;
older releases print `wps:` instead of `tps:`). `tps` is
tokens per second per GPU (tokens since the last log / seconds / non-data-parallel degree);
`memory` is the peak reserved device memory in GiB. With the workload's declared batch policy and
sequence length, one optimizer step over N GPUs processes global_batch x seq_len tokens, so

    step_seconds = global_batch x seq_len / (tps x N)

Steps up to the spec's `calibration.warmup_steps` are left out (the first steps include
compilation and allocator warm-up), like advisor's own calibration.

Memory pressure: torchtitan warns `N CUDA memory allocation retries.` whenever the caching allocator
has had to free its cache and retry a cudaMalloc (`num_alloc_retries` of torch.cuda.memory_stats, a
count since the process started; torchtitan/components/metrics.py `DeviceMemoryMonitor.get_peak_stats`).
A count that grows after the warm-up means the timed steps retried: the run is recorded `memory_bound`
(advisor.scaling.evidence.memory_pressed reads its efficiency as a lower bound where memory is freed).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import InputError
from advisor.fileio import distinct_files
from advisor.imports.common import build, decimal, not_this_format, read_log, target_file, whole_number
from advisor.text import plural

if TYPE_CHECKING:
    from advisor.calibration_data import Calibration, Run
    from advisor.spec import Workload

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: A metrics key: a token, or after a non-word character inside one. Applied token by token, so
#: the work is linear in the line (no pattern rescans the rest of a line from every `step:`).
_KEY = re.compile(r"(?<![A-Za-z0-9_])(step|loss|memory|tps|wps):", re.ASCII)
GIB = 2**30
#: torchtitan's allocator-retry warning, `N CUDA memory allocation retries.` (module docstring)
_RETRIES = "memory allocation retries"


def retried_while_timed(path: str | Path, first_timed_line: int) -> bool:
    """Whether the allocator-retry count the log prints grew from its last value before
    `first_timed_line` (the first step kept after warm-up) to its largest after it."""
    before, during = 0, 0
    for lineno, raw in enumerate(read_log(path).splitlines(), start=1):
        at = raw.find(_RETRIES)
        words = raw[:at].split() if at >= 0 else []
        if len(words) >= 2 and words[-2].isascii() and words[-2].isdigit():  # "N CUDA memory allocation retries"
            count = int(words[-2])
            before, during = (count, during) if lineno < first_timed_line else (before, max(during, count))
    return during > before


def _fields(line: str) -> dict[str, str]:
    """The first value of each metrics key in one line (`step: 10` and `step:10` alike; a memory
    of `0.00 GiB` reads as `0.00GiB`)."""
    tokens = line.split()
    found: dict[str, str] = {}
    for i, token in enumerate(tokens):
        m = _KEY.search(token)
        if not m or m.group(1) in found:
            continue
        at = i if token[m.end():] else i + 1  # the token holding the value
        value = token[m.end():] if at == i else (tokens[at] if at < len(tokens) else "")
        if m.group(1) == "memory" and "GiB" not in value and tokens[at + 1:at + 2] and \
                tokens[at + 1].startswith("GiB"):
            value += "GiB"
        found[m.group(1)] = value
    return found


def _row(fields: dict[str, str], file: str, lineno: int) -> tuple[int, float, int | None, int]:
    """(step, tps, peak memory bytes or None, line) of one metrics line, each number read strictly."""
    step = whole_number(fields["step"], file, f"line {lineno}.step", "a step number")
    key = "tps" if "tps" in fields else "wps"
    tps = decimal(fields[key], file, f"line {lineno}.{key}", "tokens per second", grouped=True)
    if tps <= 0:
        raise InputError.at(file, f"line {lineno}.{key}", "must be a positive number of tokens per second",
                            fields[key])
    memory = fields.get("memory", "")
    if "GiB" not in memory:  # another unit or none: no peak memory from this line
        return step, tps, None, lineno
    gib = decimal(memory[:memory.index("GiB")], file, f"line {lineno}.memory", "GiB of memory")
    share = re.fullmatch(r"\(([^()]*)%\)", memory[memory.index("GiB") + 3:])  # `35.10GiB(44.30%)`: of the device
    if share and decimal(share.group(1), file, f"line {lineno}.memory", "a percentage of device memory") > 100:
        raise InputError.at(file, f"line {lineno}.memory", "above 100% of the device's memory: no GPU holds "
                            "more than it has", memory)
    return step, tps, int(gib * GIB), lineno


#: torchtitan's device memory monitor line: `CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory`.
_CAPACITY = re.compile(r"\b[A-Z]+ capacity: ([^\n]{1,200}?) with [\d.]{1,20}GiB memory", re.ASCII)


def device_notes(path: str | Path, workload: "Workload") -> list[str]:
    """A warning when the log's device memory line names a catalog GPU other than the spec's
    (advisor.imports.common.other_gpu_warning): an A100 log imported under an H100 spec was read as its run."""
    from advisor.imports.common import other_gpu_warning

    for lineno, line in enumerate(read_log(path).splitlines(), start=1):
        if m := _CAPACITY.search(_ANSI.sub("", line)):
            return other_gpu_warning(str(path), f"line {lineno}", m.group(1).strip(), workload)
    return []


def read_torchtitan(path: str | Path) -> list[tuple[int, float, int | None, int]]:
    """[(step, tokens per second per GPU, peak memory bytes or None, line number)] of one log."""
    file = str(path)
    text = read_log(path)
    rows = []
    seen: set[int] = set()
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _ANSI.sub("", raw)
        if "step:" not in line:
            continue
        fields = _fields(line)
        if not {"step", "loss"} <= fields.keys() or not {"tps", "wps"} & fields.keys():
            continue
        row = _row(fields, file, lineno)
        # Without `[rank0]:` filtering every rank prints the same step: keep its first line.
        if row[0] not in seen:
            seen.add(row[0])
            rows.append(row)
    if not rows:
        raise not_this_format(
            file, _ANSI.sub("", text), "not a torchtitan training log: no 'step: N  loss: ...  tps: ...' line"
        )
    return rows


def run_from_log(path: str | Path, workload: "Workload", gpus: int, nodes: int) -> "Run":
    """One [[runs]] entry: the logged steps after warm-up, converted with the declared batch."""
    from advisor.calibration_data import Run, run_tokens_per_second
    from advisor.topology.memory import device_memory_ceiling

    file = str(path)
    if workload.model.seq_len is None:
        raise InputError.at(
            workload.source or "<spec>",
            "model.seq_len",
            "needed to turn torchtitan's tokens per second into step seconds",
        )
    rows = read_torchtitan(path)
    warm = workload.calibration.warmup_steps
    kept = [r for r in rows if r[0] > warm]
    if not kept:
        raise InputError.at(
            file,
            f"line {rows[-1][3]}",
            f"every logged step is within the first {warm} warm-up steps (calibration.warmup_steps); log a longer run",
            rows[-1][0],
        )
    batch = int(workload.global_batch(gpus))
    tokens = batch * workload.model.seq_len
    steps = [tokens / (tps * gpus) for _, tps, _, _ in kept]
    _check_steps_exist(file, kept, steps, tokens, gpus)
    _check_logged_time(path, kept, steps, f"{batch} samples x {workload.model.seq_len} tokens", gpus)
    _check_under_peak(file, kept, steps, workload, gpus, batch)
    memories = [m for _, _, m, _ in kept if m is not None]
    ceiling = device_memory_ceiling(workload) if memories else None
    if ceiling is not None and max(memories) > ceiling[0]:  # the rule every command applies to the file
        line = max((r for r in kept if r[2] is not None), key=lambda r: r[2])[3]
        raise InputError.at(file, f"line {line}.memory", f"above {ceiling[0] / 1e9:.4g} GB, {ceiling[1]}: no GPU "
                            "holds more than it has", f"{max(memories) / GIB:.2f}GiB")
    peak_line = max((r for r in kept if r[2] is not None), key=lambda r: r[2], default=kept[0])[3]
    return build(
        Run,
        file,
        kept[0][3],
        {"step_seconds": [r[3] for r in kept], "peak_memory_bytes": peak_line},
        gpus=gpus,
        nodes=nodes,
        step_seconds=steps,
        global_batch=batch,
        peak_memory_bytes=max(memories) if memories else None,
        tokens_per_second=run_tokens_per_second(tokens, steps),
        memory_bound=True if retried_while_timed(path, kept[0][3]) else None,
        source=f"torchtitan log {Path(path).name}: steps {kept[0][0]}-{kept[-1][0]} "
        f"(lines {kept[0][3]}-{kept[-1][3]}); step_seconds = {batch} samples x {workload.model.seq_len} tokens "
        f"/ (tps x {gpus} GPUs)",
    )


#: torchtitan's logger stamps each line `2025-07-21 15:57:46,090` (to the millisecond).
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})[,.](\d{3})\b", re.ASCII)
#: The stamps' step time and the one the spec's batch gives at the logged rate agree within this factor
#: (torchtitan's tps is tokens since the last log over the time since it: the same clock); steps the stamps
#: time below LOGGED_STEP_FLOOR seconds are left unchecked (a millisecond stamp cannot time them).
LOGGED_TIME_TOLERANCE = 1.25
LOGGED_STEP_FLOOR = 0.05


def _check_logged_time(path: str | Path, kept: list, steps: list[float], batch: str, gpus: int) -> None:
    """Refuse a log whose timestamps contradict the step seconds its tps gives with the spec's batch: the
    median of (time between kept metrics lines / steps between them) is what a step took. A log of another
    batch, sequence length or GPU count than the spec and --gpus was converted without a word (a 64-sample
    log imported under a 16-sample spec gave steps 4x too short)."""
    from datetime import datetime
    from itertools import pairwise
    from statistics import median

    lines = read_log(path).splitlines()
    stamps = []
    for step, _, _, lineno in kept:
        m = _STAMP.search(lines[lineno - 1])
        when = datetime.fromisoformat(f"{m.group(1).replace(' ', 'T')}.{m.group(2)}") if m else None
        stamps.append((step, when))
    gaps = [(b - a).total_seconds() / (sb - sa) for (sa, a), (sb, b) in pairwise(stamps)
            if a is not None and b is not None and sb > sa]
    if len(gaps) < 2 or (logged := median(gaps)) < LOGGED_STEP_FLOOR:
        return
    said = median(steps)
    if not 1 / LOGGED_TIME_TOLERANCE <= logged / said <= LOGGED_TIME_TOLERANCE:
        raise InputError.at(str(path), f"line {kept[0][3]}.tps", f"at this rate a step of {batch} over "
                            f"{plural(gpus, 'GPU')} takes {said:.4g} s, but the log's timestamps put one step at "
                            f"{logged:.4g} s: the log ran another batch, seq_len or GPU count than the spec "
                            "(batch, model.seq_len) and --gpus say", kept[0][1])


def _check_steps_exist(file: str, kept: list, steps: list[float], tokens: int, gpus: int) -> None:
    """Refuse, at its own line, a tps that makes a step no run has (outside calibration_data's MIN_SECONDS to
    MAX_SECONDS): a tps of 1e23 was refused once per logged step as "line 2: step_seconds: must be >= 1e-09",
    naming a number the log does not hold, on as many lines as the log had steps."""
    from advisor.calibration_data import MAX_SECONDS, MIN_SECONDS

    for row, step in zip(kept, steps, strict=True):
        if not MIN_SECONDS <= step <= MAX_SECONDS:
            bound = f"under {MIN_SECONDS:g} s" if step < MIN_SECONDS else f"over {MAX_SECONDS:g} s"
            raise InputError.at(file, f"line {row[3]}.tps", f"{tokens:,} tokens a step over {plural(gpus, 'GPU')} "
                                f"at this rate take {bound}, a step no run has: the number is in other units or "
                                "of another run", row[1])


def _check_under_peak(file: str, kept: list, steps: list[float], workload: "Workload", gpus: int, batch: int) -> None:
    """Refuse a log whose median step is faster than the spec's GPUs compute it (advisor.measurements.MFU_CEILING,
    the rule every command applies to the file): a log of a smaller model imported under a larger spec was
    written, and every command then refused the file it had just written."""
    from statistics import median

    from advisor.measurements import MFU_CEILING, faster_than_peak_message, implied_mfu

    step = median(steps)
    mfu = float(implied_mfu(workload, None, None, [gpus], [batch], [step])[0])
    if mfu > MFU_CEILING:
        raise InputError.at(file, f"line {kept[0][3]}.tps", faster_than_peak_message(workload, gpus, batch, step, mfu),
                            kept[0][1])


def import_torchtitan(
    workload_path: str | Path,
    logs: list[str | Path],
    placement: str,
    out: str | Path | None = None,
    command: str | None = None,
) -> tuple["Calibration", Path, list[str]]:
    """Add one run per torchtitan log (all at placement N@M) to a calibration file, under its lock."""
    from advisor.calibration_data import run_tokens_per_second, update_calibration_file
    from advisor.measurements import unsplit, unsplit_message
    from advisor.placement import parse_placements
    from advisor.spec import load_workload

    w = load_workload(workload_path)
    places = parse_placements(placement, w.cluster.gpus_per_node)
    if len(places) != 1:
        raise InputError.at("--gpus", "", "give one placement N@M (the GPUs the logged job ran on)", placement)
    gpus, nodes = places[0]
    if unsplit(w, None, [gpus], [nodes])[0]:  # the file would be refused by every command that reads it
        raise InputError.at("--gpus", "", unsplit_message(w, None, gpus, nodes), placement)
    logs, notes = distinct_files(logs)
    runs = [run_from_log(p, w, gpus, nodes) for p in logs]
    notes += [
        f"{p}: {plural(len(r.step_seconds), 'step')} at {plural(gpus, 'GPU')} over {plural(nodes, 'node')}, "
        f"median step {sorted(r.step_seconds)[len(r.step_seconds) // 2]:.4g} s"
        for p, r in zip(logs, runs, strict=True)
    ] + [note for p in logs for note in device_notes(p, w)]
    out, new = target_file(w, workload_path, out, "torchtitan", logs, "Runs", command)

    # A calibration file holds one run per placement (its step_seconds hold every repeat): several
    # logs of one placement become one run.
    run = runs[0] if len(runs) == 1 else runs[0].model_copy(update={
        "step_seconds": [t for r in runs for t in r.step_seconds],
        "peak_memory_bytes": max((r.peak_memory_bytes for r in runs if r.peak_memory_bytes is not None), default=None),
        "tokens_per_second": run_tokens_per_second(runs[0].global_batch * w.model.seq_len,
                                           [t for r in runs for t in r.step_seconds]),
        "memory_bound": True if any(r.memory_bound for r in runs) else None,
        "source": "; ".join(r.source for r in runs)})

    def change(cal: Calibration) -> Calibration:
        if (gpus, nodes) in cal.measured_counts():
            raise InputError.at(out, "runs", f"already holds a run at {plural(gpus, 'GPU')} over "
                                f"{plural(nodes, 'node')}; import into another --out (several --calibration files "
                                "combine)", f"{gpus}@{nodes}")
        return cal.model_copy(update={"runs": sorted([*cal.runs, run], key=lambda r: (r.gpus, r.nodes))})

    cal = update_calibration_file(out, w.name, new, change)
    # What a calibration checks after each count (advisor.calibrate.quality) holds for an imported run
    # too: a log whose per-GPU throughput beats the file's smallest count beyond the noise, a spread of
    # steps or a peak near capacity is said here, not first at predict time.
    from advisor.calibrate.quality import run_warnings

    return cal, out, notes + [f"warning: {text}" for text in run_warnings(cal, w, gpus, nodes)]
