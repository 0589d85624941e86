"""Parallel layouts: how N GPUs split a training step, and what each split sends over which link.

One owner per strategy, as torchtitan's `ParallelDims`: a `Layout` holds the degrees of one layout
at every GPU count of a numpy array (data-parallel shard and replicate, tensor, pipeline, context
parallel; torchtitan's names and mesh order `[pp, dp_replicate, dp_shard, cp, tp]`, tp innermost,
so tensor-parallel ranks are neighbours on one node and pipeline stages are the farthest apart),
and answers, per GPU count and node count:

- `traffic()`: every collective of one optimizer step (`Traffic`: op, group size, where the group
  sits, bytes per call, calls per step). `link_seconds()` sums them per link at the declared speeds:
  bytes per GPU over the intra-node link, bytes per node through its NICs, and latency hops on each.
  One step can use both links (HSDP: reduce-scatter in the node, all-reduce across nodes).
- `data_parallel_size` (sets the samples per GPU), `bubble_fraction` (pipeline idle share),
  `memory_bytes()` (state + activations per GPU, advisor.topology.memory) and `fits()` in GPU memory.

Who calls what: `build(workload, gpus, nodes)` is the spec's layout (the worker builds its meshes
from it; advisor.scaling.features.link_seconds_at_declared / pipeline_factor feed the step-time
model; advisor.topology.memory takes its default degrees from `shard_degree`). Under strategy 'auto',
`candidates` are what advisor.planning.layout_choice chooses from (`choose`, `predict`, `sweep`), each
candidate as a concrete workload (`with_layout`, `candidate_workload`); `layout_workload` reads a
recorded label ("dp_shard=8, dp_replicate=4, tp=1, pp=1") back, e.g. for a calibration run's peak.

Volumes (bus-bandwidth convention of NVIDIA/nccl-tests doc/PERFORMANCE.md: a ring all-reduce of S
bytes over k ranks moves 2(k-1)/k·S per rank, a reduce-scatter or all-gather (k-1)/k·S):

- DDP (`Replicate`): one all-reduce of the gradient G per step: 2(k-1)/k·G (PyTorch DDP, Li et al.
  VLDB 2020). G = params x bytes per element / (tp·pp): each rank holds its model-parallel share.
- FSDP (`Shard`, ZeRO-3: Rajbhandari et al. SC20 §5; FSDP2 `fully_shard`): all-gather the
  parameters in the forward and again in the backward of every micro-batch (reshard after forward,
  the FSDP2 default), reduce-scatter the gradient once per step (gradient sync only on the last
  micro-batch, `set_requires_gradient_sync`): (2·micro-batches + 1)·(k-1)/k·G. Under gradient
  accumulation FSDP re-gathers per micro-batch; DDP does not.
- HSDP (`HybridShard`; torchtitan docs/fsdp.md, PyTorch FSDP2 on a 2-D DeviceMesh
  `(replicate, shard)`): all-gathers and reduce-scatter inside the shard group, then an all-reduce
  of each rank's 1/s shard across the r replicas: 2(r-1)/r·G/s per rank. With the shard group in a
  node, the bytes over the slow link fall from FSDP's 3(N-1)/N·G per node to 2(r-1)/r·G.
- Context parallelism shards like FSDP over dp_shard x cp (torchtitan's `dp_shard_cp` mesh).
- TP (Megatron-LM, Narayanan et al. SC21 §3 / Shoeybi et al. 2019 §3): per transformer layer
  and micro-batch, 2 all-reduces of the activations (b·s·h elements) in the forward and 2 in the
  backward; sequence parallelism swaps them for reduce-scatter + all-gather of the same volume
  (Korthikanti et al. 2022 §4.2.2). Full activation recomputation repeats the forward's 2.
- PP (SC21 §2.2, §4.1): per micro-batch, each stage sends its output activations forward and
  receives their gradients back, b·s·h elements each, split over the tp ranks (scatter/gather
  optimisation, SC21 §4.1); the interleaved schedule sends v times as much (§2.2.2). Bubble:
  (p-1)/(v·m + p - 1) of the step (SC21 §2.2.1: bubble time / ideal time = (p-1)/(v·m)).
- CP (ring attention, Liu et al. 2023; PyTorch's context parallel, torchtitan docs and the PyTorch
  blog "Training long context LLMs with 1M sequence length using Context Parallel", 2025): per layer
  and micro-batch each rank passes its K and V chunks (2·b·(s/cp)·h_kv/tp elements, h_kv = h·kv_heads
  / heads under GQA) around the ring, cp - 1 steps in the forward, twice that in the backward
  (K, V and their gradients).

Placement: ranks fill nodes in order (GPUs per node = N / nodes, as torchrun and Slurm place them);
a group of k ranks at rank stride d spans k·d consecutive ranks, inside one node when k·d <= that.
A group that crosses nodes runs NCCL's rings through every node's NICs once per ring, so a node's
NICs carry (GPUs on the node / group members on the node) x the per-rank bus
bytes: flat FSDP 1x, HSDP's replica all-reduce once per local rank. Crossing bytes move at
min(node NICs, intra-node link) as in advisor.topology.collectives.bus_bandwidth. Latency hops: ring
2(k-1) in a node, NCCL's double binary tree 2·log2(k) across nodes (as collectives.hop_latency_seconds),
half for a reduce-scatter or all-gather, 1 per point-to-point message; data-parallel collectives
count once per step (bucketed), per-layer ones (TP, CP, PP) once per call.

Memory: advisor.topology.memory (the plans' owner: ZeRO states, Korthikanti et al. 2022 activations) with
this layout's degrees, moved to a calibration's measured peaks as the planner does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from advisor.spec import Workload


@dataclass(frozen=True)
class Traffic:
    """One kind of collective in a step, at every GPU count of the layout's arrays."""

    name: str
    op: str  # all_reduce | reduce_scatter | all_gather | send_recv
    group: np.ndarray  # ranks in one group (k)
    stride: np.ndarray  # rank distance between group members
    nbytes: np.ndarray  # buffer per call, nccl-tests 'size' (the full buffer)
    calls: np.ndarray  # calls per optimizer step (bandwidth)
    latency_calls: np.ndarray  # calls that each pay the latency hops
    #: Whether it can run while the GPU computes: data-parallel collectives are issued per layer or
    #: bucket as the backward (FSDP2: and the prefetching forward) proceeds (Li et al. VLDB 2020 §3.2.3;
    #: FSDP2 prefetch), ring attention passes K/V while a block computes (Liu et al. 2023); TP's
    #: all-reduces and PP's sends sit between dependent operations (Megatron-LM SC21 §3).
    overlappable: bool = True

    def bus_bytes(self) -> np.ndarray:
        """Bytes each rank moves per step (nccl-tests bus-bandwidth factors; a send moves its buffer once)."""
        from advisor.topology.collectives import busbw_factor

        k = self.group.astype(float)
        factor = np.where(k > 1, 1.0, 0.0) if self.op == "send_recv" else busbw_factor(self.op, np.maximum(k, 1))
        return self.calls * factor * self.nbytes


