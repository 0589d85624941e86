"""Model families and their design matrices: which physical terms each one fits.

- `topology` (the model; docs/model.md writes its equation term by term): compute at peak FLOP/s
  plus per-micro-batch host contention (both scale with the work per GPU), per-step constants
  (overhead, host sharing, sync), overlapped with communication on the bottleneck link: bus volume
  over declared bandwidth and latency hops, with separate coefficients for one node and across
  nodes (the bottleneck link changes), inter-node hops of NCCL's tree (2·log2 N); then the exposed
  block, added outside the overlap at its sources' coefficients: the pipeline bubble's share of each
  per-micro-batch term (`bubble_*`) and the traffic no compute hides (`exposed_*`, `features.link_parts`).
- `topology-ring`: the same with ring hops 2(N-1) across nodes (NCCL's ring algorithm).
- `amdahl`: t0 + c·W. Per-step overhead plus compute; communication is ignored (the naive view).
- `ernest`: θ0 + θ1·W + θ2·log N + θ3·N (Venkataraman et al., NSDI'16), W = per-GPU compute in
  place of Ernest's input/machines; non-negative.

Gradient accumulation: W counts the FLOPs of every micro-batch and the communication terms are
once per step. A loss between 1 and a few GPUs on one node is host sharing; the `contention`
column makes it a share of the work (it shrinks with the work per GPU), while `contention_step`
is a per-step constant that the priors hold small unless the data demand it. The bounds and
priors of every column live in `advisor.scaling.fitting.constraints`, by column name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from advisor.errors import InputError
from advisor.imports.algorithm import busbw_ceiling_factor
from advisor.scaling import features as F
from advisor.scaling.small_batch import small_batch_penalty, tokens_per_micro_batch
from advisor.topology.collectives import crossing_bandwidth

if TYPE_CHECKING:
    from advisor.spec import Workload


@dataclass(frozen=True)
class Column:
    name: str
    unit: str
    meaning: str


@dataclass(frozen=True)
class Design:
    """A design matrix with named columns; the first `n_compute` are compute terms, the last `n_exposed`
    add to the step outside the overlap, and `tied` (column, source) pairs share a coefficient
    (advisor.scaling.estimator)."""

    X: np.ndarray
    columns: tuple[Column, ...]
    n_compute: int
    fixed: tuple[tuple[int, float], ...] = ()
    n_exposed: int = 0
    tied: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Coverage:
    """What the measurements span, which decides the topology design (see module docstring), and
    `link_speeds`: (intra, inter) link factors of a fit whose intra-node factor no crossing step
    pinned, which decide the crossing traffic's bottleneck (`crossing_columns`); None: as declared."""

    steps_crossed_nodes: bool
    probes_crossed_nodes: bool
    link_speeds: tuple[float, float] | None = None
    #: advisor.scaling.features.MemoryPressure: which placements run near memory capacity (None: none did)
    pressure: object | None = None


@dataclass(frozen=True)
class Family:
    name: str
    summary: str
    build: Callable[["Workload", np.ndarray, np.ndarray, np.ndarray, Coverage], Design]
    has_overlap: bool = False

    def design(self, workload: "Workload", gpus, nodes, global_batch, coverage: Coverage) -> Design:
        gpus, nodes, global_batch = (np.asarray(a, float) for a in (gpus, nodes, global_batch))
        d = self.build(workload, gpus, nodes, global_batch, coverage)
        if coverage.pressure is None or not self.has_overlap:
            return d
        # memory pressure, last in the exposed block (features.pressure_column)
        values = F.pressure_column(workload, gpus, nodes, global_batch, coverage.pressure)
        return replace(d, X=np.column_stack([d.X, values]),
                       columns=(*d.columns, Column(F.PRESSURE_COLUMN, F.PRESSURE_UNIT, F.PRESSURE_MEANING)),
                       n_exposed=d.n_exposed + 1)

    def probe_design(self, workload: "Workload", probes, coverage: Coverage) -> tuple[np.ndarray, np.ndarray]:
        """Design rows and seconds for collective probes (only the communication columns are non-zero)."""
        if not self.has_overlap or not probes:
            return np.zeros((0, 0)), np.zeros(0)
        gpus = np.array([p.gpus for p in probes], float)
        nodes = np.array([p.nodes for p in probes], float)
        ones = np.ones_like(gpus)
        d = self.design(workload, gpus, nodes, ones, coverage)
        X = np.zeros_like(d.X)
        names = [c.name for c in d.columns]
        # THE crossing rule, as in a step (advisor.topology.collectives): a probe across nodes with
        # several ranks per node also runs through their intra-node links; one rank per node does not.
        for i, p in enumerate(probes):
            links = F.probe_link_seconds(workload, p.op, gpus[i:i + 1], nodes[i:i + 1], np.array([p.bytes]),
                                         _INTER_HOPS.get(self.name, "tree"))
            # read with its algorithm: the crossing rule prices the expected one (the 2-node tree, else a
            # ring); a log that forced another moved that one's bytes (advisor.imports.algorithm)
            algo = getattr(p, "algorithm", None)
            ratio = (busbw_ceiling_factor(algo, p.op, p.gpus, p.nodes)
                     / busbw_ceiling_factor(None, p.op, p.gpus, p.nodes))
            for col in ("intra_bandwidth", "inter_bandwidth", "intra_latency", "inter_latency"):
                X[i, names.index(col)] = getattr(links, col)[0] / (ratio if col.endswith("bandwidth") else 1.0)
        return X, np.array([p.seconds for p in probes], float)


