"""Measured step times in one shape, whatever they came from: a calibration file or a CSV import.

A `Measurements` holds `MeasuredRun`s (one GPU placement and batch, its raw timed steps, and the
exposed communication per step where known) and the collective probes of a calibration. The
scaling model fits on run medians and bootstraps over runs and steps.

Measurement CSV (contract: docs/formats.md, "Measurement CSV"): `#` lines are comments (the source goes there); a header
row, then one row per measurement: `gpus` (required), `nodes` (default ceil(gpus /
gpus_per_node)), `step_seconds` or `throughput` (samples/s, whole job), optional `global_batch`
(samples per step; default: the workload's batch policy) and, an addition of ours, optional
`comm_seconds`: communication per step not hidden behind compute (step minus compute time; the
Pollux traces' `sync_time`), and optional `memory_bound` (1: the source says this row was slowed by
memory pressure, 0 or empty: not; advisor.scaling.evidence.memory_pressed). Rows may differ in batch size.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from advisor.calibration_data import (
    COMM_OVER_STEP,
    MAX_SECONDS,
    MIN_SECONDS,
    THROUGHPUT_TOLERANCE,
    comm_over_step,
)
from advisor.errors import InputError
from advisor.fileio import MAX_CSV_BYTES, read_input_text
from advisor.spec import MAX_BATCH_SAMPLES, MAX_GPUS_LIMIT, nodes_filled
from advisor.text import count, number, plural
from advisor.topology.layouts import split_rule

if TYPE_CHECKING:
    from advisor.calibration_data import Calibration, Collective
    from advisor.spec import Workload

CSV_COLUMNS = ("gpus", "nodes", "step_seconds", "throughput", "global_batch", "comm_seconds", "memory_bound")


@dataclass(frozen=True)
class MeasuredRun:
    """One measured configuration: `gpus` over `nodes`, `global_batch` samples per step."""

    gpus: int
    nodes: int
    global_batch: float
    step_seconds: np.ndarray
    """Raw timed steps (after warm-up); one value for a CSV row."""
    comm_seconds: np.ndarray | None = None
    """Exposed (not overlapped) communication per step, same length as step_seconds, or None."""
    memory_bound: bool = False
    """The source flags this run as slowed by memory pressure (a calibration run's `memory_bound`, a CSV's
    `memory_bound` column): advisor.scaling.evidence.memory_pressed."""

    @property
    def median_step(self) -> float:
        return _median(self.step_seconds)

    @property
    def median_comm(self) -> float:
        return _median(self.comm_seconds) if self.comm_seconds is not None else math.nan


def _median(values: np.ndarray) -> float:
    """np.median, without its ~40 us of overhead for the one value a CSV row holds (1M rows: 40 s)."""
    return float(values[0]) if len(values) == 1 else float(np.median(values))


@dataclass(frozen=True)
class Measurements:
    """Everything measured for one workload, and where it came from (`source`, for messages)."""

    runs: list[MeasuredRun]
    """Measured steps; may be empty when `probes` are not (an imported nccl-tests log alone: the
    links are measured, compute comes from the prior)."""
    probes: list["Collective"] = field(default_factory=list)
    source: str = ""
    #: memory peaks the calibration measured (advisor.topology.memory.measured_peaks; none from a CSV): read
    #: with the runs, so the plan's memory check never opens the files a second time
    peaks: list = field(default_factory=list)
    #: the parallel layout the runs ran, (strategy, tensor-parallel degree, HSDP shard group), from
    #: the calibration's records (`recorded_layout`); None: not recorded (a CSV), the spec's is assumed
    layout: tuple | None = None
    #: caveats of reading them, for the model's warnings (a measured memory peak not applied: measured_peaks)
    notes: list[str] = field(default_factory=list)
    #: the proxy depth advisor calibrate timed the runs with (`proxy_depth`: a calibration with a
    #: `[setup]` record): its proxy of that many layers, fed full-length samples, is what they measured
    #: (`measured_workload`); None: the job itself (a published file, a CSV), at its own depth and padding
    proxy_layers: int | None = None
    #: the runs that trained the full model and recorded no memory peak (advisor.topology.memory.MeasuredFit):
    #: each says its count fit, a bound the plans size memory with (memory.memory_evidence); the fit never reads them
    fits: list = field(default_factory=list)

    def __post_init__(self):
        if not self.runs and not self.probes:
            raise InputError.at(self.source or "<measurements>", "", "no measured runs or collective probes to fit")

    # Computed once per Measurements (runs never change after construction): the fit reads them
    # many times, and with a 1M-row CSV each is a million-element loop.
    @cached_property
    def gpus(self) -> np.ndarray:
        return np.array([r.gpus for r in self.runs], dtype=float)

    @cached_property
    def nodes(self) -> np.ndarray:
        return np.array([r.nodes for r in self.runs], dtype=float)

    @cached_property
    def global_batch(self) -> np.ndarray:
        return np.array([r.global_batch for r in self.runs], dtype=float)

    @cached_property
    def step(self) -> np.ndarray:
        """Median step seconds per run."""
        return np.array([r.median_step for r in self.runs])

    @cached_property
    def comm(self) -> np.ndarray:
        """Median exposed communication seconds per run (NaN where not measured)."""
        return np.array([r.median_comm for r in self.runs])

    @cached_property
    def memory_bound(self) -> np.ndarray:
        """Per run: whether its source flags it as slowed by memory pressure."""
        return np.array([r.memory_bound for r in self.runs], dtype=bool)

    @property
    def n_steps(self) -> int:
        return int(sum(len(r.step_seconds) for r in self.runs))

    def subset(self, keep: np.ndarray) -> "Measurements":
        """The runs where `keep` is true (probes kept)."""
        runs = [r for r, k in zip(self.runs, keep, strict=True) if k]
        return Measurements(runs, self.probes, self.source, self.peaks, self.layout, self.notes, self.proxy_layers,
                            self.fits)


def fitted_layout(workload: "Workload", layout: tuple | None) -> "Workload":
    """The workload measured runs are fitted as: `workload` with the parallel layout they ran
    (`layout`, a calibration's `recorded_layout`: strategy, tensor-parallel degree, HSDP shard group,
    pipeline, context and expert degrees, None where not recorded) in place of the spec's, so that each
    run is fitted with the traffic it had; `workload` itself when nothing was recorded (a CSV) or it is
    the spec's own (a later `strategy = "auto"` would otherwise fit DDP runs with FSDP's traffic)."""
    if layout is None:
        return workload
    strategy, tp, shard, *rest = layout
    p = workload.parallelism
    degrees = {key: value for key, value in zip(("pipeline_parallel_degree", "context_parallel_degree",
                                                   "expert_parallel_degree"), rest, strict=False)
               if value is not None and value != getattr(p, key)}
    same = (strategy == p.strategy and (tp or 1) == (p.tensor_parallel_degree or 1)
            and shard in (None, p.data_parallel_shard_degree))
    if same and not degrees:
        return workload
    from advisor.topology.layouts import with_layout

    w = workload if same else with_layout(workload, strategy, tp, shard if strategy == "hsdp" else None)
    return w.model_copy(update={"parallelism": w.parallelism.model_copy(update=degrees)}) if degrees else w


def measured_workload(w: "Workload", m: "Measurements" | None) -> "Workload":
    """The workload `m`'s runs are fitted as: `fitted_layout` of the layout `m` recorded
    (`Measurements.layout`; None for no measurements), and where advisor calibrate timed them
    (`Measurements.proxy_layers`) the proxy it ran (advisor.calibrate.plan.proxy_workload at the
    recorded depth: a 1-layer proxy of an 80-layer model computes 1/40 of its FLOPs and reduces 1/37
    of its gradient, which the fit had read as the full model's, at 40x its MFU). The fitted factors
    (1/MFU, each link's share of its declared speed, γ) carry over to the declared model; the
    design of the predictions is the spec's."""
    return fitted_as(w, getattr(m, "layout", None), getattr(m, "proxy_layers", None))


def fitted_as(w: "Workload", layout: tuple | None, depth: int | None) -> "Workload":
    """`measured_workload` of runs under the recorded `layout` (None: the spec's) timed on a proxy of
    `depth` layers (None: the declared model)."""
    out = fitted_layout(w, layout)
    if depth is None:
        return out
    from advisor.calibrate.plan import proxy_workload

    recorded = out.model_copy(update={"calibration": out.calibration.model_copy(update={"proxy_layers": depth})})
    return proxy_workload(recorded)


def unsplit(workload: "Workload", layout: tuple | None, gpus, nodes) -> np.ndarray:
    """Per measured placement: True where the layout it is fitted as (`fitted_layout`) cannot split its
    GPU count (advisor.topology.layouts: the degrees multiply to the count, the expert degree divides
    the data-parallel ranks). Such a run was measured under another layout: 4 GPUs under a spec's
    TP 8 were fitted at 913 s for a measured 30 s and bent every coefficient to its bound."""
    from advisor.topology.layouts import candidates

    g, n = np.asarray(gpus, dtype=np.int64), np.asarray(nodes, dtype=np.int64)
    if not g.size:
        return np.zeros(0, dtype=bool)
    pairs, back = np.unique(np.stack([g, n]), axis=1, return_inverse=True)  # a 1M-row CSV holds few placements
    w = fitted_layout(workload, layout)
    valid = np.stack([lay.valid for lay in candidates(w, pairs[0], pairs[1])]).any(axis=0)
    return ~valid[np.ravel(back)]


def unsplit_message(workload: "Workload", layout: tuple | None, gpus: int, nodes: int) -> str:
    """Why a measured placement cannot be fitted (`unsplit`), in one clause with the rule it breaks."""
    whose = "the spec's parallel layout" if layout is None else "the parallel layout the file records"
    return (f"{whose} cannot split {plural(gpus, 'GPU')} over {plural(nodes, 'node')} "
            f"({split_rule(fitted_layout(workload, layout))}): measured under another layout, the run cannot be "
            "fitted as this one")


def over_node(gpus, nodes, per_node: int) -> np.ndarray:
    """Per placement: more GPUs on a node than the spec's cluster.gpus_per_node (the fewest per node, ceil)."""
    return -(-np.asarray(gpus, dtype=np.int64) // np.asarray(nodes, dtype=np.int64)) > per_node


def over_node_message(gpus: int, nodes: int, per_node: int) -> str:
    return f"{plural(gpus, 'GPU')} on {plural(nodes, 'node')} exceed cluster.gpus_per_node ({per_node})"


def unrunnable(workload: "Workload", layout: tuple | None, gpus, nodes) -> np.ndarray:
    """Per measured placement: True where it cannot be fitted as `layout` on this spec's cluster: more
    GPUs on a node than cluster.gpus_per_node (`over_node`) or a count the layout cannot split
    (`unsplit`). The one rule behind both `check_runs_split` (refuse) and `from_calibration`'s
    `left_out` (leave out); `unrunnable_reason` says which clause a run breaks."""
    return over_node(gpus, nodes, workload.cluster.gpus_per_node) | unsplit(workload, layout, gpus, nodes)


def unrunnable_reason(workload: "Workload", layout: tuple | None, gpus: int, nodes: int) -> tuple[str, str]:
    """(field, message) for one placement `unrunnable` flags: the node clause first, as it is checked first."""
    per_node = workload.cluster.gpus_per_node
    if over_node([gpus], [nodes], per_node)[0]:
        return "nodes", over_node_message(gpus, nodes, per_node)
    return "gpus", unsplit_message(workload, layout, gpus, nodes)


def idle_ranks(workload: "Workload", layout: tuple | None, gpus, batch) -> np.ndarray:
    """Per measured run: True where its global batch is below its data-parallel ranks (GPUs / the
    tensor x pipeline x context degrees of the layout it is fitted as): some rank had no sample, so the
    run was not data-parallel training of this recipe (2 samples over 8 DDP ranks were fitted as 0.25
    samples a GPU, and pinned every prediction to 100% MFU). Under strategy auto the degrees are not
    known: nothing is flagged."""
    w = fitted_layout(workload, layout)
    g, b = np.asarray(gpus, dtype=np.int64), np.asarray(batch, dtype=float)
    if w.parallelism.strategy == "auto":
        return np.zeros(g.shape, dtype=bool)
    return b < g // w.model_parallel_size()


def idle_ranks_message(workload: "Workload", layout: tuple | None, gpus: int) -> str:
    ranks = gpus // fitted_layout(workload, layout).model_parallel_size()
    return (f"fewer samples than the {plural(ranks, 'data-parallel rank')} of {plural(gpus, 'GPU')}: every rank "
            "trains on at least one sample a step")


#: How far above the declared peak a measured step may read before it is refused: 50x 100% MFU. Below it a
#: roughly declared spec explains a real run: a precision declared bf16 for fp8 steps doubles the peak, 2:4
#: sparsity again, and FLOPs by 6·P for an embedding-heavy model are far too many (the corpus's own Pollux
#: NeuMF spec, benchmarks/corpus.py, reads its largest-batch steps at 569%); the fit bounds such a step at
#: 100% MFU and says so (advisor.scaling.evidence.bound_warnings). Beyond it the units are wrong, not the
#: spec: a CSV's tokens/s in the samples/s column reads as seq_len x its MFU (8,192x at 8192 tokens),
#: milliseconds written as seconds 1,000x. (400% refused the Pollux trace with the spec it is scored with.)
MFU_CEILING = 50.0


def seconds_at_peak(workload: "Workload", layout: tuple | None, depth: int | None, gpus, batch) -> np.ndarray:
    """Per run: the seconds its model FLOPs per GPU (of the proxy it timed, `fitted_as`) take at the spec's
    peak (advisor.scaling.features.compute_parts); 0 where the peak is unknown."""
    from advisor.scaling.features import compute_parts

    if workload.peak_flops is None:
        return np.zeros(len(np.atleast_1d(gpus)))
    model, _ = compute_parts(fitted_as(workload, layout, depth), np.asarray(gpus, float), np.asarray(batch, float))
    return np.asarray(model, float)


def implied_mfu(workload: "Workload", layout: tuple | None, depth: int | None, gpus, batch, step) -> np.ndarray:
    """Per run: the MFU its step reads as, `seconds_at_peak` over the step; 0 where the peak is unknown, inf
    for a step of 0 s (the compute a step leaves beside communication as long as itself)."""
    return _mfu(seconds_at_peak(workload, layout, depth, gpus, batch), step)


def _mfu(at_peak, seconds) -> np.ndarray:
    """`seconds_at_peak` over the seconds a run took: 0 where the peak is unknown, inf for 0 s."""
    at_peak, seconds = np.asarray(at_peak, float), np.asarray(seconds, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(at_peak > 0, at_peak / seconds, 0.0)


def faster_than_peak_message(workload: "Workload", gpus: int, batch: float, seconds: float, mfu: float,
                             what: str = "a step") -> str:
    said = f"{mfu:,.0%}" if math.isfinite(mfu) else "unbounded"
    return (f"{number(seconds)} s {what} for {count(batch)} samples on {plural(gpus, 'GPU')} reads as {said} MFU "
            f"at {workload.cluster.gpu}'s peak ({workload.peak_flops:.3g} FLOP/s at {workload.model.precision}), "
            f"beyond the {MFU_CEILING:,.0%} a roughly declared spec explains: the step, its batch or "
            "model.params is wrong")


def _timed_compute(run) -> list[tuple[str, float, str]]:
    """(field, seconds, what) of each time a run gives its compute: the step, and the compute-only step or the
    step less its exposed communication (a step is its compute plus the communication it does not hide)."""
    out = [("step_seconds", float(np.median(run.step_seconds)), "a step")]
    if run.compute_seconds:
        out.append(("compute_seconds", float(np.median(run.compute_seconds)), "a compute-only step"))
    elif run.comm_seconds is not None and len(run.comm_seconds) == len(run.step_seconds):
        rest = float(np.median(np.subtract(run.step_seconds, run.comm_seconds)))
        out.append(("comm_seconds", rest, f"of compute beside {number(float(np.median(run.comm_seconds)))} s of "
                    "exposed communication"))
    return out


def _check_compute_bound(cal: "Calibration", workload: "Workload", layout: tuple | None) -> None:
    """Refuse a run whose median step, compute-only step or step less its exposed communication is faster
    than the spec's GPUs compute it (`MFU_CEILING`): step_seconds = [0.1] beside llm7b's 8-GPU 2.84 s (1,000%
    MFU) was fitted at 100% MFU, +984% off, and compute_seconds = [0.01] as 2.83 s of exposed communication."""
    if not cal.runs:
        return
    gpus = [r.gpus for r in cal.runs]
    batch = [r.global_batch if r.global_batch is not None else float(workload.global_batch(r.gpus)) for r in cal.runs]
    at_peak = seconds_at_peak(workload, layout, proxy_depth(cal), gpus, batch)
    for i, run in enumerate(cal.runs):
        for field_name, seconds, what in _timed_compute(run):
            mfu = float(_mfu(at_peak[i], seconds))
            if mfu > MFU_CEILING:
                raise InputError.at(str(cal.path or "<calibration>"), f"runs[{i}].{field_name}",
                                    faster_than_peak_message(workload, gpus[i], batch[i], seconds, mfu, what),
                                    getattr(run, field_name))


def check_runs_split(cal: "Calibration", workload: "Workload") -> tuple | None:
    """Refuse a run of `cal` that cannot be fitted (`unrunnable`: more GPUs per node than the spec's
    nodes hold, as a CSV row is, or a count the layout it ran cannot split): `FILE: runs[i].nodes|gpus:
    ...`. Returns the calibration's `recorded_layout`. (8 GPUs measured on 1 node under a spec of 6 per
    node were fitted as if 8@1 were possible, and 8@2 predicted 28% faster than the measured step: 139%
    efficiency.)"""
    layout = recorded_layout(cal)
    bad = unrunnable(workload, layout, [r.gpus for r in cal.runs], [r.nodes for r in cal.runs])
    if bad.any():
        i = int(bad.argmax())
        run = cal.runs[i]
        field, message = unrunnable_reason(workload, layout, run.gpus, run.nodes)
        raise InputError.at(str(cal.path or "<calibration>"), f"runs[{i}].{field}", message,
                            run.nodes if field == "nodes" else run.gpus)
    given = [(i, r) for i, r in enumerate(cal.runs) if r.global_batch is not None]
    idle = idle_ranks(workload, layout, [r.gpus for _, r in given], [r.global_batch for _, r in given])
    if idle.any():
        i, run = given[int(idle.argmax())]
        raise InputError.at(str(cal.path or "<calibration>"), f"runs[{i}].global_batch",
                            idle_ranks_message(workload, layout, run.gpus), run.global_batch)
    _check_micro_batches(cal, workload, layout)
    _check_compute_bound(cal, workload, layout)
    return layout


def _check_micro_batches(cal: "Calibration", workload: "Workload", layout: tuple | None) -> None:
    """Refuse a run whose `micro_samples` exceeds the samples each data-parallel rank trains a step (its
    global batch, or the spec's at its count, over GPUs / the model-parallel degrees): a micro-batch is a
    slice of a rank's batch. micro_samples = 1,000 beside llm7b's 16 samples over 8 FSDP ranks was read (and
    its measured peak re-estimated at 1,000 samples a micro-batch). Under strategy auto the degrees are not
    known: nothing is checked, as `idle_ranks`."""
    w = fitted_layout(workload, layout)
    if w.parallelism.strategy == "auto":
        return
    for i, run in enumerate(cal.runs):
        batch = run.global_batch if run.global_batch is not None else float(workload.global_batch(run.gpus))
        ranks = max(run.gpus // w.model_parallel_size(), 1)
        if run.micro_samples is not None and run.micro_samples > batch / ranks * (1 + 1e-9):
            raise InputError.at(str(cal.path or "<calibration>"), f"runs[{i}].micro_samples",
                                f"more than the {number(batch / ranks)} samples each of the "
                                f"{plural(ranks, 'data-parallel rank')} trains a step ({count(batch)} over "
                                f"{plural(run.gpus, 'GPU')}): a micro-batch is a slice of a rank's batch",
                                run.micro_samples)


def _check_probes(cal: "Calibration", workload: "Workload") -> None:
    """Each [[collectives]] row's busbw is its bytes / seconds x nccl-tests' factor for its ranks, the check an
    imported nccl-tests row and a `--collect` probe get (advisor.imports.common.check_collective): a
    hand-edited busbw of 0 or 1e-300 beside 0.4 ms for 64 MiB was printed and warned about as measured. And
    no faster than the spec's catalog GPU's nodes reach, the nccl-tests import's bound
    (advisor.imports.common.check_hardware_reaches; not checked on a CPU run or a GPU outside the catalog,
    whose hardware is not known)."""
    from advisor.imports.common import check_collective, check_hardware_reaches

    cpu = cal.ran_on_cpu
    for i, c in enumerate(cal.collectives):
        file, where = str(cal.path or "<calibration>"), f"collectives[{i}].busbw"
        check_collective(c.op, c.gpus, c.bytes, c.seconds, c.busbw, file, where)
        if not cpu:
            check_hardware_reaches(workload, c.op, c.algorithm, c.gpus, c.nodes, c.busbw, file, where, True)


def from_calibration(cal: "Calibration", workload: "Workload",
                     left_out: list[str] | None = None, with_peaks: bool = True) -> Measurements | None:
    """Runs of a calibration file; exposed communication from compute_seconds or comm_seconds. A run
    the layout it ran cannot split is refused (`unsplit`), naming it; with `left_out` (a list, for the
    workload's checked-in calibration, which the user did not name) such runs are left out instead and
    one sentence per file is appended to it: a spec edited to another layout then answers from the runs
    that still apply, or from the prior (None) when none does, instead of refusing every command.
    `with_peaks` false leaves the memory peaks (and their checks) to a caller that reads them per file
    (combine_measurements), so they are not computed twice."""
    _check_probes(cal, workload)
    if left_out is None:
        layout = check_runs_split(cal, workload)
        kept = list(cal.runs)
    else:
        layout = recorded_layout(cal)
        g, n = [r.gpus for r in cal.runs], [r.nodes for r in cal.runs]
        bad = unrunnable(workload, layout, g, n)
        kept = [r for r, b in zip(cal.runs, bad.tolist(), strict=True) if not b]
        if bad.any():
            gone = sorted({f"{r.gpus}@{r.nodes}" for r, b in zip(cal.runs, bad.tolist(), strict=True) if b})
            left_out.append(f"{cal.path or '<calibration>'}: left out {plural(len(gone), 'placement')} measured "
                            f"under a layout this spec's cannot run ({', '.join(gone)}): "
                            f"{split_rule(fitted_layout(workload, layout))}, on at most "
                            f"{plural(workload.cluster.gpus_per_node, 'GPU')} per node")
            if not kept and not cal.collectives:
                return None
    runs = []
    for run in kept:
        steps = np.asarray(run.step_seconds, dtype=float)
        comm = None
        if run.compute_seconds:
            # compute_seconds are separate timed steps without synchronisation (not paired with
            # step_seconds): each step's exposed communication is its excess over their median.
            comm = np.maximum(steps - float(np.median(run.compute_seconds)), 0.0)
        elif run.comm_seconds is not None and len(run.comm_seconds) == len(steps):
            comm = np.asarray(run.comm_seconds, dtype=float)
        batch = run.global_batch if run.global_batch is not None else float(workload.global_batch(run.gpus))
        runs.append(MeasuredRun(run.gpus, run.nodes, float(batch), steps, comm, bool(run.memory_bound)))
    from advisor.topology.memory import measured_fits, measured_peaks

    notes: list[str] = device_notes(cal, workload) if with_peaks else []
    peaks = measured_peaks(cal, workload, notes) if with_peaks else []  # combine_measurements reads each file's
    fits = measured_fits(cal, workload) if with_peaks else []
    return Measurements(runs, list(cal.collectives), str(cal.path or "<calibration>"), peaks, layout, notes,
                        proxy_depth(cal), fits)


def device_notes(cal: "Calibration", workload: "Workload") -> list[str]:
    """A warning when the file says it measured on another device than the spec's catalog GPU (its
    `environment.device`: a catalog GPU of another name, or CPU ranks): a file calibrated on A100s, or with
    `--device cpu`, was fitted as the H100 cluster's steps without a word, as an nccl-tests or torchtitan log of
    another GPU was (advisor.imports.common.other_gpu_warning). Not a refusal: the user may know the two alike."""
    from advisor.catalog import find_gpu

    device = str((cal.environment or {}).get("device", "")).strip()
    spec, cpu = find_gpu(workload.cluster.gpu), cal.ran_on_cpu
    ran = None if cpu or not device else find_gpu(device)
    if spec is None or not (cpu or (ran is not None and ran.name != spec.name)):
        return []  # a spec GPU outside the catalog, no device recorded, one the catalog does not name, the spec's
    said = "CPU ranks" if cpu else f"{device} (the catalog's {ran.name})"
    return [f"{cal.path or '<calibration>'}: environment.device: measured on {said}, not the spec's {spec.name} "
            "(cluster.gpu): its steps are fitted as this cluster's; calibrate on the spec's GPUs"]


def proxy_depth(cal: "Calibration") -> int | None:
    """The proxy depth advisor calibrate timed the file's runs with (`Measurements.proxy_layers`): the
    `[environment]`'s `proxy_layers` (the worker records the proxy it built), else the `[setup]`'s
    `calibration.proxy_layers`, else every layer (`model.layers`, or the MLP proxy's 4); None when the
    file is not advisor calibrate's (a published table, which may carry a `[setup]` of the model shape its
    memory peaks belong to; a file without `[setup]`: an import) or has no runs."""
    setup = cal.setup or {}
    if not cal.runs or not setup or cal.provenance.source != "measured":
        return None
    for value in (cal.environment.get("proxy_layers"), setup.get("calibration.proxy_layers"),
                  setup.get("model.layers")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    from advisor.calibrate.plan import MLP_PROXY_LAYERS

    return MLP_PROXY_LAYERS


_LABEL = re.compile(r"\s*([a-z_]+)\s*=\s*(\d{1,7})\s*")
#: The degrees a layout label names (advisor.topology.layouts.Layout.label writes them; cp and ep only
#: when above 1, pp from the first labels on, so a degree left out is 1).
_LABEL_DEGREES = ("dp_shard", "dp_replicate", "tp", "pp", "cp", "ep")
_STRATEGIES = ("ddp", "fsdp", "hsdp")


def _label_degrees(cal: "Calibration", i: int, label: str) -> dict[str, int] | None:
    """The degrees of run i's layout label, or None for a label that is no layout (free text): a label
    naming a degree advisor does not model, or one twice, is refused by name, since its runs would be
    fitted as another layout."""
    parts = label.split(",")
    matches = [_LABEL.fullmatch(part) for part in parts]
    if not label.strip() or not any(matches):
        return None
    where = str(getattr(cal, "path", None) or "<calibration>")
    degrees: dict[str, int] = {}
    for part, m in zip(parts, matches, strict=True):
        if m is None or m.group(1) not in _LABEL_DEGREES or m.group(1) in degrees:
            raise InputError.at(where, f"runs[{i}].layout", "expected comma-separated degrees "
                                f"{', '.join(d + '=N' for d in _LABEL_DEGREES)} (as advisor calibrate writes "
                                f"them; cp, ep and pp default to 1): {part.strip()!r} is not one of them", label)
        degrees[m.group(1)] = int(m.group(2))
    if "dp_shard" not in degrees or "dp_replicate" not in degrees or "tp" not in degrees:
        raise InputError.at(where, f"runs[{i}].layout", "needs dp_shard, dp_replicate and tp (as advisor "
                            "calibrate writes them)", label)
    if min(degrees.values()) < 1:
        raise InputError.at(where, f"runs[{i}].layout", "every degree is at least 1", label)
    return degrees


def recorded_layout(cal: "Calibration") -> tuple | None:
    """(strategy, tp, HSDP shard group, pp, cp, ep) the calibration's runs ran, from, in order: the runs'
    `layout` labels (advisor calibrate writes "dp_shard=8, dp_replicate=4, tp=1, pp=1", with cp and ep
    when above 1: a shard and a replica group is HSDP, a shard alone FSDP, replicas alone DDP; the
    widest run decides, since HSDP's one-node runs read as FSDP), the `[setup]` strategy and degrees
    advisor calibrate records, or an `[environment]` `strategy` (published files: the framework the
    source used). None when none says; a degree not recorded is None (the spec's is assumed)."""
    found = []
    for i, run in enumerate(cal.runs):
        deg = _label_degrees(cal, i, run.layout or "")
        if deg is not None and run.gpus > 1:
            shard, rep = deg["dp_shard"], deg["dp_replicate"]
            kind = "hsdp" if shard > 1 and rep > 1 else "fsdp" if shard > 1 else "ddp"
            found.append((_STRATEGIES.index(kind), kind, deg["tp"], shard if kind == "hsdp" else None,
                          deg.get("pp", 1), deg.get("cp", 1), deg.get("ep", 1)))
    if found:
        return max(found)[1:]
    setup = cal.setup or {}

    def whole(key: str) -> int | None:
        value = setup.get(f"parallelism.{key}")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    for strategy in (setup.get("parallelism.strategy"), cal.environment.get("strategy")):
        if strategy in _STRATEGIES:
            return (strategy, whole("tensor_parallel_degree"), whole("data_parallel_shard_degree"),
                    whole("pipeline_parallel_degree"), whole("context_parallel_degree"),
                    whole("expert_parallel_degree"))
    return None


#: Bounds of CSV cells: (whole number, zero allowed, upper bound). GPU and node counts share the
#: spec's MAX_GPUS_LIMIT; times the calibration file's MAX_SECONDS; a throughput above 1e12
#: samples/s or a batch above MAX_BATCH_SAMPLES per GPU at MAX_GPUS_LIMIT GPUs is a typo.
_CELL_LIMITS = {
    "gpus": (True, False, float(MAX_GPUS_LIMIT)),
    "nodes": (True, False, float(MAX_GPUS_LIMIT)),
    "step_seconds": (False, False, MAX_SECONDS),
    "throughput": (False, False, 1e12),
    "global_batch": (True, False, float(MAX_BATCH_SAMPLES) * MAX_GPUS_LIMIT),  # whole samples, as in a calibration
    "comm_seconds": (False, True, MAX_SECONDS),
    "memory_bound": (True, True, 1.0),
}
#: The unit a column's bound is said in: "step_seconds: must be <= 1e+06" named none.
_CELL_UNITS = {"step_seconds": " s", "comm_seconds": " s", "throughput": " samples/s", "global_batch": " samples"}



@dataclass(frozen=True)
class CsvTable:
    """A measurement CSV as columns: `values[column]` is a float array (NaN where a cell is
    empty), `lines[i]` the file's line number of row i, `cell(i, column)` the cell's text."""

    file: str
    header: list[str]
    lines: np.ndarray
    values: dict[str, np.ndarray]
    data_lines: list[str]

    def cell(self, row: int, column: str) -> str:
        cells = next(csv.reader([self.data_lines[row]]))
        return cells[self.header.index(column)].strip()

    def fail(self, row: int, column: str | None, message: str, *value: object) -> InputError:
        """`FILE: line N.column: message (got VALUE)`; VALUE defaults to the cell's text."""
        where = f"line {self.lines[row]}" + (f".{column}" if column else "")
        if value:
            return InputError.at(self.file, where, message, value[0])
        if column in self.header:
            return InputError.at(self.file, where, message, self.cell(row, column))
        return InputError.at(self.file, where, message)


def _header(lines: list[tuple[int, str]], file: str) -> list[str]:
    header_no, header_line = lines[0]
    header = [h.strip() for h in next(csv.reader([header_line]))]
    for h in header:
        if h not in CSV_COLUMNS:
            import difflib

            sep = next((c for c in ";\t|" if c in h and all(p.strip() in CSV_COLUMNS for p in h.split(c))), None)
            if sep is not None:  # a spreadsheet's semicolon export read as one column: "did you mean" misled
                raise InputError.at(file, f"line {header_no}", f"the columns are separated by {sep!r}: a measurement "
                                    "CSV is comma-separated (export as 'CSV (comma delimited)')", h)
            close = difflib.get_close_matches(h.lower(), CSV_COLUMNS, n=1)  # GPUS: did you mean gpus
            hint = f"; did you mean '{close[0]}'?" if close else f"; known columns: {', '.join(CSV_COLUMNS)}"
            raise InputError.at(file, f"line {header_no}", f"unknown column{hint}", h)
    repeated = next((h for i, h in enumerate(header) if h in header[:i]), None)
    if repeated is not None:
        raise InputError.at(file, f"line {header_no}", "column named twice; each column once", repeated)
    if "gpus" not in header:
        raise InputError.at(file, f"line {header_no}", "missing required column 'gpus'")
    if "step_seconds" not in header and "throughput" not in header:
        raise InputError.at(file, f"line {header_no}", "needs a 'step_seconds' or a 'throughput' column")
    return header


_EMPTY_CELL = re.compile(r"(^|,)[ \t]*(?=,|$)", re.MULTILINE)


def _parse_fast(data: list[str], width: int) -> np.ndarray | None:
    """numpy's C parser over plain rows (no quotes, no nan/inf words, every row `width` cells);
    None when the rows need the careful path (which also finds the line to blame)."""
    text = "\n".join(data)
    lowered = text.lower()
    if '"' in text or "nan" in lowered or "inf" in lowered:
        return None
    if any(line.count(",") != width - 1 for line in data):
        return None
    text = _EMPTY_CELL.sub(r"\1nan", text) if (",," in text or ",\n" in text or text.endswith(",")
                                              or text.startswith(",") or "\n," in text) else text
    try:
        return np.loadtxt(io.StringIO(text), delimiter=",", dtype=float, ndmin=2, comments=None)
    except ValueError:
        return None


def _parse_careful(data: list[str], linenos: np.ndarray, header: list[str], file: str) -> np.ndarray:
    """Row by row with the csv module: the first malformed row or cell is named."""
    out = np.empty((len(data), len(header)))
    for i, cells in enumerate(csv.reader(data)):
        if len(cells) != len(header):
            raise InputError.at(file, f"line {linenos[i]}", f"expected {len(header)} fields like the header",
                                len(cells))
        for j, cell in enumerate(cells):
            text = cell.strip()
            if not text:
                out[i, j] = math.nan
                continue
            try:  # float() alone would take '١٢', '1_000' and other spellings numpy's parser refuses
                if not text.isascii() or "_" in text:
                    raise ValueError(text)
                value = float(text)
            except ValueError:
                raise InputError.at(file, f"line {linenos[i]}.{header[j]}", "must be a number", text) from None
            if math.isnan(value):  # a written 'nan', not an empty cell
                raise InputError.at(file, f"line {linenos[i]}.{header[j]}", "must be a positive number", text)
            out[i, j] = value
    return out


def read_csv_table(path: str | Path) -> CsvTable:
    """A measurement CSV parsed and checked cell by cell, vectorised (a 1M-row file reads in about
    a second: benchmarks/csv_speed.py). Bad input: InputError `FILE: line N.column: message`."""
    path = Path(path)
    file = str(path)
    text = read_input_text(path, "a measurement CSV", MAX_CSV_BYTES)
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines())
             if line.strip() and not line.lstrip().startswith("#")]
    del text
    if not lines:
        raise InputError.at(file, "", "no header row (expected columns: gpus, step_seconds or throughput, ...)")
    header = _header(lines, file)
    if len(lines) == 1:
        raise InputError.at(file, "", "no data rows after the header")
    linenos = np.fromiter((n for n, _ in lines[1:]), dtype=np.int64, count=len(lines) - 1)
    data = [line for _, line in lines[1:]]
    del lines
    matrix = _parse_fast(data, len(header))
    if matrix is None:
        matrix = _parse_careful(data, linenos, header, file)
    table = CsvTable(file, header, linenos, {h: matrix[:, j] for j, h in enumerate(header)}, data)
    _check_cells(table)
    _check_copies(table, matrix)
    return table


def _first(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


def _check_cells(t: CsvTable) -> None:
    """Every cell finite, positive (comm_seconds: >= 0), whole where a count, within its bound."""
    for column, values in t.values.items():
        integer, zero_ok, limit = _CELL_LIMITS[column]
        present = ~np.isnan(values)
        if column == "gpus" and (row := _first(~present)) is not None:
            raise t.fail(row, None, "needs a gpus value")
        with np.errstate(invalid="ignore"):
            bad = present & (~np.isfinite(values) | (values < 0) | ((values == 0) & (not zero_ok)))
        if (row := _first(bad)) is not None:
            raise t.fail(row, column, "must be >= 0" if zero_ok else "must be a positive number")
        if integer and (row := _first(present & (values != np.floor(values)))) is not None:
            raise t.fail(row, column, "must be a whole number")
        if (row := _first(present & (values > limit))) is not None:
            raise t.fail(row, column, f"must be <= {limit:.4g}{_CELL_UNITS.get(column, '')} (a physical upper bound)")
        if column == "step_seconds" and (row := _first(present & (values < MIN_SECONDS))) is not None:
            raise t.fail(row, column, f"must be >= {MIN_SECONDS:g} s (no step is shorter)")


def _check_copies(t: CsvTable, matrix: np.ndarray) -> None:
    """A row equal to an earlier one in every cell is a copy-paste slip that would double-count
    (rows of one placement with different values are repeated measurements: Pollux traces hold many).
    Rows are hashed to one uint64 each and sorted (np.unique over whole rows sorts ~10x slower);
    rows of equal hash are compared cell by cell, so a hash collision never refuses a file."""
    keyed = np.ascontiguousarray(np.where(np.isnan(matrix), -1.0, matrix))  # cells are >= 0: -1 marks empty
    bits = keyed.view(np.uint64)
    h = np.zeros(len(keyed), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(bits.shape[1]):
            h = (h ^ bits[:, j]) * np.uint64(0x100000001B3)  # FNV-1a over each cell's 64 bits
    order = np.argsort(h, kind="stable")
    same = np.flatnonzero(h[order[1:]] == h[order[:-1]])
    if not same.size:
        return
    earlier, later = order[same], order[same + 1]
    equal = (keyed[earlier] == keyed[later]).all(axis=1)
    if equal.any():
        k = int(np.argmin(np.where(equal, later, len(keyed))))
        raise t.fail(int(later[k]), None, f"repeats line {t.lines[earlier[k]]} exactly; remove the copy "
                     "(rows of one placement with different values count as repeated measurements)")


def measured_columns(t: CsvTable, workload: "Workload") -> dict[str, np.ndarray]:
    """Per row: gpus, nodes (default: filled nodes), global batch (default: the batch policy's),
    step seconds (from throughput where not given) and exposed comm seconds (NaN where unknown);
    placements that cannot exist and a throughput contradicting step_seconds are refused."""
    v = t.values
    gpus = v["gpus"].astype(np.int64)
    per_node = workload.cluster.gpus_per_node
    nodes = v["nodes"] if "nodes" in v else np.full(len(gpus), np.nan)
    nodes = np.where(np.isnan(nodes), nodes_filled(gpus, per_node), nodes).astype(np.int64)
    if (row := _first(nodes > gpus)) is not None:
        raise t.fail(row, "nodes", f"more nodes than GPUs ({gpus[row]})", int(nodes[row]))
    if (row := _first(over_node(gpus, nodes, per_node))) is not None:
        raise t.fail(row, "nodes", over_node_message(int(gpus[row]), int(nodes[row]), per_node), int(nodes[row]))
    batch = v["global_batch"] if "global_batch" in v else np.full(len(gpus), np.nan)
    if (row := _first(~np.isnan(batch) & idle_ranks(workload, None, gpus, np.nan_to_num(batch, nan=np.inf)))) \
            is not None:
        raise t.fail(row, "global_batch", idle_ranks_message(workload, None, int(gpus[row])))
    batch = np.where(np.isnan(batch), np.asarray(workload.global_batch(gpus), dtype=float), batch)
    step = v["step_seconds"] if "step_seconds" in v else np.full(len(gpus), np.nan)
    thr = v["throughput"] if "throughput" in v else np.full(len(gpus), np.nan)
    if (row := _first(np.isnan(step) & np.isnan(thr))) is not None:
        raise t.fail(row, None, "needs step_seconds or throughput")
    both = ~np.isnan(step) & ~np.isnan(thr)
    with np.errstate(invalid="ignore", divide="ignore"):
        off = both & (np.abs(thr * step / batch - 1) > THROUGHPUT_TOLERANCE)
    if (row := _first(off)) is not None:
        raise t.fail(row, "throughput", f"contradicts step_seconds: {batch[row]:g} samples / {step[row]:g} s = "
                     f"{batch[row] / step[row]:.4g} samples/s (more than {THROUGHPUT_TOLERANCE:.0%} apart)")
    derived = np.isnan(step)
    step = np.where(derived, batch / thr, step)
    # a step from a throughput keeps step_seconds' own bounds: 1e-300 samples/s was fitted as a 1.6e301 s step
    if (row := _first(derived & ((step < MIN_SECONDS) | (step > MAX_SECONDS)))) is not None:
        raise t.fail(row, "throughput", f"gives a step of {batch[row]:g} samples / {thr[row]:g} samples/s = "
                     f"{step[row]:.4g} s, outside step_seconds' {MIN_SECONDS:g} to {MAX_SECONDS:g} s")
    comm = v["comm_seconds"] if "comm_seconds" in v else np.full(len(gpus), np.nan)
    if (row := _first(np.asarray(comm_over_step(step, comm), dtype=bool))) is not None:
        raise t.fail(row, "comm_seconds", COMM_OVER_STEP.format(step=step[row]))
    bound = np.nan_to_num(v["memory_bound"]) > 0 if "memory_bound" in v else np.zeros(len(gpus), bool)
    return {"gpus": gpus, "nodes": nodes, "global_batch": batch, "step_seconds": step, "comm_seconds": comm,
            "memory_bound": bound}


def _check_csv_compute_bound(table: CsvTable, workload: "Workload", cols: dict[str, np.ndarray]) -> None:
    """A row's step, and its step less its exposed communication, no faster than the spec's GPUs compute it, as
    a calibration run's (`_check_compute_bound`): `8,46000` under a samples/s throughput (tokens/s) was fitted."""
    step, comm = cols["step_seconds"], cols["comm_seconds"]
    at_peak = seconds_at_peak(workload, None, None, cols["gpus"], cols["global_batch"])
    given = table.values.get("step_seconds")
    for seconds, named in ((step, None), (step - np.nan_to_num(comm), "comm_seconds")):
        mfu = _mfu(at_peak, seconds)
        if (row := _first(mfu > MFU_CEILING)) is None:
            continue
        column = named or ("step_seconds" if given is not None and not np.isnan(given[row]) else "throughput")
        what = "a step" if named is None else f"of compute beside {number(float(comm[row]))} s of exposed communication"
        raise table.fail(row, column, faster_than_peak_message(workload, int(cols["gpus"][row]),
                                                               float(cols["global_batch"][row]), float(seconds[row]),
                                                               float(mfu[row]), what))


def read_measurements_csv(path: str | Path, workload: "Workload") -> Measurements:
    """Parse a measurement CSV into runs (one per row). Bad input: InputError `FILE: line N.column: message`."""
    table = read_csv_table(path)
    cols = measured_columns(table, workload)
    step, comm = cols["step_seconds"], cols["comm_seconds"]
    if (row := _first(unsplit(workload, None, cols["gpus"], cols["nodes"]))) is not None:
        g, n = int(cols["gpus"][row]), int(cols["nodes"][row])
        raise table.fail(row, "gpus", unsplit_message(workload, None, g, n), g)
    _check_csv_compute_bound(table, workload, cols)
    has_comm = (~np.isnan(comm)).tolist()
    bound = cols["memory_bound"].tolist()
    runs = [  # one-element views of the column arrays: no copy per row
        MeasuredRun(g, n, b, step[i:i + 1], comm[i:i + 1] if has_comm[i] else None, bound[i])
        for i, (g, n, b) in enumerate(zip(cols["gpus"].tolist(), cols["nodes"].tolist(), cols["global_batch"].tolist(),
                                          strict=True))
    ]
    return Measurements(runs, [], table.file, fits=csv_fits(cols["gpus"], cols["global_batch"], table.file))


def csv_fits(gpus: np.ndarray, batch: np.ndarray, file: str) -> list:
    """Each distinct (GPUs, global batch) a CSV's rows ran, as a run that fit in memory (a CSV records no
    peak; its rows are the spec's model and layout: advisor.topology.memory.MeasuredFit)."""
    from advisor.topology.memory import MeasuredFit

    pairs = np.unique(np.column_stack([gpus, batch]), axis=0) if len(gpus) else np.zeros((0, 2))
    return [MeasuredFit(int(g), float(b), None, file) for g, b in pairs.tolist()]


def combine_measurements(workload: "Workload", cal: "Calibration" | None = None,
                         csv_measurements: Measurements | None = None,
                         files: "list[Calibration] | None" = None) -> Measurements:
    """One set of measurements from a (merged) calibration file and a measurement CSV: the file's
    runs and collective probes plus the CSV's runs. A calibration that holds only probes (an
    imported nccl-tests log) adds them to the CSV's step times; the CSV cannot carry probes."""
    from advisor.topology.memory import measured_fits, measured_peaks

    runs: list[MeasuredRun] = []
    probes: list = []
    sources: list[str] = []
    peaks: list = []
    fits: list = []
    notes: list[str] = []
    layout, depth = None, None
    if cal is not None:
        if cal.runs:
            runs += from_calibration(cal, workload, with_peaks=False).runs
        probes += list(cal.collectives)
        sources.append(str(cal.path or "<calibration>"))
        # the memory peaks of each file `cal` merges (`files`), judged by its own [environment] and
        # [setup]: merged, a proxy's peaks read under the first file's full-model record
        notes += [note for c in (files or [cal]) for note in device_notes(c, workload)]
        peaks = [p for c in (files or [cal]) for p in measured_peaks(c, workload, notes)]
        fits = [f for c in (files or [cal]) for f in measured_fits(c, workload)]
        layout = recorded_layout(cal)
        depth = proxy_depth(cal)
    if csv_measurements is not None:
        if runs and csv_measurements.runs:
            _check_one_model(workload, cal, csv_measurements, depth)
        runs += csv_measurements.runs
        probes += csv_measurements.probes
        fits += csv_measurements.fits
        sources.append(csv_measurements.source)
    return Measurements(runs, probes, " + ".join(sources), peaks, layout, notes, depth, fits)


def _check_one_model(workload: "Workload", cal: "Calibration", csv: Measurements, depth: int | None) -> None:
    """Refuse a CSV's step times beside a calibration's runs that timed another model: one set of
    measurements is fitted as one workload (`measured_workload`); a CSV's rows are the spec's model,
    while runs advisor calibrate timed on a proxy of fewer layers, or at full length where the spec
    declares model.mean_seq_len, are fitted as that proxy, so the CSV's full-model steps were read as a
    1-layer proxy's, at ~80x its FLOPs per step. (A layout the file records applies to the CSV's rows
    too: the CSV does not say its own.)"""
    timed = fitted_as(workload, None, depth).model
    if timed == workload.model:
        return
    proxy = (f"advisor calibrate's {timed.layers}-layer proxy of the model" if timed.layers != workload.model.layers
             else "the model at full length (seq_len), not at model.mean_seq_len")
    raise InputError.at(csv.source, "", f"its step times cannot be fitted beside the runs of "
                        f"{cal.path or 'the calibration'}, which timed {proxy}: one fit reads one "
                        "model; pass the calibration or the CSV, not both")


def combine_sources(workload: "Workload", calibration=None, measurements=None) -> Measurements:
    """What --calibration (a file, a Calibration, or a list of either: merged) and --measurements
    (a CSV path or Measurements) name, as one set of measurements (combine_measurements). A file
    named twice, under any name, is read once (advisor.fileio.distinct_files): `--calibration A
    --calibration A` doubled every run, and the bootstrap read the copies as repeated measurements
    agreeing to every digit, narrowing the intervals."""
    from advisor.calibration_data import Calibration, load_calibration, merge_calibrations
    from advisor.fileio import distinct_files

    items = calibration if isinstance(calibration, (list, tuple)) else [] if calibration is None else [calibration]
    files, _notes = distinct_files([c for c in items if not isinstance(c, Calibration)])
    kept = {id(f) for f in files}
    cals = [c if isinstance(c, Calibration) else load_calibration(c, workload.name)
            for c in items if isinstance(c, Calibration) or id(c) in kept]
    for cal in cals:  # each file on its own, so that a refused run is named in the file that holds it
        check_runs_split(cal, workload)
    csv = measurements if measurements is None or isinstance(measurements, Measurements) else \
        read_measurements_csv(measurements, workload)
    return combine_measurements(workload, merge_calibrations(cals) if cals else None, csv, cals)