@dataclass(frozen=True)
class LinkSeconds:
    """Seconds per step at the declared speeds, per link: bandwidth and latency."""

    intra_bandwidth: np.ndarray
    inter_bandwidth: np.ndarray
    intra_latency: np.ndarray
    inter_latency: np.ndarray
    intra_bytes: np.ndarray  # per GPU over its intra-node link
    inter_bytes: np.ndarray  # per node through its NICs


# -- data-parallel strategies: one owner each ---------------------------------------------------
@dataclass(frozen=True)
class Replicate:
    """DDP: every data-parallel rank holds the weights; one gradient all-reduce per step."""

    name: str = "ddp"

    def shard_degree(self, dp, per_node_dp, shard, rep):
        return np.ones_like(dp)

    def traffic(self, lay: Layout, grad, micro) -> list[Traffic]:
        k = lay.dp_replicate * lay.cp
        one = np.ones_like(k)
        return [Traffic("ddp gradient all-reduce", "all_reduce", k, lay.tp, grad, one, one)]


@dataclass(frozen=True)
class Shard:
    """FSDP (ZeRO-3): weights, gradients and optimizer state sharded over every data-parallel rank."""

    name: str = "fsdp"

    def shard_degree(self, dp, per_node_dp, shard, rep):
        return dp if shard in (None, -1) else np.full_like(dp, shard)

    def traffic(self, lay: Layout, grad, micro) -> list[Traffic]:
        k = lay.dp_shard * lay.cp
        one = np.ones_like(k)
        return [
            Traffic(
                "fsdp all-gather (forward + backward, per micro-batch)",
                "all_gather",
                k,
                lay.tp,
                grad,
                2 * micro,
                2 * one,
            ),
            Traffic("fsdp reduce-scatter", "reduce_scatter", k, lay.tp, grad, one, one),
        ]


