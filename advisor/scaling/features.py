"""Physical features of one optimizer step, from the workload and the declared topology.

Every feature is in seconds at the declared speed (or a count), so each fitted coefficient is a
dimensionless factor on a physical quantity (1.0 = as fast as declared) and its bounds mean
something. Functions take numpy arrays of GPU counts `gpus`, node counts `nodes` and samples per
step `global_batch` (rows may differ) and are vectorised over them.

Formulas (docs/model.md):
- compute: W = training FLOPs per sample x samples per GPU per step (6·P·T + attention, PaLM
  App. B), as seconds at the GPU's peak. Gradient accumulation: W covers every micro-batch, and
  communication happens once per step.
- communication: each link's seconds at the declared speeds, from the layout's own traffic
  (advisor.topology.layouts, `link_seconds_at_declared`) and the collectives' bus-bandwidth and
  hop rules (advisor.topology.collectives); `link_parts` splits them into what compute can hide and
  what adds to the step (`Traffic.exposed_share`).
- contention: GPUs on one host share its CPU, PCIe, memory bandwidth and power; a term in (GPUs per
  node - 1), per micro-batch (times the compute) and per step (the Pollux traces: yolov3 compute
  0.41 s alone, 0.53 s with 4 GPUs per node).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from advisor.topology.collectives import LinkLoad, LinkSeconds, busbw_factor
from advisor.topology.layouts import build_at

if TYPE_CHECKING:
    from advisor.spec import Workload

#: FLOP/s used to express compute in seconds when the GPU's peak is unknown (1 TFLOP/s): the
#: coefficient is then seconds per TFLOP instead of 1/MFU.
NOMINAL_FLOPS = 1e12


def flops_per_gpu(workload: "Workload", gpus: np.ndarray, global_batch: np.ndarray) -> np.ndarray:
    """Training FLOPs one GPU does per optimizer step."""
    return workload.model.training_flops_per_sample * np.asarray(global_batch, float) / np.asarray(gpus, float)


def recompute_flops_per_sample(workload: "Workload") -> float:
    """FLOPs that activation recomputation repeats per sample (Korthikanti et al. 2022, §5): full
    recomputes every layer's forward in the backward, a third of the forward + backward FLOPs (the
    forward is 2 of the 6 FLOPs per parameter per token, PaLM App. B); selective recomputes only the
    attention core (Q·K^T, softmax, dropout, softmax·V), the forward third of the attention FLOPs,
    4·L·H·T per token; none (and a model without a transformer shape under selective) repeats nothing."""
    mode, m = workload.parallelism.activation_checkpoint, workload.model
    if mode == "full":
        return m.training_flops_per_sample / 3
    if mode == "selective" and m.is_transformer:
        return m.attention_flops_per_token / 3 * m.computed_seq_len
    return 0.0


def _seconds_per_flop(workload: "Workload", flops_per_sample: float, attention_per_sample: float) -> float:
    """Seconds per sample of `flops_per_sample` FLOPs at peak, the attention part at the 16-bit peak
    under fp8: FP8 recipes cast the linear layers' matmuls (Transformer Engine's fp8_autocast, torchao
    Float8Linear) and keep dot-product attention in bf16 (Transformer Engine: NVTE_FP8_DPA off by
    default; torchtitan docs/float8.md converts nn.Linear only)."""
    from advisor.catalog import find_gpu

    peak = workload.peak_flops or NOMINAL_FLOPS
    gpu = find_gpu(workload.cluster.gpu)
    if workload.model.precision != "fp8" or workload.cluster.peak_flops is not None or gpu is None:
        return flops_per_sample / peak
    return (flops_per_sample - attention_per_sample) / peak + attention_per_sample / gpu.peak_flops("bf16")


def compute_parts(workload: "Workload", gpus: np.ndarray, global_batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(model, recompute) per-GPU compute seconds per step at peak FLOP/s (NOMINAL_FLOPS when the peak
    is unknown): the training FLOPs, and what activation recomputation repeats."""
    m = workload.model
    per_gpu = np.asarray(global_batch, float) / np.asarray(gpus, float)
    shaped = m.is_transformer and m.flops_per_sample is None
    attention = m.attention_flops_per_token * m.computed_seq_len if shaped else 0.0
    model = _seconds_per_flop(workload, m.training_flops_per_sample, attention)
    redo = recompute_flops_per_sample(workload)
    redo_attention = attention / 3 if redo else 0.0
    return per_gpu * model, per_gpu * _seconds_per_flop(workload, redo, min(redo_attention, redo))


