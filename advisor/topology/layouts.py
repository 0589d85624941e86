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
model; advisor.planning.billing prices its memory). Under strategy 'auto',
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
  (p-1)/(v·m + p - 1) of the step (SC21 §2.2.1: bubble time / ideal time = (p-1)/(v·m)). Under
  `overlap_p2p_comm` (Megatron's default with virtual stages) the interleaved schedule's sends run
  while another model chunk computes: overlappable, only the first send of the step in the open.
- CP (ring attention, Liu et al. 2023; PyTorch's context parallel, torchtitan docs and the PyTorch
  blog "Training long context LLMs with 1M sequence length using Context Parallel", 2025): per layer
  and micro-batch each rank passes its K and V chunks (2·b·(s/cp)·h_kv/tp elements, h_kv = h·kv_heads
  / heads under GQA) around the ring, cp - 1 steps in the forward, twice that in the backward
  (K, V and their gradients).

- MoE (`_expert_traffic`; GShard, Lepikhin et al. 2021; DeepSpeed-MoE, Rajbhandari et al. 2022;
  Megatron-Core MoE): per MoE layer and micro-batch, 4 token all-to-alls over the ep ranks of
  tokens·k·h elements per rank, exposed; the routed experts' gradients reduced (FSDP: gathered too) by
  the strategy's own collectives over the expert data-parallel group (`Strategy.expert_view`), the
  dense parameters' over every data-parallel rank. ep is carved from `Strategy.expert_pool` (the
  shard group x cp, DDP's replicas x cp), which it must divide.

Placement and links: each `Traffic` is a group of k ranks at rank stride d over N GPUs on n nodes,
and THE crossing rule of advisor.topology.collectives (`LinkLoad.of`) says what it puts on each link
(the calibration probes' design uses the same rule: the NVLink and NIC hops of a collective that
crosses nodes are pipelined, the slower sets the time; an all-reduce on 2 nodes takes NCCL's tree).
Latency per call: DDP per 25 MB bucket, FSDP per wrapped block, per-layer ones (TP, CP, PP) per layer.
Recipe switches (advisor.spec, docs/formats.md): gradients at `reduce_dtype`'s bytes, parameters
gathered at the compute dtype's; `distributed_optimizer` (ZeRO-1: reduce-scatter + all-gather in place
of DDP's all-reduce); `reshard_after_forward`; `sequence_parallel` (TP's all-reduces as reduce-scatter
+ all-gather); `tp_comm_overlap` and the overlap switches set `Traffic.overlappable`, and
`Traffic.exposed_share` says how much of each collective no compute hides (`link_seconds(part=...)`
splits the seconds so; the step model adds the exposed part outside the overlap, docs/model.md).

Memory: advisor.topology.memory's formulas (ZeRO states, Korthikanti et al. 2022 activations) at
this layout's degrees, each strategy saying how many ranks share the model state
(`Strategy.state_shards`), moved to a calibration's measured peaks (`measured_offset`, each peak
against the estimate in the layout it was measured in) and bounded by the runs that fit without a
recorded peak (`ran_bound`: the counts of the run's shape that hold no more than it did fit too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from advisor.batch import micro_batch, per_gpu_batch
from advisor.topology import memory
from advisor.topology.collectives import LinkLoad, LinkSeconds, busbw_factor

if TYPE_CHECKING:
    from advisor.spec import Workload
    from advisor.topology.memory import Footprint, MeasuredFit, MeasuredPeak


@dataclass(frozen=True, kw_only=True)
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
    #: The share of an overlappable collective that no compute can hide (None: none of it): the piece
    #: issued when there is no compute left to run under, given by its strategy (`last_piece`).
    waiting: np.ndarray | float | None = None
    #: Overlapped by decomposition with the computation that depends on it, not alongside independent
    #: work: TP's collectives under tp_comm_overlap (Transformer Engine userbuffers: the all-gather
    #: becomes P2P ring exchanges and the reduce-scatter a chunked pipeline, each chunk under a chunk of
    #: its own GEMM; Wang et al. ASPLOS'23, "Overlap communication with dependent computation via
    #: decomposition") and ring attention's K/V passes (Liu et al. 2023; NeMo's communication-overlap
    #: guide: "Like the TP communication overlaps, the CP communications are chunked then
    #: pipeline-overlapped with the self-attention computation"). Its hidden part runs under its own
    #: GEMM chunks and adds nothing while each chunk's GEMM outlasts its transfer, so it is not the
    #: γ-norm's business (the data-parallel traffic the corpus fits γ on overlaps independent backward
    #: work); only its `waiting` chunk adds (`link_seconds(part="exposed")`). The smallest pair, the
    #: attention output projection's reduce-scatter, does 2h FLOPs per byte per rank over (tp-1) bytes
    #: sent: GEMM/transfer = 2h·B / (F·e·(tp-1)), B the link's achieved bus bandwidth, F the achieved
    #: FLOP/s, e bytes per element. On NVLink 4 (~390 GB/s) at ~40% MFU: GPT-3 175B, TP 4, FP8: 4.1x;
    #: Llama-3.1-405B, TP 8, FP8: 2.3x; a 4096-wide model at TP 8 in bf16: 0.6x, comm-bound, where this
    #: prices TP under tp_comm_overlap too low (the FFN pairs do 4x the FLOPs per byte).
    decomposed: bool = False

    @property
    def exposed_share(self) -> np.ndarray | float:
        """The share of this traffic that adds to the step: all of it when it cannot overlap, else its
        `waiting` piece (0 when every piece runs under compute: ring attention)."""
        if not self.overlappable:
            return 1.0
        return 0.0 if self.waiting is None else self.waiting

    @property
    def hidden_share(self) -> np.ndarray | float:
        """The share the overlap γ hides under compute: the rest of overlappable traffic, none of
        `decomposed` traffic (its hidden part runs under its own GEMM chunks and adds nothing)."""
        return 0.0 if self.decomposed and self.overlappable else 1.0 - np.asarray(self.exposed_share)

    def bus_bytes(self) -> np.ndarray:
        """Bytes each rank moves per step (nccl-tests bus-bandwidth factors; a send moves its buffer once)."""
        k = self.group.astype(float)
        factor = np.where(k > 1, 1.0, 0.0) if self.op == "send_recv" else busbw_factor(self.op, np.maximum(k, 1))
        return self.calls * factor * self.nbytes


# -- data-parallel strategies: one owner each, in one registry ------------------------------------
class Strategy:
    """One data-parallel strategy: how its ranks shard the weights (`shard_degree`), how many share
    the model state in memory (`state_shards`) and what it sends per step (`traffic`). A new strategy
    is one subclass here and one entry in STRATEGIES; the Layout asks it and knows no names."""

    name: ClassVar[str]

    def shard_degree(self, dp, per_node_dp, shard, rep) -> np.ndarray:
        """Ranks sharding the weights among `dp` data-parallel ranks (`per_node_dp` of them in one node),
        given the spec's explicit shard and replicate degrees (None or -1: not given)."""
        raise NotImplementedError

    def state_shards(self, lay: Layout) -> np.ndarray:
        """Ranks that share one copy of the model state (advisor.topology.memory): the shard group
        times the context-parallel ranks, which hold the same weights (torchtitan's dp_shard_cp)."""
        return lay.dp_shard * lay.cp

    def traffic(self, lay: Layout, s: StateBytes, micro) -> list[Traffic]:
        """The strategy's collectives per step, for the state bytes `s` and `micro` micro-batches."""
        raise NotImplementedError

    #: The data-parallel degree expert parallelism is carved from, with cp (`expert_pool`).
    expert_axis: ClassVar[str] = "dp_shard"

    def expert_pool(self, lay: Layout) -> np.ndarray:
        """Ranks the expert-parallel groups are carved from, consecutive at rank stride tp: the shard
        group x cp (torchtitan ParallelDims: ep borrows from dp_shard x cp, which it must divide), or
        under DDP the replicas x cp (Megatron-Core: expert parallelism out of the data-parallel ranks)."""
        return getattr(lay, self.expert_axis) * lay.cp

    def expert_view(self, lay: Layout) -> Layout:
        """The layout the routed experts' state lives in: each expert on pool / ep ranks (the expert
        data-parallel group, at stride tp·ep), its share of the weights split ep ways more than the
        dense ones (Megatron-Core MoE: expert weights' gradients reduce over the expert data-parallel
        group, dense ones over the whole data-parallel group). Its traffic and state shards are this
        strategy's own, at those degrees."""
        ones, pool = np.ones_like(lay.cp), np.maximum(self.expert_pool(lay) // lay.ep, 1)
        return replace(lay, **{self.expert_axis: pool}, cp=ones, tp=lay.tp * lay.ep, ep=ones)


#: PyTorch DDP's gradient bucket (DistributedDataParallel bucket_cap_mb default 25 MB; Li et al. VLDB
#: 2020 §3.2.3): the all-reduce is issued once per bucket, and each call pays the latency hops.
DDP_BUCKET_BYTES = 25e6

#: Megatron-Core's distributed-optimizer bucket, in parameters: max(40M, 1M x data-parallel size)
#: (megatron/core/distributed/distributed_data_parallel.py: `bucket_size = max(40000000, 1000000 *
#: dp_size)` when ddp_config.bucket_size is unset; one bucket for everything when overlap_grad_reduce
#: is off), so its reduce-scatter and all-gather calls grow with neither the model nor the ranks the
#: way 25 MB buckets would.
MEGATRON_BUCKET_PARAMS = 40e6
MEGATRON_BUCKET_PARAMS_PER_RANK = 1e6


@dataclass(frozen=True)
class StateBytes:
    """What the data-parallel collectives move for one model-parallel rank, and how they are issued."""

    elements: np.ndarray  # parameters per model-parallel rank
    param: np.ndarray  # parameters gathered, at the compute dtype's bytes (fp8 recipes keep bf16 weights)
    grad: np.ndarray  # gradients reduced, at parallelism.reduce_dtype's bytes (default fp32)
    blocks: float  # FSDP2 wrapped blocks per stage (one per transformer layer, plus the root): calls per pass
    reshard: bool  # FSDP2 reshard_after_forward
    distributed_optimizer: bool
    overlap_grad: bool
    overlap_param: bool

    @staticmethod
    def of(w: Workload, lay: Layout, params: float | None = None) -> StateBytes:
        """The state bytes of `params` (default: the dense ones, all of a dense model's) per model-parallel rank."""
        m, p = w.model, w.parallelism
        share = (m.dense_params if params is None else params) / (lay.tp * lay.pp)
        blocks = m.layers / lay.pp + 1 if m.is_transformer else 1.0
        return StateBytes(np.asarray(share, float), share * m.bytes_per_element, share * p.gradient_element_bytes,
                          blocks, p.reshard, p.distributed_optimizer, p.overlap_grad_reduce, p.overlap_param_gather)

    def buckets(self, nbytes) -> np.ndarray:
        """DDP calls per step: one per DDP_BUCKET_BYTES bucket."""
        return np.maximum(np.ceil(nbytes / DDP_BUCKET_BYTES), 1.0)

    def optimizer_buckets(self, ranks) -> np.ndarray:
        """The distributed optimizer's calls per step over `ranks` data-parallel ranks: one per Megatron
        bucket of max(MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_RANK x ranks) parameters, one in
        all when the gradient reduce is not overlapped."""
        size = np.maximum(MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_RANK * np.asarray(ranks, float))
        return np.maximum(np.ceil(self.elements / size), 1.0) if self.overlap_grad else np.ones_like(size)


def last_piece(calls, latency_calls) -> np.ndarray:
    """The share of a data-parallel collective that waits in the open: of the pieces one pass issues
    (latency calls per call: DDP's and the distributed optimizer's buckets, FSDP's wrapped blocks), the
    last gradient bucket is reduced after the backward has ended (Li et al. VLDB 2020 §3.2.3: buckets
    are reduced as the backward fills them; Megatron-LM's overlapped grad reduce likewise) and the first
    gather is needed before the forward can start (FSDP2 prefetches every block but the first;
    Megatron's overlap_param_gather dispatches the first bucket's all-gather ahead of the forward)."""
    return np.asarray(calls, float) / np.maximum(np.asarray(latency_calls, float), 1.0)


class Replicate(Strategy):
    """DDP: every data-parallel rank holds the weights; one gradient all-reduce per step."""

    name = "ddp"
    expert_axis = "dp_replicate"  # Megatron-Core: expert parallelism out of the data-parallel ranks

    def shard_degree(self, dp, per_node_dp, shard, rep):
        return np.ones_like(dp)

    def state_shards(self, lay: Layout) -> np.ndarray:
        return lay.dp_shard  # 1: every rank holds the whole state

    def traffic(self, lay: Layout, s: StateBytes, micro) -> list[Traffic]:
        k = lay.dp_replicate * lay.cp
        one = np.ones_like(k)
        if not s.distributed_optimizer:
            return [Traffic(name="ddp gradient all-reduce", op="all_reduce", group=k, stride=lay.tp, nbytes=s.grad,
                            calls=one, latency_calls=s.buckets(s.grad), overlappable=s.overlap_grad,
                            waiting=last_piece(one, s.buckets(s.grad)))]
        buckets = s.optimizer_buckets(k)
        return [Traffic(name="distributed-optimizer gradient reduce-scatter", op="reduce_scatter", group=k,
                        stride=lay.tp, nbytes=s.grad, calls=one, latency_calls=buckets,
                        overlappable=s.overlap_grad, waiting=last_piece(one, buckets)),
                Traffic(name="distributed-optimizer parameter all-gather", op="all_gather", group=k, stride=lay.tp,
                        nbytes=s.param, calls=one, latency_calls=buckets, overlappable=s.overlap_param,
                        waiting=last_piece(one, buckets))]


class Shard(Strategy):
    """FSDP (ZeRO-3): weights, gradients and optimizer state sharded over every data-parallel rank."""

    name = "fsdp"

    def shard_degree(self, dp, per_node_dp, shard, rep):
        return dp if shard in (None, -1) else np.full_like(dp, shard)

    def traffic(self, lay: Layout, s: StateBytes, micro) -> list[Traffic]:
        k = lay.dp_shard * lay.cp
        one = np.ones_like(k)
        gathers = (2 if s.reshard else 1) * micro  # FSDP2 reshard_after_forward=False keeps them for the backward
        name = ("fsdp all-gather (forward + backward, per micro-batch)" if s.reshard else
                "fsdp all-gather (forward, kept for the backward)")
        return [
            Traffic(name=name, op="all_gather", group=k, stride=lay.tp, nbytes=s.param, calls=gathers,
                    latency_calls=gathers * s.blocks, overlappable=s.overlap_param,
                    waiting=last_piece(gathers, gathers * s.blocks)),
            Traffic(name="fsdp reduce-scatter", op="reduce_scatter", group=k, stride=lay.tp, nbytes=s.grad, calls=one,
                    latency_calls=s.blocks * one, overlappable=s.overlap_grad, waiting=last_piece(one, s.blocks * one)),
        ]


class HybridShard(Shard):
    """HSDP: FSDP inside a shard group (default: the data-parallel ranks of one node), DDP across replicas."""

    name = "hsdp"

    def shard_degree(self, dp, per_node_dp, shard, rep):
        if shard not in (None, -1):
            return np.full_like(dp, shard)
        if rep not in (None, -1):
            return dp // rep
        return np.minimum(dp, per_node_dp)

    def traffic(self, lay: Layout, s: StateBytes, micro) -> list[Traffic]:
        inner = super().traffic(lay, s, micro)
        k = lay.dp_shard * lay.cp
        one = np.ones_like(k)
        return [
            *inner,
            Traffic(name="hsdp replica all-reduce of the shard", op="all_reduce", group=lay.dp_replicate,
                    stride=lay.tp * k, nbytes=s.grad / k, calls=one, latency_calls=s.blocks * one,
                    overlappable=s.overlap_grad, waiting=last_piece(one, s.blocks * one)),
        ]


#: The registry: every strategy a spec can name ('auto' chooses among them, advisor.planning.layout_choice).
STRATEGIES: dict[str, Strategy] = {s.name: s for s in (Replicate(), Shard(), HybridShard())}


@dataclass(frozen=True, kw_only=True)
class Layout:
    """One layout at every GPU count of `gpus` (numpy arrays, one entry per count)."""

    strategy: Strategy
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
    ep: np.ndarray | int = 1  # expert-parallel degree (mixture of experts), carved out of `Strategy.expert_pool`

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
        text += f", cp={int(self.cp[i])}" if self.cp[i] > 1 else ""
        return text + (f", ep={int(np.broadcast_to(self.ep, self.gpus.shape)[i])}" if np.any(self.ep > 1) else "")

    def labels(self) -> list[str]:
        return [self.label(i) for i in range(len(self.gpus))]

    # -- the work of one data-parallel rank --------------------------------------------------
    def samples_per_rank(self, w: Workload) -> np.ndarray:
        """Samples one data-parallel rank processes per step (at least 1; advisor.batch)."""
        return np.maximum(np.floor(per_gpu_batch(w, self.gpus)), 1.0)

    def micro_batches(self, w: Workload) -> tuple[np.ndarray, np.ndarray]:
        """(micro-batches per step, samples per micro-batch) on one data-parallel rank: the
        pipeline's micro-batches when declared, else the batch's (advisor.batch)."""
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
        """Every collective of one optimizer step: the strategy's, then (transformers) TP, PP and CP's."""
        m = w.model
        micro_count, micro = self.micro_batches(w)
        out = list(self.strategy.traffic(self, StateBytes.of(w, self), micro_count))
        if not m.is_transformer:
            return out
        tokens = micro * m.computed_seq_len / self.cp  # tokens one micro-batch computes on one rank
        return [*out, *self._model_parallel_traffic(w, tokens, micro_count), *_expert_traffic(w, self, tokens,
                                                                                                micro_count)]

    def _model_parallel_traffic(self, w: Workload, tokens, micro_count) -> list[Traffic]:
        """TP's activation all-reduces, PP's stage-to-stage sends and CP's K/V ring (module docstring)."""
        m = w.model
        e = m.bytes_per_element
        act = tokens * m.hidden * e  # b·s·h activations of one micro-batch
        layers = m.layers / self.pp
        p2p = 2 * w.parallelism.virtual_stages * micro_count * (self.pp > 1)
        kv = m.kv_heads or m.heads
        ring = 3 * (self.cp - 1) * layers * micro_count
        return [
            *_tp_traffic(w, self, act, layers * micro_count),
            Traffic(name="pp activations between stages", op="send_recv", group=np.where(self.pp > 1, 2, 1),
                    stride=self.gpus // np.maximum(self.pp, 1), nbytes=act / self.tp, calls=p2p, latency_calls=p2p,
                    overlappable=w.parallelism.p2p_overlapped, waiting=last_piece(1.0, p2p)),
            Traffic(name="cp ring-attention K/V exchange", op="send_recv", group=np.where(self.cp > 1, 2, 1),
                    stride=self.tp, nbytes=2 * tokens * m.hidden * kv / m.heads / self.tp * e, calls=ring,
                    latency_calls=ring, decomposed=True),
        ]

    def link_seconds(self, w: Workload, traffic: list[Traffic] | None = None, inter_hops: str = "tree",
                     part: str | None = None) -> LinkSeconds:
        """Per-link bytes and seconds per step at the declared bandwidths and latencies, of all the
        layout's traffic or of the given part of it, by THE crossing rule (advisor.topology.collectives);
        across nodes NCCL's tree hops, or `inter_hops` = "ring" for its ring algorithm.
        `part` = "exposed" keeps each collective's `Traffic.exposed_share` (what no compute hides),
        "hidden" what the overlap γ hides (`Traffic.hidden_share`), "decomposed" the rest, hidden by
        decomposition under its own GEMM chunks and in no term of the step (`Traffic.decomposed`), None all."""
        load = LinkLoad.zero(self.gpus.shape)
        for t in self.traffic(w) if traffic is None else traffic:
            share = {None: 1.0, "exposed": t.exposed_share, "hidden": t.hidden_share,
                     "decomposed": 1.0 - np.asarray(t.exposed_share) - np.asarray(t.hidden_share)}[part]
            load = load + LinkLoad.of(t.op, t.group, t.stride, self.gpus, self.nodes, share * t.bus_bytes(),
                                      share * t.latency_calls, inter_hops)
        return load.seconds(w)

    # -- memory --------------------------------------------------------------------------------
    def footprint(self, w: Workload, micro_samples=None) -> Footprint:
        """State, gathered units and activations per GPU at this layout's degrees (advisor.topology.memory)."""
        experts = self.strategy.state_shards(self.strategy.expert_view(self)) if w.model.is_moe else 1
        return memory.footprint(w, self.gpus, state_shards=self.strategy.state_shards(self), tp=self.tp, pp=self.pp,
                                cp=self.cp, micro_samples=micro_samples, ep=self.ep, expert_shards=experts)

    def memory_bytes(self, w: Workload, peaks: Sequence[MeasuredPeak] = (), measured: Workload | None = None):
        """State + activation bytes per GPU in this layout, moved by what a calibration's measured peaks
        (advisor.topology.memory.measured_peaks) add to the estimate in the layout they were measured in
        (`measured`, default `w`: the allocator, buffers, real activations). Never below the state and
        gathered FSDP units this layout must hold: a peak the estimate overstates (its activations, or
        a micro-batch the run did not use) takes back activations, not the model state (a peak of 2.1
        GB for llm7b's 8 GPUs read -5.9 GB per GPU at 16). `peaks` may also hold runs that fit without
        a recorded peak (advisor.topology.memory.MeasuredFit): bounds, applied by `ran_bound`."""
        fp = self.footprint(w)
        peaks, fits = memory.split_evidence(peaks)
        used = np.maximum(fp.total + measured_offset(measured or w, self.gpus, peaks), fp.state + fp.gathered)
        return ran_bound(self, w, fp, used, fits, peaks, measured or w) if fits else used

    def fits(self, w: Workload, peaks: Sequence[MeasuredPeak] = (), measured: Workload | None = None, *,
             memory_bytes: np.ndarray | None = None) -> np.ndarray:
        """THE answer to "does it fit": valid counts whose GPUs hold the footprint (`memory_bytes`, or the
        given one when already computed; every valid count where the GPU's memory is unknown)."""
        used = self.memory_bytes(w, peaks, measured) if memory_bytes is None else memory_bytes
        return self.valid & memory.holds(w, used)


def measured_offset(w: Workload, gpus, peaks: Sequence[MeasuredPeak]) -> np.ndarray:
    """Bytes to add to the estimate at each count: measured peak minus the estimate at the nearest
    measured count (nearest in log GPUs), each peak against the estimate in the layout it was measured
    in (its recorded layout, else w's), so the estimate's shape across counts (state shrinking under
    FSDP) is kept and the measured level (allocator, buffers, the real activations) replaces the
    formula's. Zero without measured peaks."""
    gpus = np.asarray(gpus, dtype=float)
    if not peaks:
        return np.zeros(gpus.shape)
    at = np.array([p.gpus for p in peaks], dtype=float)
    offsets = np.array([p.peak_bytes - _estimate_at(layout_workload(w, p.layout), p) for p in peaks])
    nearest = np.abs(np.log(gpus)[:, None] - np.log(at)[None, :]).argmin(axis=1)
    return offsets[nearest]


def ran_bound(lay: Layout, w: Workload, fp: Footprint, used: np.ndarray, fits: Sequence[MeasuredFit],
              peaks: Sequence[MeasuredPeak], measured: Workload) -> np.ndarray:
    """`used` (the estimate, peaks applied) lowered where a run that fit bounds it (docs/model.md, Memory).

    A run at N_f GPUs that trained held at most B bytes per GPU (`MeasuredFit.bound_bytes`, default the
    spec's GPU memory), whatever the estimate E(N_f) said. It carries to a count N of this layout that
    has the run's shape: the same strategy and tensor, pipeline, context and expert degrees, and the
    same activation bytes (the micro-batch, and the micro-batches in flight), so that only the model
    state and gathered units differ, which the formulas give exactly. Where the estimate says N holds
    no more than the run (E(N) <= E(N_f): FSDP at more GPUs shards the state finer; DDP holds the same),
    N fits too, and its footprint is at most E(N) - (E(N_f) - B), never below the state it must hold
    (capped at B). Counts that hold more (fewer GPUs under FSDP), another layout or micro-batch keep the
    estimate: a bound says nothing of the level there. A run the estimate already fits changes nothing."""
    capacity = memory.gpu_memory_bytes(w)
    groups: dict[tuple, list[MeasuredFit]] = {}
    for fit in fits:  # one layout built per recorded layout and bound, every run of it at once
        bound = fit.bound_bytes or capacity
        if bound is not None:
            groups.setdefault((fit.layout, bound), []).append(fit)
    out = used
    for (label, bound), group in groups.items():
        out = np.minimum(out, _group_bound(lay, fp, used, group, bound, layout_workload(measured, label), peaks,
                                           measured))
    return out


def _group_bound(lay: Layout, fp: Footprint, used: np.ndarray, group: Sequence[MeasuredFit], bound: float,
                 fw: Workload, peaks: Sequence[MeasuredPeak], measured: Workload) -> np.ndarray:
    """`ran_bound` of runs in one layout `fw` and of one bound, per count of `lay` (inf where none carries)."""
    run = build(fw, np.array([f.gpus for f in group], dtype=np.int64))
    # the run's micro-batch: recorded, else its global batch over its data-parallel ranks, at most the
    # spec's micro_samples (advisor.batch.micro_batch at the run's batch)
    share = np.maximum(np.ceil(np.array([f.global_batch for f in group], float) / run.data_parallel_size), 1.0)
    if fw.batch.micro_samples is not None:
        share = np.minimum(share, float(fw.batch.micro_samples))
    recorded = np.array([f.micro_samples or 0 for f in group], float)
    rfp = run.footprint(fw, micro_samples=np.where(recorded > 0, recorded, share))
    ran = np.maximum(rfp.total + measured_offset(measured, run.gpus, peaks), rfp.state + rfp.gathered)
    over = ran - bound

    def col(a):  # this layout's counts down, the runs across
        return np.broadcast_to(a, lay.gpus.shape)[:, None]

    same = ((lay.name == run.name) & run.valid[None, :] & (over > 0)[None, :]
            & (col(lay.tp) == run.tp[None, :]) & (col(lay.pp) == run.pp[None, :]) & (col(lay.cp) == run.cp[None, :])
            & (col(lay.ep) == np.broadcast_to(run.ep, run.gpus.shape)[None, :])
            & np.isclose(col(fp.activations), rfp.activations[None, :], rtol=1e-9, atol=0.0)
            & (col(used) <= ran[None, :] * (1 + 1e-12)))
    implied = np.maximum(col(used) - over[None, :], col(np.minimum(fp.state + fp.gathered, bound)))
    return np.where(same, implied, np.inf).min(axis=1)


def _estimate_at(w: Workload, peak: MeasuredPeak) -> float:
    """The footprint estimate at a peak's count in `w`'s layout, at the peak's micro-batch when recorded."""
    return float(build(w, np.array([peak.gpus])).footprint(w, micro_samples=peak.micro_samples or None).total[0])


def _tp_traffic(w: Workload, lay: Layout, act, layer_passes) -> list[Traffic]:
    """TP's per-layer collectives (Megatron-LM, Shoeybi et al. 2019 §3): 2 all-reduces of the b·s·h
    activations in the forward and 2 in the backward, 2 more when full recomputation repeats the forward;
    with sequence parallelism each becomes a reduce-scatter and an all-gather of the same buffer, the same
    bus bytes in twice the calls of half the hops (Korthikanti et al. 2022 §4.2.2). They sit between
    dependent GEMMs unless tp_comm_overlap pipelines them with those GEMMs (Transformer Engine
    userbuffers, Megatron --tp-comm-overlap): then they are `decomposed` traffic, of which
    TP_OVERLAP_EXPOSED[op] stays exposed."""
    p = w.parallelism
    calls = (6 if p.activation_checkpoint == "full" else 4) * layer_passes
    ones, hide = np.ones_like(lay.tp), p.tp_comm_overlap
    if not (p.sequence_parallel is not False and (lay.tp > 1).any()):
        return [Traffic(name="tp activation all-reduces (per layer, per micro-batch)", op="all_reduce", group=lay.tp,
                        stride=ones, nbytes=act, calls=calls, latency_calls=calls, overlappable=hide,
                        decomposed=hide, waiting=TP_OVERLAP_EXPOSED["all_reduce"] if hide else None)]
    return [Traffic(name=f"tp sequence-parallel {op.replace('_', '-')}s (per layer, per micro-batch)", op=op,
                    group=lay.tp, stride=ones, nbytes=act, calls=calls, latency_calls=calls, overlappable=hide,
                    decomposed=hide, waiting=TP_OVERLAP_EXPOSED[op] if hide else None)
            for op in ("reduce_scatter", "all_gather")]


#: Chunks of a pipelined TP reduce-scatter under tp_comm_overlap: Transformer Engine userbuffers'
#: `num_splits`, 4 in every pipelined overlap of NeMo's userbuffers configs (nemo/collections/llm/recipes/
#: tp_overlap_configs/userbuffers.py: GPT-3 175B, Llama-3 70B, Llama-3.1 405B, on H100 and B200).
TP_OVERLAP_CHUNKS = 4

#: The share of each TP collective that tp_comm_overlap leaves exposed, by op (NeMo's communication-
#: overlap guide and its userbuffers configs). Of a layer's reduce-scatters, the forward's half
#: (proj_fprop, fc2_fprop) is pipelined in TP_OVERLAP_CHUNKS chunks and "exposes one reduce-scatter
#: chunk"; the backward's (qkv_dgrad, fc1_dgrad) is bulk-overlapped with the weight-gradient GEMM,
#: which does not depend on it, and exposes none (Megatron-LM `TransformerConfig.tp_comm_bulk_dgrad`,
#: on by default: "Reduce-Scatter overlap with Bprop weight gradient GEMM"): 1/(2·4). The all-gathers
#: (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad) are ring exchanges, each P2P step under the GEMM on
#: the chunk already there, the first on the rank's own shard: none. Without sequence parallelism an
#: all-reduce is a reduce-scatter and an all-gather of the same buffer (nccl-tests busbw factors:
#: 2(k-1)/k = 2 x (k-1)/k): half the reduce-scatter's share.
TP_OVERLAP_EXPOSED = {"reduce_scatter": 1 / (2 * TP_OVERLAP_CHUNKS), "all_gather": 0.0,
                      "all_reduce": 1 / (4 * TP_OVERLAP_CHUNKS)}


#: All-to-alls per MoE layer and micro-batch: dispatch and combine in the forward, their gradients in
#: the backward (GShard, Lepikhin et al. 2021 §2.2 / §3.1, Algorithm 2; DeepSpeed-MoE, Rajbhandari et
#: al. ICML 2022 §5; Megatron-Core MoE token dispatcher "alltoall"). Full recomputation repeats the
#: forward's two.
MOE_ALL_TO_ALLS = 4


def _expert_traffic(w: Workload, lay: Layout, tokens, micro_count) -> list[Traffic]:
    """A mixture-of-experts model's collectives beyond the dense ones (none for a dense model):

    - the token all-to-all: per MoE layer and micro-batch, each rank sends each of its tokens to its k
      experts' ranks and gets the outputs back, forward and backward (MOE_ALL_TO_ALLS): a buffer of
      tokens·k·h values at the compute dtype's bytes, of which (ep-1)/ep leaves the GPU (nccl-tests
      alltoall busbw factor (n-1)/n). Under TP each rank dispatches its sequence-parallel share of the
      tokens (Megatron-Core requires sequence parallelism for MoE with TP). It sits between the router
      and the experts' GEMMs, which wait for its tokens: exposed (no overlap is modelled; DeepSeek-V3's
      DualPipe, arXiv:2412.19437 §3.2.1, hides it with a schedule advisor does not model);
    - the routed experts' gradient reduction (and FSDP's gathers) over the expert data-parallel group
      only, by the strategy's own rules at the expert view's degrees (`Strategy.expert_view`); the dense
      parameters' over every data-parallel rank, in the strategy's own traffic (`StateBytes.of`)."""
    m, p = w.model, w.parallelism
    if not m.is_moe:
        return []
    view = lay.strategy.expert_view(lay)
    grads = [replace(t, name="expert " + t.name)
             for t in lay.strategy.traffic(view, StateBytes.of(w, view, m.routed_expert_params), micro_count)]
    passes = (MOE_ALL_TO_ALLS + (2 if p.activation_checkpoint == "full" else 0)) * micro_count
    calls = passes * (m.moe_layers or m.layers) / lay.pp
    buffer = tokens / lay.tp * m.experts_per_token * m.hidden * m.bytes_per_element
    ep = np.broadcast_to(lay.ep, lay.gpus.shape)
    return [*grads, Traffic(name="moe token all-to-all (dispatch + combine, forward + backward)", op="all_to_all",
                            group=ep, stride=lay.tp, nbytes=buffer, calls=calls * (ep > 1),
                            latency_calls=calls * (ep > 1), overlappable=False)]


# -- building layouts ---------------------------------------------------------------------------
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
    ones = np.ones_like(g)
    lay = Layout(
        strategy=strat,
        gpus=g,
        nodes=n,
        dp_shard=shard,
        dp_replicate=np.maximum(rep, 1),
        tp=tp * ones,
        pp=pp * ones,
        cp=cp * ones,
        valid=(g % model_parallel == 0) & (dp >= 1) & (shard * rep == dp),
        gpus_per_node=w.cluster.gpus_per_node,
        shard_request=dp_shard,
        ep=p.expert_parallel_degree * ones,
    )
    return replace(lay, valid=lay.valid & (strat.expert_pool(lay) % lay.ep == 0))



def build_at(w: Workload, gpus, nodes=None) -> Layout:
    """The spec's layout at real-valued GPU and node counts (a model's query arrays), rounded to whole
    ones, at least 1."""
    whole = [None if a is None else np.maximum(np.rint(np.asarray(a, float)), 1).astype(np.int64)
             for a in (gpus, nodes)]
    return build(w, *whole)

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
        "expert_parallel_degree": deg.get("ep", 1),
        "data_parallel_shard_degree": shard if strategy == "hsdp" else None,
        "data_parallel_replicate_degree": None,
    }
    return w.model_copy(update={"parallelism": w.parallelism.model_copy(update=update)})


def candidate_workload(w: Workload, lay: Layout) -> Workload:
    """The concrete workload of one candidate layout (the spec itself unless strategy is 'auto')."""
    return with_layout(w, lay.name, int(lay.tp[0]), lay.shard_request) if w.parallelism.strategy == "auto" else w


def split_rule(w: "Workload") -> str:
    """What the declared degrees ask of a GPU count, in one clause for the reason a count cannot run
    (advisor.planning.runnable, layout_choice): the model-parallel degrees times the data-parallel
    ones make the count, and an expert degree divides the data-parallel ranks it is carved from."""
    rule = (f"tensor x pipeline x context degrees {w.model_parallel_size()} and the data-parallel degrees "
            "must multiply to it")
    ep = w.parallelism.expert_parallel_degree
    return rule + (f", and the expert degree {ep} must divide the data-parallel ranks it is carved from"
                   if ep > 1 else "")