@dataclass(frozen=True)
class HybridShard(Shard):
    """HSDP: FSDP inside a shard group (default: the data-parallel ranks of one node), DDP across replicas."""

    name: str = "hsdp"

    def shard_degree(self, dp, per_node_dp, shard, rep):
        if shard not in (None, -1):
            return np.full_like(dp, shard)
        if rep not in (None, -1):
            return dp // rep
        return np.minimum(dp, per_node_dp)

    def traffic(self, lay: Layout, grad, micro) -> list[Traffic]:
        inner = super().traffic(lay, grad, micro)
        s = lay.dp_shard * lay.cp
        one = np.ones_like(s)
        return [
            *inner,
            Traffic(
                "hsdp replica all-reduce of the shard", "all_reduce", lay.dp_replicate, lay.tp * s, grad / s, one, one
            ),
        ]


STRATEGIES = {s.name: s for s in (Replicate(), Shard(), HybridShard())}


@dataclass(frozen=True)
class Layout:
    """One layout at every GPU count of `gpus` (numpy arrays, one entry per count)."""

    strategy: object
    gpus: np.ndarray
    nodes: np.ndarray
    dp_shard: np.ndarray
    dp_replicate: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    valid: np.ndarray
    gpus_per_node: int
    shard_request: int | None = None  # the explicit shard degree this candidate was built with (HSDP across nodes)

    @property
    def name(self) -> str:
        return self.strategy.name

    @property
    def data_parallel_size(self) -> np.ndarray:
        """Data-parallel ranks: each processes its own samples (sets the batch per GPU)."""
        return self.dp_shard * self.dp_replicate

    def label(self, i: int = 0) -> str:
        """e.g. 'dp_shard=8, dp_replicate=4, tp=1, pp=1' (cp when used)."""
        text = (f"dp_shard={int(self.dp_shard[i])}, dp_replicate={int(self.dp_replicate[i])}, "
                f"tp={int(self.tp[i])}, pp={int(self.pp[i])}")
        return text + (f", cp={int(self.cp[i])}" if self.cp[i] > 1 else "")

    def labels(self) -> list[str]:
        return [self.label(i) for i in range(len(self.gpus))]

    # -- the work of one data-parallel rank --------------------------------------------------
    def samples_per_rank(self, w: Workload) -> np.ndarray:
        """Samples one data-parallel rank processes per step (at least 1; advisor.batch)."""
        from advisor.batch import per_gpu_batch

        return np.maximum(np.floor(per_gpu_batch(w, self.gpus)), 1.0)

    def micro_batches(self, w: Workload) -> tuple[np.ndarray, np.ndarray]:
        """(micro-batches per step, samples per micro-batch) on one data-parallel rank: the
        pipeline's micro-batches when declared, else the batch's (advisor.batch)."""
        from advisor.batch import micro_batch

        per = self.samples_per_rank(w)
        pipeline = w.parallelism.pipeline_microbatches
        if pipeline is not None:
            m = np.full(per.shape, float(pipeline))
            return m, per / m
        micro = np.minimum(micro_batch(w, self.gpus), per)
        return np.ceil(per / micro), micro

    def bubble_fraction(self, w: Workload) -> np.ndarray:
        """Idle share of a pipelined step: (p-1)/(v·m + p - 1) (Megatron-LM SC21 §2.2.1-2)."""
        m, _ = self.micro_batches(w)
        v = w.parallelism.virtual_stages
        p = self.pp.astype(float)
        return (p - 1) / (v * m + p - 1)

    # -- traffic -------------------------------------------------------------------------------
    def traffic(self, w: Workload) -> list[Traffic]:
        m = w.model
        micro_count, micro = self.micro_batches(w)
        grad = m.gradient_bytes / (self.tp * self.pp)
        out = list(self.strategy.traffic(self, grad, micro_count))
        if not m.is_transformer:
            return out
        e = m.bytes_per_element
        tokens = micro * m.seq_len / self.cp  # tokens of one micro-batch on one rank
        act = tokens * m.hidden * e  # b·s·h activations of one micro-batch
        layers = m.layers / self.pp
        recompute = getattr(w.parallelism, "activation_checkpoint", "none") == "full"
        per_layer = 6 if recompute else 4
        calls = per_layer * layers * micro_count
        out.append(
            Traffic(
                "tp activation all-reduces (per layer, per micro-batch)",
                "all_reduce",
                self.tp,
                np.ones_like(self.tp),
                act,
                calls,
                calls,
                overlappable=False,
            )
        )
        v = w.parallelism.virtual_stages
        stride = self.gpus // np.maximum(self.pp, 1)
        p2p = 2 * v * micro_count * (self.pp > 1)
        out.append(
            Traffic(
                "pp activations between stages",
                "send_recv",
                np.where(self.pp > 1, 2, 1),
                stride,
                act / self.tp,
                p2p,
                p2p,
                overlappable=False,
            )
        )
        kv = m.kv_heads or m.heads
        kv_bytes = 2 * tokens * m.hidden * kv / m.heads / self.tp * e
        ring = 3 * (self.cp - 1) * layers * micro_count
        out.append(
            Traffic(
                "cp ring-attention K/V exchange",
                "send_recv",
                np.where(self.cp > 1, 2, 1),
                self.tp,
                kv_bytes,
                ring,
                ring,
            )
        )
        return out

    def link_seconds(self, w: Workload, traffic: list[Traffic] | None = None, inter_hops: str = "tree") -> LinkSeconds:
        """Per-link bytes and seconds per step at the declared bandwidths and latencies, of all the
        layout's traffic or of the given part of it; across nodes NCCL's tree hops, or `inter_hops`
        = "ring" for its ring algorithm (2(k-1), as in a node)."""
        on_node = np.ceil(self.gpus / np.maximum(self.nodes, 1))  # ranks fill nodes in order, as torchrun places them
        intra_bw = w.intra_node_bandwidth
        inter_bw = min(w.cluster.inter_node_bandwidth, intra_bw)
        zeros = np.zeros(self.gpus.shape)
        intra_b, inter_b, intra_l, inter_l = zeros.copy(), zeros.copy(), zeros.copy(), zeros.copy()
        for t in self.traffic(w) if traffic is None else traffic:
            k, d = t.group.astype(float), t.stride.astype(float)
            span_nodes = self.nodes > 1
            crosses = span_nodes & (k * d > on_node) & (k > 1)
            members_per_node = np.clip(np.floor(on_node / np.maximum(d, 1)), 1, k)
            bus = t.bus_bytes()
            # a ring that crosses nodes with several members per node still runs through the intra-node
            # links, so its bytes count on both (docs/model.md; the fit's priors were learned so); a
            # group with one member per node (HSDP's replicas, rail-aligned) goes GPU -> NIC directly
            intra_b += np.where(crosses & (members_per_node <= 1), 0.0, bus)
            inter_b += np.where(crosses, on_node / members_per_node * bus, 0.0)
            half = 1.0 if t.op == "all_reduce" else 0.5
            ring = 2 * (k - 1) * half if t.op != "send_recv" else np.minimum(k - 1, 1)
            across = 2 * np.log2(np.maximum(k, 1)) if inter_hops == "tree" else 2 * (k - 1)
            tree = across * half if t.op != "send_recv" else np.minimum(k - 1, 1)
            intra_l += np.where(crosses, 0.0, t.latency_calls * ring)
            inter_l += np.where(crosses, t.latency_calls * tree, 0.0)
        return LinkSeconds(
            intra_b / intra_bw,
            inter_b / inter_bw,
            intra_l * w.cluster.intra_node_latency,
            inter_l * w.cluster.inter_node_latency,
            intra_b,
            inter_b,
        )

    # -- memory --------------------------------------------------------------------------------
    def memory_bytes(self, w: Workload, peaks=(), measured: Workload | None = None) -> np.ndarray:
        """State + activation bytes per GPU in this layout (advisor.topology.memory), moved by what a
        calibration's measured peaks (advisor.topology.memory.measured_peaks) add to the estimate in the layout
        they were measured in (`measured`, default `w`: the allocator, buffers, real activations)."""
        from advisor.topology.memory import bytes_per_gpu, measured_offset

        est = bytes_per_gpu(w, self.gpus, dp_shard=self.dp_shard, tp=self.tp, pp=self.pp, cp=self.cp)
        return est + measured_offset(measured or w, self.gpus, list(peaks))

    def fits(self, w: Workload, peaks=(), measured: Workload | None = None) -> np.ndarray:
        """Valid counts whose GPUs hold the footprint (every valid count where the GPU's memory is unknown)."""
        from advisor.topology.memory import gpu_memory_bytes

        memory = gpu_memory_bytes(w)
        if memory is None:
            return self.valid.copy()
        return self.valid & (self.memory_bytes(w, peaks, measured) <= memory)


