"""How a collective moves bytes over the declared links: the language of NVIDIA/nccl-tests and NCCL.

- bus bandwidth (nccl-tests doc/PERFORMANCE.md): algbw = bytes / time (GB = 1e9 bytes); busbw =
  algbw · 2(k-1)/k for all-reduce, · (k-1)/k for reduce-scatter and all-gather (`busbw_factor`):
  the bytes each rank moves, per byte of the buffer.
- THE crossing rule (`LinkLoad.of`), used by the step model (advisor.topology.layouts,
  `Layout.link_seconds`) and by the calibration probes' design (advisor.scaling.features.
  probe_link_seconds, for advisor.scaling.families and advisor.calibrate.design) alike. Ranks fill
  nodes in order (N / n GPUs per node, as torchrun and Slurm place them); a group of k ranks at rank
  stride d spans k·d consecutive ranks and crosses nodes when that is more than a node holds.
  - In a node: each rank's bus bytes go over its intra-node link; ring latency 2(k-1) hops.
  - Across nodes: NCCL runs its rings through every node's NICs, so a node's NICs carry (GPUs on the
    node / group members on the node) x the per-rank bus bytes (flat FSDP 1x; HSDP's replica
    all-reduce, one member per node, once per local rank). A ring with several members per node
    also runs through their intra-node links, so its bytes count there too; with one member per node
    (HSDP's replica groups, rail-aligned: NCCL's ring goes GPU -> its NIC -> the next node, no NVLink
    hop) nothing goes over the intra link. NCCL pipelines the chunks through the NVLink and NIC hops,
    so the slower link sets the crossing traffic's time, not the sum of both (NCCL's tuning model,
    src/graph/tuning.cc, takes the path's bottleneck bandwidth): `LinkLoad.seconds` charges
    max(NIC bytes / crossing bandwidth, their NVLink bytes / intra link) to the inter-node term, so a
    one-node step never depends on the inter-node declaration.
    An all-reduce takes NCCL's double binary tree (Sanders et al. 2009; NCCL 2.4) where the NICs carry
    less: reduced in the node over NVLink, each of two trees carries half the buffer across nodes; a
    node inner in one tree (two children) and a leaf in the other sends 4 halves, 2x the buffer, about
    a ring's 2(N-1)/N, so only at 2 nodes (root of one tree, leaf of the other: the buffer once) does
    the tree win, and busbw can reach 2(N-1)/N x the NIC rate: 375 GB/s on 8x200 Gbit/s, where
    NVIDIA/nccl-tests#196 reports 2-node busbw above the NICs (`declared_busbw`).
    Latency: NCCL's double binary tree (NCCL >= 2.4, `src/graph/tuning.cc`) ~2·log2(k) hops, or
    the ring's 2(k-1) (`inter_hops="ring"`, a family of its own).
  - An all-to-all (a mixture-of-experts layer's token exchange) is no ring: each rank sends 1/k of its
    buffer straight to each other member (NCCL runs it as grouped point-to-point sends, NCCL docs,
    "Point-to-point communication": all-to-all), so of its bus bytes (k-1)/k·S a share (m-1)/(k-1)
    stays on the node's intra-node link and (k-m)/(k-1) leaves through the NICs, m members per node:
    a node's NICs carry (GPUs on the node) x (k-m)/(k-1) x the bus bytes, far more than a ring's
    1/m share, and the slower of the two links again sets the time.
  - A reduce-scatter or all-gather is half an all-reduce's hops; a point-to-point send, and an
    all-to-all's concurrent sends, 1 hop.
- the crossing bandwidth (`crossing_bandwidth`): bytes through a node's NICs move at min(node NICs,
  intra-node link): NCCL runs one ring per NIC, so bus bandwidth approaches the node's total NIC
  bandwidth, capped by the intra-node link the ring also uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from advisor.spec import Workload


def busbw_factor(op: str, gpus):
    """nccl-tests' busbw / algbw: 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter, all-gather
    (NVIDIA/nccl-tests doc/PERFORMANCE.md) and all-to-all (nccl-tests src/alltoall.cu: each rank keeps
    1/n of its buffer and sends the rest)."""
    return (2.0 if op == "all_reduce" else 1.0) * (gpus - 1) / gpus


def bus_bandwidth_gbps(op: str, gpus: int, nbytes: float, seconds: float) -> float:
    """nccl-tests bus bandwidth in GB/s (1e9 bytes/s): algbw = bytes / time, times busbw_factor."""
    return nbytes / seconds * busbw_factor(op, gpus) / 1e9


def crossing_bandwidth(workload: "Workload") -> float:
    """Bytes/s through a node's NICs: min(node NICs, intra-node link) (module docstring)."""
    return min(workload.cluster.inter_node_bandwidth, workload.intra_node_bandwidth)


def bus_bandwidth(workload: "Workload", nodes: np.ndarray) -> np.ndarray:
    """Declared bottleneck bus bandwidth in bytes/s: the intra-node link in one node, else the crossing bandwidth."""
    return np.where(np.asarray(nodes) > 1, crossing_bandwidth(workload), workload.intra_node_bandwidth)


def hops(op: str, group: np.ndarray, inter_hops: str = "tree") -> tuple[np.ndarray, np.ndarray]:
    """Latency hops of one call for a group of k ranks: (inside a node: ring 2(k-1), across nodes: tree
    2·log2(k) or ring 2(k-1)), half for a reduce-scatter or all-gather, 1 for a send (module docstring)."""
    k = np.asarray(group, float)
    if op in ("send_recv", "all_to_all"):  # an all-to-all's sends to its peers run at once (one NCCL group)
        one = np.minimum(k - 1, 1)
        return one, one
    half = 1.0 if op == "all_reduce" else 0.5
    across = 2 * np.log2(np.maximum(k, 1)) if inter_hops == "tree" else 2 * (k - 1)
    return 2 * (k - 1) * half, across * half