def compute_seconds(workload: "Workload", gpus: np.ndarray, global_batch: np.ndarray) -> np.ndarray:
    """Per-GPU compute per step at peak FLOP/s, recomputation included (at NOMINAL_FLOPS when the peak
    is unknown): what the GPU executes, while MFU counts only the model's FLOPs (PaLM App. B)."""
    model, redo = compute_parts(workload, gpus, global_batch)
    return model + redo


def gpus_per_node_used(gpus: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """GPUs on the fullest node: ceil(gpus / nodes)."""
    return np.ceil(np.asarray(gpus, float) / np.asarray(nodes, float))


def link_seconds_at_declared(workload: "Workload", gpus: np.ndarray, nodes: np.ndarray, inter_hops: str = "tree",
                             part: str | None = None):
    """Per-link seconds per step of the workload's parallel layout at the declared speeds
    (advisor.topology.collectives.LinkSeconds: intra/inter bandwidth and latency). The one place where the
    strategy's traffic meets the topology: one step may use both links (HSDP, TP across nodes). `part`:
    "hidden" (what compute can hide) or "exposed" (what adds to the step; `Layout.link_seconds`), None all."""
    return _layout(workload, gpus, nodes).link_seconds(workload, inter_hops=inter_hops, part=part)


def _layout(workload: "Workload", gpus, nodes=None):
    """The workload's layout at (real-valued) GPU and node counts, rounded to whole ones."""
    return build_at(workload, gpus, nodes)


def link_parts(workload: "Workload", gpus: np.ndarray, nodes: np.ndarray, inter_hops: str = "tree"):
    """(hidden, exposed) per-link seconds per step at the declared speeds: the traffic compute can hide
    and the traffic that adds to the step (`Traffic.exposed_share`), of one layout and its traffic built once."""
    lay = _layout(workload, gpus, nodes)
    traffic = lay.traffic(workload)
    return tuple(lay.link_seconds(workload, traffic, inter_hops, part) for part in ("hidden", "exposed"))


def pipeline_factor(workload: "Workload", gpus: np.ndarray) -> np.ndarray:
    """Compute time per step over ideal under pipelining: 1 / (1 - bubble), bubble = (p-1)/(v·m + p - 1)
    (Megatron-LM SC21 §2.2; advisor.topology.layouts). 1 without pipeline parallelism."""
    if workload.parallelism.pipeline_parallel_degree == 1:
        return np.ones_like(np.asarray(gpus, float))
    return 1.0 / (1.0 - _layout(workload, gpus).bubble_fraction(workload))


def probe_link_seconds(workload: "Workload", op: str, gpus: np.ndarray, nodes: np.ndarray, nbytes: np.ndarray,
                       inter_hops: str = "tree") -> LinkSeconds:
    """Per-link seconds of one collective probe of `nbytes` over a group of `gpus` ranks spanning `nodes`
    nodes (as advisor calibrate records it), at the declared speeds: THE crossing rule of
    advisor.topology.collectives, the step model's, for a group of consecutive ranks (stride 1, filling
    its nodes evenly). A group with one rank per node (HSDP's replica group) uses no intra-node link."""
    k = np.asarray(gpus, float)
    bus = busbw_factor(op, k) * np.asarray(nbytes, float)
    return LinkLoad.of(op, k, np.ones_like(k), k, nodes, bus, np.ones_like(k), inter_hops).seconds(workload)


#: Name of the design column that carries memory pressure (MemoryPressure, `with_pressure`).
PRESSURE_COLUMN = "memory_pressure"


@dataclass(frozen=True, eq=False)
class MemoryPressure:
    """Which placements run near memory capacity (advisor.scaling.evidence.memory_pressed decides the
    measured rows): a measured row by its own flag, any other placement by the memory it needs there.

    That memory is THE estimate the plan's memory check uses (`Layout.memory_bytes`: the spec's footprint,
    advisor.topology.memory, moved to the nearest measured peak in log N), with a row its source flags as
    memory-bound read as a peak at `capacity` (it ran, so it fitted, with nothing to spare). A placement
    is pressed where that estimate is above `near` x `capacity`: FSDP/ZeRO shard the model state over
    the ranks, so counts above a pressed one free memory (16 bytes per parameter over N), while DDP's
    state stays whole at every count and its pressure carries. Measured placements keep their flags in
    the layout they ran (another layout, `ScalingModel.for_workload`, is judged by its own memory)."""

    placements: np.ndarray  # (rows, 3): gpus, nodes, global batch of the grouped measured rows
    flags: np.ndarray  # per row: pressed
    peaks: tuple  # advisor.topology.memory.MeasuredPeak: measured, and the flagged rows' at capacity
    measured: "Workload"  # the layout the rows ran (measurements.measured_workload)
    capacity: float
    near: float
    #: how sure the flags are that memory slowed the rows, 0..1: the pressure prior's share of its full
    #: spread (advisor.scaling.evidence.pressure_severity)
    severity: float = 1.0

    def at(self, workload: "Workload", gpus, nodes, batch) -> np.ndarray:
        """1.0 where a placement is pressed, else 0.0. A placement whose nearest measured count (in log
        N, as for the peaks) ran with memory to spare and recorded no peak is not pressed: that run is
        the nearest evidence of how much memory the job needs there."""
        gpus, nodes, batch = (np.atleast_1d(np.asarray(a, float)) for a in (gpus, nodes, batch))
        used = _layout(workload, gpus, nodes).memory_bytes(workload, self.peaks, self.measured)
        out = np.asarray(used > self.near * self.capacity, float)
        with_peak = {p.gpus for p in self.peaks}
        spare = np.unique([g for g, f in zip(self.placements[:, 0], self.flags, strict=True)
                           if not f and int(g) not in with_peak]) if self.placements.size else np.zeros(0)
        if spare.size and out.any():
            known = np.concatenate([spare, np.array(sorted(with_peak), float)])
            nearest = np.abs(np.log(gpus)[:, None] - np.log(known)[None, :]).argmin(axis=1)
            out = np.where(nearest < spare.size, 0.0, out)
        if self.placements.size and workload.parallelism == self.measured.parallelism:  # flags of the layout run
            query = np.column_stack([gpus, nodes, batch])
            same = (query[:, None, :] == self.placements[None, :, :]).all(axis=2)
            hit = same.any(axis=1)
            out = np.where(hit, self.flags[same.argmax(axis=1)].astype(float), out)
        return out


def pressure_prior_sd(design, column: int, priors, severity: float) -> float:
    """Prior spread of the memory-pressure coefficient (x peak-time): the spread the other columns'
    priors (`priors`: advisor.scaling.fitting.constraints' entries, (column, "lin"|"log", mean, sd); a
    log prior's by the delta method, e^mean x sd) put on the step of the smallest pressed row of
    `design`, over that row's compute at peak (tied columns count with their source; overlap is
    ignored, so communication counts whole). Pressure and the rest of that step are then equally
    uncertain: where only pressed rows were measured the fit splits their time beyond the priors about
    evenly between pressure and the terms that carry to other counts (compute, contention, a link
    factor), and neither the pressed rate nor the prior alone sets them where memory is freed. No source
    measures what allocator retries cost (0 for torchtitan's Llama 3.1 8B at 92% of its 96 GB, whose
    8-GPU row is the faster per GPU of the published two; issue 21's series ~20%), so the prior claims
    no more than the others already do. Scaled by `severity` (a peak just over the threshold is barely
    evidence of a slowdown). Without a pressed row here (a staged fit's one-node stage, when only rows
    across nodes were pressed): the compute prior's spread."""
    X = np.array(design.X, float)
    for col, src in design.tied:  # a tied column's seconds move with its source's coefficient
        X[:, src] += X[:, col]
    rows = np.flatnonzero(X[:, column] > 0)
    spread = {int(q[0]): (np.exp(q[2]) if q[1] == "log" else 1.0) * q[3] for q in priors if q[0] != "gamma"}
    if not rows.size:
        compute = [c for c, col in enumerate(design.columns) if col.name == "compute"]
        return float(severity * spread.get(compute[0], 1.0)) if compute else float(severity)
    i = rows[0]
    var = sum((X[i, c] * sd) ** 2 for c, sd in spread.items() if c != column)
    return float(severity * np.sqrt(var) / X[i, column])


#: Unit and meaning of the memory-pressure column (advisor.scaling.families appends it, `pressure_column`).
PRESSURE_UNIT = "x peak-time where memory is near capacity"
PRESSURE_MEANING = "extra time of a pressed placement (allocator retries): compute x [pressed]"


def pressure_column(workload: "Workload", gpus, nodes, batch, pressure: MemoryPressure) -> np.ndarray:
    """The memory-pressure column: compute at peak (W) where a placement is pressed, else 0. It belongs
    to the exposed block (Te): a cache flush and cudaMalloc retry synchronises the device
    (torch.cuda.memory_stats, `num_alloc_retries`), idle time that hides no communication, as the
    pipeline bubble's is. Its coefficient is the pressed rows' extra time as a share of compute
    (advisor.scaling.fitting.constraints: >= 0, with the compute prior's own spread)."""
    return compute_seconds(workload, gpus, batch) * pressure.at(workload, gpus, nodes, batch)