# -- building layouts ---------------------------------------------------------------------------
def shard_degree(w: Workload, dp, tp: int = 1, cp: int = 1) -> np.ndarray:
    """Ranks that shard the weights among `dp` data-parallel ranks, by the spec's strategy (auto: fsdp)
    and explicit data-parallel degrees: what advisor.topology.memory assumes when not told."""
    p = w.parallelism
    dp = np.maximum(np.asarray(dp, dtype=np.int64), 1)
    per_node = np.full_like(dp, max(w.cluster.gpus_per_node // (tp * cp), 1))
    strat = STRATEGIES["fsdp" if p.strategy == "auto" else p.strategy]
    return np.maximum(
        strat.shard_degree(dp, per_node, p.data_parallel_shard_degree, p.data_parallel_replicate_degree), 1
    )


def gpu_node_arrays(gpus, nodes, w: Workload):
    """GPU counts and node counts as equal-length int64 arrays (nodes default: the spec's placement)."""
    g = np.atleast_1d(np.asarray(gpus, dtype=np.int64))
    n = w.nodes(g) if nodes is None else np.broadcast_to(np.atleast_1d(np.asarray(nodes, dtype=np.int64)), g.shape)
    return g, np.asarray(n, dtype=np.int64)


def build(
    w: Workload, gpus, nodes=None, strategy: str | None = None, tp: int | None = None, dp_shard: int | None = None
) -> Layout:
    """The layout of `strategy` (default: the spec's; 'auto' means its first candidate) at each count;
    `dp_shard` fixes HSDP's shard group (default: the data-parallel ranks of one node)."""
    p = w.parallelism
    name = strategy or p.strategy
    if name == "auto":
        name = "fsdp"
    g, n = gpu_node_arrays(gpus, nodes, w)
    tp = tp or p.tensor_parallel_degree or 1
    pp, cp = p.pipeline_parallel_degree, p.context_parallel_degree
    model_parallel = tp * pp * cp
    dp = g // model_parallel
    per_node = np.full_like(g, max(w.cluster.gpus_per_node // (tp * cp), 1))  # data-parallel ranks in one node
    explicit = strategy is None or strategy == p.strategy
    shard_in = dp_shard if dp_shard is not None else p.data_parallel_shard_degree if explicit else None
    rep_in = p.data_parallel_replicate_degree if explicit and dp_shard is None else None
    strat = STRATEGIES[name]
    shard = np.maximum(strat.shard_degree(dp, per_node, shard_in, rep_in), 1)
    rep = dp // shard if rep_in in (None, -1) else np.full_like(dp, rep_in)
    valid = (g % model_parallel == 0) & (dp >= 1) & (shard * rep == dp)
    ones = np.ones_like(g)
    return Layout(
        strat,
        g,
        n,
        shard,
        np.maximum(rep, 1),
        tp * ones,
        pp * ones,
        cp * ones,
        valid,
        w.cluster.gpus_per_node,
        dp_shard,
    )


#: HSDP shard groups tried under strategy auto, in nodes: in one node (the least slow-link traffic),
#: or across 2 or 4 (when a node's GPUs cannot hold the shards).
HSDP_SHARD_NODES = (1, 2, 4)


def candidates(w: Workload, gpus, nodes=None) -> list[Layout]:
    """Layouts to try at each count: the spec's own, or under strategy 'auto' DDP, FSDP and HSDP
    (shard in a node, or across HSDP_SHARD_NODES nodes, replicate across the rest) at each
    tensor-parallel degree that fits a node and divides the heads (tp is tried only when the spec
    leaves it open and the global batch is fixed, so that
    every candidate does the same work per step). Invalid or duplicate layouts are masked out."""
    p = w.parallelism
    if p.strategy != "auto":
        return [build(w, gpus, nodes)]
    tps = [p.tensor_parallel_degree or 1]
    if p.tensor_parallel_degree is None and w.model.is_transformer and w.batch.policy == "fixed-global":
        tps = [
            t
            for t in (1, 2, 4, 8, 16, 32, 64)
            if t <= w.cluster.gpus_per_node and w.model.heads % t == 0 and (w.model.kv_heads or w.model.heads) % t == 0
        ]
    out: list[Layout] = []
    for t in tps:
        out += [build(w, gpus, nodes, "ddp", t), build(w, gpus, nodes, "fsdp", t)]
        in_node = max(w.cluster.gpus_per_node // (t * p.context_parallel_degree), 1)
        for nodes_per_shard in HSDP_SHARD_NODES:
            hsdp = build(w, gpus, nodes, "hsdp", t, None if nodes_per_shard == 1 else in_node * nodes_per_shard)
            # HSDP with one replica is FSDP; with a shard of one it is DDP: keep one of each.
            out.append(replace(hsdp, valid=hsdp.valid & (hsdp.dp_replicate > 1) & (hsdp.dp_shard > 1)))
    return out


def describe(layout: Layout, i: int = 0) -> dict:
    """JSON-ready summary of one count's layout."""
    return {
        "strategy": layout.name,
        "layout": layout.label(i),
        "dp_shard": int(layout.dp_shard[i]),
        "dp_replicate": int(layout.dp_replicate[i]),
        "tp": int(layout.tp[i]),
        "pp": int(layout.pp[i]),
        "cp": int(layout.cp[i]),
    }


# -- the workload of one layout ---------------------------------------------------------------
def with_layout(w: Workload, strategy: str, tp: int | None = None, dp_shard: int | None = None) -> Workload:
    """The workload with a concrete strategy (TP degree, HSDP shard group) in place of 'auto': what
    one candidate layout predicts with (the fitted coefficients are per link and carry over)."""
    update = {"strategy": strategy, "tensor_parallel_degree": tp or w.parallelism.tensor_parallel_degree}
    if dp_shard is not None:
        update.update(data_parallel_shard_degree=dp_shard, data_parallel_replicate_degree=None)
    return w.model_copy(update={"parallelism": w.parallelism.model_copy(update=update)})


def layout_workload(w: Workload, label: str | None) -> Workload:
    """The workload in the layout a label names ("dp_shard=32, dp_replicate=1, tp=8, pp=1", as
    Layout.label writes and calibration runs record it); `w` itself for None or an unreadable label."""
    if not label:
        return w
    try:
        deg = {k.strip(): int(v) for k, v in (part.split("=") for part in label.split(","))}
        shard, rep = deg["dp_shard"], deg["dp_replicate"]
    except (ValueError, KeyError):
        return w
    strategy = "ddp" if shard == 1 and rep > 1 else "fsdp" if rep == 1 else "hsdp"
    update = {
        "strategy": strategy,
        "tensor_parallel_degree": deg.get("tp", 1),
        "pipeline_parallel_degree": deg.get("pp", 1),
        "context_parallel_degree": deg.get("cp", 1),
        "data_parallel_shard_degree": shard if strategy == "hsdp" else None,
        "data_parallel_replicate_degree": None,
    }
    return w.model_copy(update={"parallelism": w.parallelism.model_copy(update=update)})


def candidate_workload(w: Workload, lay: Layout) -> Workload:
    """The concrete workload of one candidate layout (the spec itself unless strategy is 'auto')."""
    return with_layout(w, lay.name, int(lay.tp[0]), lay.shard_request) if w.parallelism.strategy == "auto" else w