@dataclass(frozen=True, kw_only=True)
class LinkSeconds:
    """Seconds per step at the declared speeds, per link: bandwidth and latency."""

    intra_bandwidth: np.ndarray
    inter_bandwidth: np.ndarray
    intra_latency: np.ndarray
    inter_latency: np.ndarray
    intra_bytes: np.ndarray  # per GPU over its intra-node link
    inter_bytes: np.ndarray  # per node through its NICs


@dataclass(frozen=True, kw_only=True)
class LinkLoad:
    """Bytes and latency hops per step on each link: what `LinkSeconds` prices at the declared speeds."""

    intra_bytes: np.ndarray  # per GPU over its intra-node link
    inter_bytes: np.ndarray  # per node through its NICs
    intra_hops: np.ndarray
    inter_hops: np.ndarray
    crossing_intra_bytes: np.ndarray  # the part of intra_bytes that crossing collectives put on NVLink

    @classmethod
    def zero(cls, shape) -> LinkLoad:
        return cls(intra_bytes=np.zeros(shape), inter_bytes=np.zeros(shape), intra_hops=np.zeros(shape),
                   inter_hops=np.zeros(shape), crossing_intra_bytes=np.zeros(shape))

    @classmethod
    def of(cls, op: str, group, stride, gpus, nodes, bus_bytes, latency_calls, inter_hops: str = "tree") -> LinkLoad:
        """THE crossing rule (module docstring): the load of `latency_calls` calls of one collective moving
        `bus_bytes` per rank per step, for groups of `group` ranks at rank `stride` over `gpus` GPUs on
        `nodes` nodes."""
        k, d = np.asarray(group).astype(float), np.asarray(stride).astype(float)
        nodes = np.asarray(nodes)
        on_node = np.ceil(np.asarray(gpus) / np.maximum(nodes, 1))  # ranks fill nodes in order
        crosses = (nodes > 1) & (k * d > on_node) & (k > 1)
        members_per_node = np.clip(np.floor(on_node / np.maximum(d, 1)), 1, k)
        ring, across = hops(op, k, inter_hops)
        nvlink = np.where(members_per_node <= 1, 0.0, bus_bytes)
        nic = on_node / members_per_node * bus_bytes
        if op == "all_to_all":  # 1/(k-1) of the bus bytes to each peer, (k-m) of them on other nodes
            peers = np.maximum(k - 1, 1)
            nvlink = (members_per_node - 1) / peers * bus_bytes
            nic = on_node * (k - members_per_node) / peers * bus_bytes
        if op == "all_reduce":  # the double binary tree where it carries less: 2 nodes (module docstring)
            buffer = bus_bytes / np.where(k > 1, busbw_factor(op, np.maximum(k, 2)), 1.0)  # calls x buffer
            tree = (np.ceil(k / members_per_node) <= 2) & (k > members_per_node)
            nvlink = np.where(tree, busbw_factor(op, members_per_node) * buffer, nvlink)
            nic = np.where(tree, np.minimum(nic, on_node / members_per_node * buffer), nic)
        return cls(
            intra_bytes=np.where(crosses, nvlink, bus_bytes),
            inter_bytes=np.where(crosses, nic, 0.0),
            intra_hops=np.where(crosses, 0.0, latency_calls * ring),
            inter_hops=np.where(crosses, latency_calls * across, 0.0),
            crossing_intra_bytes=np.where(crosses, nvlink, 0.0),
        )

    def __add__(self, other: LinkLoad) -> LinkLoad:
        return LinkLoad(
            intra_bytes=self.intra_bytes + other.intra_bytes,
            inter_bytes=self.inter_bytes + other.inter_bytes,
            intra_hops=self.intra_hops + other.intra_hops,
            inter_hops=self.inter_hops + other.inter_hops,
            crossing_intra_bytes=self.crossing_intra_bytes + other.crossing_intra_bytes,
        )

    def seconds(self, workload: "Workload") -> LinkSeconds:
        """At the declared speeds: the one-node traffic's bytes at the intra-node link; the crossing
        traffic pipelined, the slower of its NIC bytes at the crossing bandwidth and its NVLink bytes at
        the intra link (module docstring); hops at each link's declared latency."""
        intra = workload.intra_node_bandwidth
        return LinkSeconds(
            intra_bandwidth=(self.intra_bytes - self.crossing_intra_bytes) / intra,
            inter_bandwidth=np.maximum(self.inter_bytes / crossing_bandwidth(workload),
                                       self.crossing_intra_bytes / intra),
            intra_latency=self.intra_hops * workload.cluster.intra_node_latency,
            inter_latency=self.inter_hops * workload.cluster.inter_node_latency,
            intra_bytes=self.intra_bytes,
            inter_bytes=self.inter_bytes,
        )


def declared_busbw(workload: "Workload", op: str, gpus: int, nodes: int) -> float:
    """The bus bandwidth (bytes/s) a large `op` over `gpus` ranks on `nodes` filled nodes reaches at the
    declared speeds, by the crossing rule: nccl-tests' busbw of the time `LinkLoad.seconds` gives."""
    g, n = np.array([float(gpus)]), np.array([float(nodes)])
    bus = busbw_factor(op, g)
    s = LinkLoad.of(op, g, np.ones(1), g, n, bus, np.zeros(1)).seconds(workload)
    return float(bus[0] / (s.intra_bandwidth + s.inter_bandwidth)[0])
