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
  hop rules (advisor.topology.collectives).
- contention: GPUs on one host share its CPU, PCIe, memory bandwidth and power; a term in (GPUs per
  node - 1), per micro-batch (times the compute) and per step (the Pollux traces: yolov3 compute
  0.41 s alone, 0.53 s with 4 GPUs per node).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from advisor.topology.collectives import bus_bandwidth, busbw_factor, hop_latency_seconds

if TYPE_CHECKING:
    from advisor.spec import Workload

#: FLOP/s used to express compute in seconds when the GPU's peak is unknown (1 TFLOP/s): the
#: coefficient is then seconds per TFLOP instead of 1/MFU.
NOMINAL_FLOPS = 1e12

#: Bus-bandwidth volume factor per GPU, in units of the full gradient G, times (N-1)/N.
VOLUME_FACTOR = {"ddp": 2.0, "fsdp": 3.0}


def flops_per_gpu(workload: "Workload", gpus: np.ndarray, global_batch: np.ndarray) -> np.ndarray:
    """Training FLOPs one GPU does per optimizer step."""
    return workload.model.training_flops_per_sample * np.asarray(global_batch, float) / np.asarray(gpus, float)


def compute_seconds(workload: "Workload", gpus: np.ndarray, global_batch: np.ndarray) -> np.ndarray:
    """Per-GPU compute per step at peak FLOP/s (at NOMINAL_FLOPS when the peak is unknown)."""
    peak = workload.peak_flops or NOMINAL_FLOPS
    return flops_per_gpu(workload, gpus, global_batch) / peak


def gpus_per_node_used(gpus: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """GPUs on the fullest node: ceil(gpus / nodes)."""
    return np.ceil(np.asarray(gpus, float) / np.asarray(nodes, float))


def volume_bytes(workload: "Workload", gpus: np.ndarray) -> np.ndarray:
    """Bytes each GPU moves per step over the bottleneck link (bus-bandwidth convention)."""
    n = np.asarray(gpus, float)
    factor = VOLUME_FACTOR[workload.parallelism.strategy]
    return factor * (n - 1) / n * workload.model.gradient_bytes


def link_seconds_at_declared(workload: "Workload", gpus: np.ndarray, nodes: np.ndarray, inter_hops: str = "tree"):
    """Per-link seconds per step of the workload's parallel layout at the declared speeds
    (advisor.topology.layouts.LinkSeconds: intra/inter bandwidth and latency). The one place where the
    strategy's traffic meets the topology: one step may use both links (HSDP, TP across nodes)."""
    from advisor.topology.layouts import build

    g = np.asarray(gpus, float)
    lay = build(workload, np.maximum(np.rint(g), 1).astype(np.int64),
                np.maximum(np.rint(np.asarray(nodes, float)), 1).astype(np.int64))
    return lay.link_seconds(workload, inter_hops=inter_hops)


def pipeline_factor(workload: "Workload", gpus: np.ndarray) -> np.ndarray:
    """Compute time per step over ideal under pipelining: 1 / (1 - bubble), bubble = (p-1)/(v·m + p - 1)
    (Megatron-LM SC21 §2.2; advisor.topology.layouts). 1 without pipeline parallelism."""
    if workload.parallelism.pipeline_parallel_degree == 1:
        return np.ones_like(np.asarray(gpus, float))
    from advisor.topology.layouts import build

    lay = build(workload, np.maximum(np.rint(np.asarray(gpus, float)), 1).astype(np.int64))
    return 1.0 / (1.0 - lay.bubble_fraction(workload))


def comm_seconds_at_declared(workload: "Workload", gpus: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Seconds per step to move the layout's bytes over both links at their declared bus bandwidths."""
    links = link_seconds_at_declared(workload, gpus, nodes)
    return links.intra_bandwidth + links.inter_bandwidth


def collective_seconds_at_declared(workload: "Workload", op: str, gpus: np.ndarray, nodes: np.ndarray,
                                   nbytes: np.ndarray, inter_hops: str = "tree") -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth seconds, latency seconds) of one collective probe of `nbytes`, at declared speeds."""
    volume = busbw_factor(op, np.asarray(gpus, float)) * np.asarray(nbytes, float)
    lat = hop_latency_seconds(workload, gpus, nodes, inter_hops)
    if op != "all_reduce":
        lat = lat / 2  # one pass (reduce-scatter or all-gather) is half an all-reduce's hops
    return volume / bus_bandwidth(workload, nodes), lat
