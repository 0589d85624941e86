"""How a collective moves bytes over the declared links: the language of NVIDIA/nccl-tests and NCCL.

- bus bandwidth (nccl-tests doc/PERFORMANCE.md): algbw = bytes / time (GB = 1e9 bytes); busbw =
  algbw · 2(n-1)/n for all-reduce, · (n-1)/n for reduce-scatter and all-gather (`busbw_factor`).
- bottleneck bus bandwidth: in one node the per-GPU intra-node link; across nodes NCCL runs one ring
  per NIC, so bus bandwidth approaches the node's total NIC bandwidth, capped by the intra-node link
  (`bus_bandwidth`).
- a collective that crosses nodes (`crossing_bytes`, `crossing_seconds`): NCCL pipelines its chunks
  through the NVLink and NIC hops, so the slower link sets the time (plus the per-hop latency), not
  the sum of both (NCCL's tuning model, src/graph/tuning.cc, takes the bottleneck bandwidth of the
  path). An all-reduce runs NCCL's double binary tree (Sanders et al. 2009; NCCL 2.4) where it moves
  fewer bytes through the NICs: reduced inside a node over NVLink, each of two trees carries half the
  buffer across nodes; a node that is inner in one tree (two children) and a leaf in the other sends
  4 halves, 2x the buffer, about a ring's 2(N-1)/N, so only at 2 nodes (each node root of one tree and
  leaf of the other: 2 halves, the buffer once) does the tree win, and busbw can reach 2(N-1)/N x the
  NIC rate: 375 GB/s on 8x200 Gbit/s, where NVIDIA/nccl-tests#196 reports 2-node busbw above the NICs.
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


def crossing_bytes(op: str, k, members_per_node, groups_per_node, bus, nbytes_calls):
    """(bytes per GPU over NVLink, bytes per node through its NICs) of one kind of collective whose
    group of `k` ranks crosses nodes with `members_per_node` on each node (`groups_per_node` such groups
    share a node's NICs); `bus` = the ring's bytes per rank (calls x busbw_factor x buffer), `nbytes_calls`
    = calls x buffer. Ring: every rank's bus bytes pass the NICs once per group on the node. All-reduce:
    the cheaper of that and the double binary tree (module docstring: cheaper only at 2 nodes), whose
    in-node part is an all-reduce over the node's members."""
    m = np.maximum(members_per_node, 1.0)
    ring_nic = groups_per_node * bus
    intra = np.where(m > 1, bus, 0.0)
    if op != "all_reduce":
        return intra, ring_nic
    n = np.maximum(np.ceil(k / m), 1.0)
    tree_nic = groups_per_node * np.where(n <= 2, 1.0, 2.0) * nbytes_calls  # the busiest node (docstring)
    tree = tree_nic < ring_nic
    return np.where(tree, busbw_factor("all_reduce", m) * nbytes_calls, intra), np.where(tree, tree_nic, ring_nic)


def crossing_seconds(intra_bytes, nic_bytes, intra_bw: float, inter_bw: float):
    """Seconds of a collective that crosses nodes at the declared speeds: the slower of its NVLink and
    NIC parts (pipelined, module docstring), charged to the inter-node link."""
    return np.maximum(nic_bytes / inter_bw, intra_bytes / intra_bw)


def declared_busbw(workload: "Workload", op: str, gpus: int, nodes: int) -> float:
    """The bus bandwidth (bytes/s) a large `op` over `gpus` ranks on `nodes` filled nodes reaches at the
    declared speeds: nccl-tests' busbw of the time `crossing_seconds` gives (or the intra-node link)."""
    intra = workload.intra_node_bandwidth
    inter = min(workload.cluster.inter_node_bandwidth, intra)
    k = float(gpus)
    bus = busbw_factor(op, k)
    if nodes <= 1:
        return intra
    m = float(np.ceil(k / nodes))
    intra_b, nic_b = crossing_bytes(op, np.array(k), np.array(m), np.array(1.0), np.array(bus), np.array(1.0))
    return float(bus / crossing_seconds(intra_b, nic_b, intra, inter))
