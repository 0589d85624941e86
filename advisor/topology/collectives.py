"""How a collective moves bytes over the declared links: the language of NVIDIA/nccl-tests and NCCL.

- bus bandwidth (nccl-tests doc/PERFORMANCE.md): algbw = bytes / time (GB = 1e9 bytes); busbw =
  algbw · 2(n-1)/n for all-reduce, · (n-1)/n for reduce-scatter and all-gather (`busbw_factor`).
- bottleneck bus bandwidth: in one node the per-GPU intra-node link; across nodes NCCL runs one ring
  per NIC, so bus bandwidth approaches the node's total NIC bandwidth, capped by the intra-node link
  (`bus_bandwidth`).
- latency hops: ring 2(N-1) steps inside a node; across nodes NCCL's double binary tree
  (NCCL >= 2.4, `src/graph/tuning.cc`) ~2·log2(N), or the ring's 2(N-1) (`hop_latency_seconds`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from advisor.spec import Workload


def busbw_factor(op: str, gpus):
    """nccl-tests' busbw / algbw: 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter and all-gather
    (NVIDIA/nccl-tests doc/PERFORMANCE.md)."""
    return (2.0 if op == "all_reduce" else 1.0) * (gpus - 1) / gpus


def bus_bandwidth_gbps(op: str, gpus: int, nbytes: float, seconds: float) -> float:
    """nccl-tests bus bandwidth in GB/s (1e9 bytes/s): algbw = bytes / time, times busbw_factor."""
    return nbytes / seconds * busbw_factor(op, gpus) / 1e9


def bus_bandwidth(workload: "Workload", nodes: np.ndarray) -> np.ndarray:
    """Declared bottleneck bus bandwidth in bytes/s: intra-node link in one node, else min(node NICs, intra)."""
    intra = workload.intra_node_bandwidth
    inter = min(workload.cluster.inter_node_bandwidth, intra)
    return np.where(np.asarray(nodes) > 1, inter, intra)


def hop_latency_seconds(workload: "Workload", gpus: np.ndarray, nodes: np.ndarray,
                        inter_hops: str = "tree") -> np.ndarray:
    """Latency per step at declared per-hop latency: ring 2(N-1) hops in a node; across nodes tree 2·log2 N
    (or ring)."""
    n = np.asarray(gpus, float)
    multi = np.asarray(nodes) > 1
    ring = 2 * (n - 1)
    across = 2 * np.log2(np.maximum(n, 1)) if inter_hops == "tree" else ring
    return np.where(multi, across * workload.cluster.inter_node_latency, ring * workload.cluster.intra_node_latency)