def _amdahl(w, gpus, nodes, batch, cov) -> Design:
    cols = (Column("overhead", "s", "fixed time per step"),
            Column("compute", _compute_unit(w), "per-GPU FLOPs per step at peak"))
    X = np.column_stack([np.ones_like(gpus), F.compute_seconds(w, gpus, batch)])
    return Design(X, cols, n_compute=2)


def _ernest(w, gpus, nodes, batch, cov) -> Design:
    cols = (Column("overhead", "s", "fixed time per step"),
            Column("compute", _compute_unit(w), "per-GPU FLOPs per step at peak"),
            Column("log_gpus", "s per e-fold of N", "tree-like aggregation, log N"),
            Column("gpus", "s per GPU", "linear serial term, N"))
    X = np.column_stack([np.ones_like(gpus), F.compute_seconds(w, gpus, batch), np.log(gpus), gpus])
    return Design(X, cols, n_compute=4)


def _topology(inter_hops: str):
    def build(w, gpus, nodes, batch, cov: Coverage) -> Design:
        compute = F.compute_seconds(w, gpus, batch)
        extra = F.gpus_per_node_used(gpus, nodes) - 1
        cols = [Column("overhead", "s", "fixed time per step"),
                Column("compute", _compute_unit(w), "per-GPU FLOPs per step at peak"),
                Column("contention", "x peak-time per extra GPU on a node",
                       "per micro-batch host sharing (CPU, PCIe, memory, clocks): compute x (GPUs per node - 1)"),
                Column("contention_step", "s per extra GPU on a node", "per-step host sharing: GPUs per node - 1"),
                Column("small_batch", "x peak-time at the roofline penalty",
                       "weights read per micro-batch: compute x R / tokens per micro-batch (scaling.small_batch)")]
        penalty = small_batch_penalty(tokens_per_micro_batch(w, gpus, batch))
        per_micro = {"compute": compute, "contention": compute * extra, "small_batch": compute * penalty}
        arrays = [np.ones_like(gpus), per_micro["compute"], per_micro["contention"], extra, per_micro["small_batch"]]
        n_compute = len(cols)

        multi = nodes > 1
        single = (~multi) & (gpus > 1)
        hidden, exposed = F.link_parts(w, gpus, nodes, inter_hops)  # each link's own traffic (topology.layouts)
        intra_bw, inter_bw = crossing_columns(w, hidden, cov.link_speeds)
        if cov.steps_crossed_nodes:
            cols.append(Column("intra_sync", "s", "per-step synchronisation overhead in one node"))
            arrays.append(single.astype(float))
        else:
            cols.append(Column("sync", "s", "per-step synchronisation overhead (one node and across nodes alike)"))
            arrays.append((gpus > 1).astype(float))
        cols += [Column("intra_bandwidth", "x declared", "bus volume / declared intra-node bandwidth (every N > 1)"),
                 Column("intra_latency", "x declared", "ring hops x declared intra-node latency")]
        arrays += [intra_bw, hidden.intra_latency]
        if cov.steps_crossed_nodes:
            cols.append(Column("inter_sync", "s", "per-step synchronisation overhead across nodes"))
            arrays.append(multi.astype(float))
        cols += [Column("inter_bandwidth", "x declared",
                        "bus volume / declared inter-node bandwidth (added across nodes)"),
                 Column("inter_latency", "x declared", f"{inter_hops} hops x declared inter-node latency")]
        arrays += [inter_bw, hidden.inter_latency]
        # the exposed block: the pipeline's idle share of each per-micro-batch term, and the traffic no
        # compute hides, each at its source column's coefficient
        idle = F.pipeline_factor(w, gpus) - 1.0
        names = [c.name for c in cols]
        n_main, tied = len(cols), []
        for src, values in per_micro.items():
            tied.append((len(cols), names.index(src)))
            cols.append(Column(f"bubble_{src}", f"= {src}", f"the pipeline bubble's share of the {src} term"))
            arrays.append(values * idle)
        exposed_intra_bw, exposed_inter_bw = crossing_columns(w, exposed, cov.link_speeds)
        for src, values in (("intra_bandwidth", exposed_intra_bw), ("intra_latency", exposed.intra_latency),
                            ("inter_bandwidth", exposed_inter_bw), ("inter_latency", exposed.inter_latency)):
            tied.append((len(cols), names.index(src)))
            cols.append(Column(f"exposed_{src}", f"= {src}", f"{src} of the traffic no compute hides"))
            arrays.append(values)
        return Design(np.column_stack(arrays), tuple(cols), n_compute, n_exposed=len(cols) - n_main,
                      tied=tuple(tied))

    return build


