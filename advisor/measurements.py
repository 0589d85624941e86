"""Measured step times in one shape, whatever they came from: a calibration file or a CSV import.

A `Measurements` holds `MeasuredRun`s (one GPU placement and batch, its raw timed steps, and the
exposed communication per step where known) and the collective probes of a calibration. The
scaling model fits on run medians and bootstraps over runs and steps.

Measurement CSV (contract: DESIGN.md §3): `#` lines are comments (the source goes there); a header
row, then one row per measurement: `gpus` (required), `nodes` (default ceil(gpus /
gpus_per_node)), `step_seconds` or `throughput` (samples/s, whole job), optional `global_batch`
(samples per step; default: the workload's batch policy) and, an addition of ours, optional
`comm_seconds`: communication per step not hidden behind compute (step minus compute time; the
Pollux traces' `sync_time`). Rows may differ in batch size.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np

from advisor.errors import InputError

if TYPE_CHECKING:
    from advisor.calibration_data import Calibration, Collective
    from advisor.spec import Workload

CSV_COLUMNS = ("gpus", "nodes", "step_seconds", "throughput", "global_batch", "comm_seconds")


@dataclass(frozen=True)
class MeasuredRun:
    """One measured configuration: `gpus` over `nodes`, `global_batch` samples per step."""

    gpus: int
    nodes: int
    global_batch: float
    step_seconds: np.ndarray
    """Raw timed steps (after warm-up); one value for a CSV row."""
    comm_seconds: Optional[np.ndarray] = None
    """Exposed (not overlapped) communication per step, same length as step_seconds, or None."""

    @property
    def median_step(self) -> float:
        return float(np.median(self.step_seconds))

    @property
    def median_comm(self) -> float:
        return float(np.median(self.comm_seconds)) if self.comm_seconds is not None else math.nan


@dataclass(frozen=True)
class Measurements:
    """Everything measured for one workload, and where it came from (`source`, for messages)."""

    runs: list[MeasuredRun]
    probes: list["Collective"] = field(default_factory=list)
    source: str = ""

    def __post_init__(self):
        if not self.runs:
            raise InputError.at(self.source or "<measurements>", "", "no measured runs to fit")

    @property
    def gpus(self) -> np.ndarray:
        return np.array([r.gpus for r in self.runs], dtype=float)

    @property
    def nodes(self) -> np.ndarray:
        return np.array([r.nodes for r in self.runs], dtype=float)

    @property
    def global_batch(self) -> np.ndarray:
        return np.array([r.global_batch for r in self.runs], dtype=float)

    @property
    def step(self) -> np.ndarray:
        """Median step seconds per run."""
        return np.array([r.median_step for r in self.runs])

    @property
    def comm(self) -> np.ndarray:
        """Median exposed communication seconds per run (NaN where not measured)."""
        return np.array([r.median_comm for r in self.runs])

    @property
    def n_steps(self) -> int:
        return int(sum(len(r.step_seconds) for r in self.runs))

    def subset(self, keep: np.ndarray) -> "Measurements":
        """The runs where `keep` is true (probes kept)."""
        runs = [r for r, k in zip(self.runs, keep) if k]
        return Measurements(runs, self.probes, self.source)


def from_calibration(cal: "Calibration", workload: "Workload") -> Measurements:
    """Runs of a calibration file; exposed communication from compute_seconds or comm_seconds."""
    runs = []
    for run in cal.runs:
        steps = np.asarray(run.step_seconds, dtype=float)
        comm = None
        if run.compute_seconds:
            # compute_seconds are separate timed steps without synchronisation (not paired with
            # step_seconds): each step's exposed communication is its excess over their median.
            comm = np.maximum(steps - float(np.median(run.compute_seconds)), 0.0)
        elif run.comm_seconds is not None and len(run.comm_seconds) == len(steps):
            comm = np.asarray(run.comm_seconds, dtype=float)
        batch = run.global_batch if run.global_batch is not None else float(workload.global_batch(run.gpus))
        runs.append(MeasuredRun(run.gpus, run.nodes, float(batch), steps, comm))
    return Measurements(runs, list(cal.collectives), str(cal.path or "<calibration>"))


def _number(text: str, file: str, where: str, integer: bool = False, zero_ok: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError.at(file, where, "must be a number", text) from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise InputError.at(file, where, "must be >= 0" if zero_ok else "must be a positive number", text)
    if integer and value != int(value):
        raise InputError.at(file, where, "must be a whole number", text)
    return value


def read_measurements_csv(path: str | Path, workload: "Workload") -> Measurements:
    """Parse a measurement CSV into runs. Bad input: InputError `FILE: line N.column: message`."""
    path = Path(path)
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError.at(file, "", "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError.at(file, "", f"cannot read as UTF-8 text: {exc}") from None
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise InputError.at(file, "", "no header row (expected columns: gpus, step_seconds or throughput, ...)")
    header_no, header_line = lines[0]
    header = [h.strip() for h in next(csv.reader([header_line]))]
    for h in header:
        if h not in CSV_COLUMNS:
            import difflib

            close = difflib.get_close_matches(h, CSV_COLUMNS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known columns: {', '.join(CSV_COLUMNS)}"
            raise InputError.at(file, f"line {header_no}", f"unknown column{hint}", h)
    if "gpus" not in header:
        raise InputError.at(file, f"line {header_no}", "missing required column 'gpus'")
    if "step_seconds" not in header and "throughput" not in header:
        raise InputError.at(file, f"line {header_no}", "needs a 'step_seconds' or a 'throughput' column")
    runs = []
    seen: dict[tuple, int] = {}
    for lineno, line in lines[1:]:
        cells = [c.strip() for c in next(csv.reader([line]))]
        # Rows of one placement with different values are repeated measurements (Pollux traces
        # hold many); a row identical in every cell is a copy-paste slip that would double-count.
        if tuple(cells) in seen:
            raise InputError.at(file, f"line {lineno}", f"repeats line {seen[tuple(cells)]} exactly; remove the copy "
                                "(rows of one placement with different values count as repeated measurements)")
        seen[tuple(cells)] = lineno
        if len(cells) != len(header):
            raise InputError.at(file, f"line {lineno}", f"expected {len(header)} fields like the header", len(cells))
        row = dict(zip(header, cells))
        gpus = int(_number(row["gpus"], file, f"line {lineno}.gpus", integer=True))
        nodes = (int(_number(row["nodes"], file, f"line {lineno}.nodes", integer=True)) if row.get("nodes")
                 else int(workload.nodes(gpus)))
        if nodes > gpus:
            raise InputError.at(file, f"line {lineno}.nodes", f"more nodes than GPUs ({gpus})", nodes)
        if -(-gpus // nodes) > workload.cluster.gpus_per_node:
            raise InputError.at(file, f"line {lineno}.nodes", f"{gpus} GPUs on {nodes} node(s) exceed cluster.gpus_per_node "
                                f"({workload.cluster.gpus_per_node})", nodes)
        batch = (_number(row["global_batch"], file, f"line {lineno}.global_batch") if row.get("global_batch")
                 else float(workload.global_batch(gpus)))
        if row.get("step_seconds"):
            step = _number(row["step_seconds"], file, f"line {lineno}.step_seconds")
        elif row.get("throughput"):
            step = batch / _number(row["throughput"], file, f"line {lineno}.throughput")
        else:
            raise InputError.at(file, f"line {lineno}", "needs step_seconds or throughput")
        comm = None
        if row.get("comm_seconds"):
            comm = np.array([_number(row["comm_seconds"], file, f"line {lineno}.comm_seconds", zero_ok=True)])
        runs.append(MeasuredRun(gpus, nodes, batch, np.array([step]), comm))
    if not runs:
        raise InputError.at(file, "", "no data rows after the header")
    return Measurements(runs, [], file)


def combine_measurements(workload: "Workload", cal: Optional["Calibration"] = None,
                         csv_measurements: Optional[Measurements] = None) -> Measurements:
    """One set of measurements from a (merged) calibration file and a measurement CSV: the file's
    runs and collective probes plus the CSV's runs. A calibration that holds only probes (an
    imported nccl-tests log) adds them to the CSV's step times; the CSV cannot carry probes."""
    runs: list[MeasuredRun] = []
    probes: list = []
    sources: list[str] = []
    if cal is not None:
        if cal.runs:
            runs += from_calibration(cal, workload).runs
        probes += list(cal.collectives)
        sources.append(str(cal.path or "<calibration>"))
    if csv_measurements is not None:
        runs += csv_measurements.runs
        probes += csv_measurements.probes
        sources.append(csv_measurements.source)
    return Measurements(runs, probes, " + ".join(sources))


def combine_sources(workload: "Workload", calibration=None, measurements=None) -> Measurements:
    """What --calibration (a file, a Calibration, or a list of either: merged) and --measurements
    (a CSV path or Measurements) name, as one set of measurements (combine_measurements)."""
    from advisor.calibration_data import Calibration, load_calibration, merge_calibrations

    items = calibration if isinstance(calibration, (list, tuple)) else [] if calibration is None else [calibration]
    cals = [c if isinstance(c, Calibration) else load_calibration(c, workload.name) for c in items]
    csv = measurements if measurements is None or isinstance(measurements, Measurements) else \
        read_measurements_csv(measurements, workload)
    return combine_measurements(workload, merge_calibrations(cals) if cals else None, csv)