def crossing_columns(w, links, speeds: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """The intra- and inter-node bandwidth columns. NCCL pipelines crossing traffic through the NVLink
    and NIC hops, so the slower sets its time (advisor.topology.collectives): max(θ_inter·NIC seconds,
    θ_intra·NVLink seconds). At the declared speeds (`speeds` None) that is the inter column's
    max(NIC, NVLink) seconds. With fitted factors the max is taken at them, and the NVLink-bound rows'
    crossing seconds join the intra column: an intra link a one-node fit measured 7x slower than
    declared (Transformer-XL on DGX-2H) is as slow on the crossing traffic's NVLink hops, which priced
    at the declared NVLink left 2 nodes 28% faster per GPU than one. Exact at `speeds` (the point
    estimate); the regime is held where the intervals move the factors."""
    if speeds is None:
        return links.intra_bandwidth, links.inter_bandwidth
    nvlink = np.maximum(links.intra_bytes / w.intra_node_bandwidth - links.intra_bandwidth, 0.0)
    nic = links.inter_bytes / crossing_bandwidth(w)
    bound = speeds[0] * nvlink > speeds[1] * nic
    return links.intra_bandwidth + np.where(bound, nvlink, 0.0), np.where(bound, 0.0, nic)


def _compute_unit(w) -> str:
    return "x peak-time (1/MFU)" if w.peak_flops else f"s per {F.NOMINAL_FLOPS:.0e} FLOP"


_INTER_HOPS = {"topology": "tree", "topology-ring": "ring"}

FAMILIES: dict[str, Family] = {
    "amdahl": Family("amdahl", "t0 + c·W (no communication)", _amdahl),
    "ernest": Family("ernest", "θ0 + θ1·W + θ2·log N + θ3·N (Ernest, NSDI'16)", _ernest),
    "topology": Family("topology",
                       "compute overlapped with bandwidth + latency on the bottleneck link, tree hops across nodes",
                       _topology("tree"), has_overlap=True),
    "topology-ring": Family("topology-ring", "as topology, ring hops 2(N-1) across nodes", _topology("ring"),
                            has_overlap=True),
}


#: The family `auto` names: the physical topology family with learned priors (docs/model.md). Choosing
#: among families by leave-one-count-out CV was dropped: with 3-4 counts the node-unaware families
#: won on luck (the emulated cluster picked Ernest, 48% off at 8@4), and it cost 4x the solves.
DEFAULT_FAMILY = "topology"

#: What `--model` accepts: auto (DEFAULT_FAMILY) or a family by name.
FAMILY_CHOICES = ("auto", *FAMILIES)


def family_named(name: str) -> Family:
    """The family `--model NAME` asks for (auto: DEFAULT_FAMILY): the one check of a family name, so
    every command refuses an unknown one with the same one-line InputError listing the choices."""
    if name not in FAMILY_CHOICES:
        raise InputError.at("--model", "", f"unknown model family; choose from {', '.join(FAMILY_CHOICES)}", name)
    return FAMILIES[DEFAULT_FAMILY if name == "auto" else name]
