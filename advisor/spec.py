"""The workload spec: what is trained, how it is batched and sharded, on what cluster, at what prices.

A spec is a TOML file (contract: docs/formats.md, "Workload spec (TOML)"). `load_workload(path)` parses and validates it
into a `Workload`; every problem becomes one line `FILE: dotted.path: message (got VALUE)` in an
`InputError`. Quantities accept unit strings (see `advisor.units`). Field docstrings become the
descriptions in `advisor schema`.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from advisor.catalog import MEMORY_VARIANT_FACTOR, find_gpu, suggest_gpus
from advisor.errors import InputError, Problem, control_character
from advisor.fileio import load_toml
from advisor.text import plural
from advisor.topology.memory import DEFAULT_VOCAB
from advisor.units import format_count, parse_bandwidth, parse_count, parse_duration, parse_size
from advisor.validation import validation_error

Count = Annotated[float, BeforeValidator(parse_count)]
Bandwidth = Annotated[float, BeforeValidator(parse_bandwidth)]
Duration = Annotated[float, BeforeValidator(parse_duration)]
Size = Annotated[float, BeforeValidator(parse_size)]


def _whole(value: object) -> object:
    """A whole number in the spec's count grammar (advisor.units.parse_count): `8`, `8.0`, `"4k"`
    (4,000), `"4Ki"` (4,096). pydantic reads `true` as 1 for an int field and its own messages name
    no unit; a count written as true/false, or with a fraction, is a mistake said in one line."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true/false")
    if isinstance(value, (str, float)):
        number = parse_count(value)
        if not number.is_integer():
            raise ValueError("must be a whole number")  # the error line adds "(got VALUE)" itself
        return int(number)
    return value


def _plain_text(value: object) -> object:
    """Names and descriptions are printed in tables and messages: a control character (an ANSI
    escape, a carriage return, U+2028 LINE SEPARATOR, a bidirectional override) would end the line
    or rewrite the user's terminal, so none is accepted (advisor.errors.control_character)."""
    if isinstance(value, str) and control_character(value) is not None:
        raise ValueError("must not contain control characters (escapes, newlines, tabs, line separators, "
                         "bidirectional overrides)")
    return value


#: One line of printable text.
Text = Annotated[str, BeforeValidator(_plain_text)]


def _name(value: object) -> object:
    """A name the user types back (`--tier spot`) and tables print: a blank one (`name = " "`) printed
    an empty row label and matched no --tier, and " spot" beside "spot" passed as two distinct tiers
    that read the same; surrounding spaces are refused, not silently stripped."""
    value = _plain_text(value)
    if isinstance(value, str) and value and not value.strip():
        raise ValueError("must not be blank")
    if isinstance(value, str) and (hidden := next((c for c in value if unicodedata.category(c) == "Cf"), None)):
        # U+200B ZERO WIDTH SPACE: "spot\u200b" beside "spot" passed as two tiers that print alike
        raise ValueError(f"must not contain invisible characters (U+{ord(hidden):04X}: zero-width spaces and joiners, "
                         "format marks): the name would read the same as one without it")
    if isinstance(value, str) and value != value.strip():
        raise ValueError("must not start or end with a space")
    return value


#: A name: one line of printable text, not blank, no surrounding spaces.
Name = Annotated[str, BeforeValidator(_name)]


def _real(value: object) -> object:
    """A plain number (a price, a rate, FLOP/s) read as counts are: `true` is not 1.0 (pydantic read
    `usd_per_gpu_hour = true` as $1.00 and `preemptions_per_node_hour = true` as one an hour), and a
    string takes the count grammar (`"1.5M"`), as a whole-number field's does."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not true/false")
    if isinstance(value, str):
        try:
            return parse_count(value)
        except ValueError:
            raise ValueError("must be a number") from None
    return value + 0.0 if isinstance(value, float) else value  # -0.0 is 0 (advisor.units._parse)


#: A plain number: not true/false; a string in the count grammar.
Real = Annotated[float, BeforeValidator(_real)]

#: A whole number: `true` is not 1 (pydantic would read it so), `8.5` is refused, `8.0` reads as 8, `"4k"` as 4000.
Int = Annotated[int, BeforeValidator(_whole)]

#: Bytes per gradient element for each compute precision (mixed-precision training reduces
#: gradients in the compute dtype; PyTorch FSDP MixedPrecisionPolicy(reduce_dtype) default).
#: fp8 keeps bf16 weights, activations and gradients: only the matmul inputs are cast to FP8 (Transformer
#: Engine docs, "Using FP8 with Transformer Engine"; torchtitan docs/float8.md).
BYTES_PER_ELEMENT = {"fp8": 2, "bf16": 2, "fp16": 2, "fp32": 4}

#: A declared cluster.peak_flops may exceed the catalog GPU's fastest peak by this much (a datasheet figure
#: rounded or quoted at a boost clock), not more.
PEAK_ROUNDING = 0.02

#: Largest GPU count a spec may ask about: the recommendation sweep is vectorised over its candidate
#: counts (advisor.planning.billing.gpu_counts: every whole node up to 4,096 nodes, 256 counts a doubling
#: past it), about a second at 2^20 single-GPU nodes.
MAX_GPUS_LIMIT = 2**20

# Physical upper bounds, stated in the schema (`advisor schema`: "maximum"), so a typo of ten
# digits is refused up front instead of overflowing in recommend or printing 300-digit dollars.
# Each is far above anything built or published, so no real job is refused:

#: GPUs in one node (NVLink domain): NVIDIA's largest announced is NVL576 (Rubin Ultra, GTC 2025).
MAX_GPUS_PER_NODE = 1024
#: Samples per optimizer step: published large-batch records are ~2^16 (LAMB BERT 64K, Goyal et
#: al. / Ying et al. ImageNet 8K-64K); 2^24 is 256x that.
MAX_BATCH_SAMPLES = 2**24
#: Trainable parameters: the largest published dense/MoE models are ~2e12; 1e15 is 500x that.
MAX_PARAMS = 1e15
#: Optimizer steps of one job: long pretraining runs take ~1e6 steps (T5: 1M); 1e9 is 1000x that.
MAX_JOB_STEPS = 1e9
#: Training samples of one job: 15T tokens (Llama 3) at 128 tokens per sample is ~1.2e11; 1e14 caps it.
MAX_JOB_SAMPLES = 1e14
#: Training tokens of one job: Llama 3 used 1.5e13; 1e17 is ~7000x that.
MAX_JOB_TOKENS = 1e17
#: Memory of one GPU: B200 has 192 GB; 2^44 bytes (16 TiB) is ~90x that.
MAX_GPU_MEMORY = 2.0**44
#: ... and at least 1 GB: no GPU or MIG slice one trains on has less (the smallest slice, A100 1g.5gb, has
#: 5 GB). A bare number is bytes: `gpu_memory = 96` was read as 96 bytes, and every plan left out.
MIN_GPU_MEMORY = 1e9
#: Transformer shape: layers, width, heads, context and vocabulary far beyond any published model.
MAX_LAYERS, MAX_HIDDEN, MAX_HEADS, MAX_SEQ_LEN, MAX_VOCAB = 10_000, 2**20, 2**16, 2**26, 2**26
#: Routed experts per MoE layer: DeepSeek-V3 has 256 (arXiv:2412.19437 §4.2); 2^16 is 256x that.
MAX_EXPERTS = 2**16
#: Training FLOPs per sample (6·P·T at MAX_PARAMS and a 1M-token sample is ~6e21).
MAX_FLOPS_PER_SAMPLE = 1e24
#: Bytes/s of one link: NVLink 5 is 900 GB/s per GPU per direction, 8x800 Gbit/s NICs are 800 GB/s
#: per node; 1e14 (100 TB/s) is ~100x either.
MAX_BANDWIDTH = 1e14
#: A declared cluster.intra_node_bandwidth may exceed the catalog GPU's line rate (`GPU.link_ceiling`)
#: by this much, not more: nccl-tests' busbw, the figure users copy, reads above the line rate where
#: NVLink SHARP (NVLS) reduces in the switch: ~480 GB/s on 8 H100 at 450 GB/s (NVIDIA/nccl-tests#212,
#: the NCCL maintainer), 475 on 8 H200 (NVIDIA/nccl-tests#272), 215 on H800 at 200 (NVIDIA/nccl#1374):
#: at most 7% over. 10% keeps that and refuses a link faster than its hardware (4,500 GB/s on an H100).
LINK_BUSBW_MARGIN = 0.10
#: Per-GPU share of cluster.inter_node_bandwidth no node has: twice the fastest shipped NIC rate
#: (ConnectX-8 SuperNIC, 800 Gbit/s per GPU on HGX B300), which is also ConnectX-9's 1.6 Tbit/s
#: announced for Rubin, and leaves room for a busbw that in-network reduction (SHARP, NVLS across
#: nodes) lifts above the NICs' rate. Above it a typo (Gbit for GB, a per-cluster total) is refused.
MAX_NIC_BANDWIDTH_PER_GPU = 1.6e12 / 8
#: Lower bounds where a positive but tiny value would overflow the model to infinity: no link
#: trains a model below 1 kB/s (8 kbit/s, a 1990s modem), no processor computes below 1 MFLOP/s,
#: and a job has at least one parameter, one FLOP per sample, one step or sample.
MIN_BANDWIDTH = 1e3
MIN_PEAK_FLOPS = 1e6
#: Per-hop latency: a minute is longer than any collective's timeout would allow.
MAX_LATENCY = 60.0
#: Peak dense FLOP/s per GPU: B200 is ~2.25e15 (bf16) / 4.5e15 (fp8); 1e17 is 20x that.
MAX_PEAK_FLOPS = 1e17
#: USD per GPU-hour (cloud list prices are ~1-15) and other tier bounds.
MAX_USD_PER_GPU_HOUR = 1e4
#: Smallest positive price: a hundredth of a cent per GPU-hour, 150x below the cheapest price in the
#: examples (tiny-cpu's spot vCPU at $0.015). 0 means free; a positive price below it (5e-324) is a
#: typo that overflowed budget / price to infinity, with numpy RuntimeWarnings.
MIN_USD_PER_GPU_HOUR = 1e-4
MAX_PREEMPTIONS_PER_NODE_HOUR = 60.0
MAX_TIER_DURATION = 7 * 86400.0
MAX_MIN_HOURS = 1e5
#: Calibration steps: each is a real training step on the user's machine.
MAX_CALIBRATION_STEPS = 100_000

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True, frozen=True
    )


class ModelSpec(_Section):
    params: Annotated[Count, Field(gt=0, ge=1, le=MAX_PARAMS)]
    """Trainable parameters, e.g. "6.7B"."""
    layers: Annotated[Int, Field(gt=0, le=MAX_LAYERS)] | None = None
    """Transformer layers. With hidden, heads and seq_len: builds the calibration proxy and adds the attention FLOPs."""
    hidden: Annotated[Int, Field(gt=0, le=MAX_HIDDEN)] | None = None
    """Transformer hidden size (model width)."""
    heads: Annotated[Int, Field(gt=0, le=MAX_HEADS)] | None = None
    """Attention heads; must divide hidden."""
    seq_len: Annotated[Int, Field(gt=0, le=MAX_SEQ_LEN)] | None = None
    """Tokens per sample."""
    mean_seq_len: Annotated[Real, Field(gt=0, le=MAX_SEQ_LEN)] | None = None
    ("Tokens a sample computes on average, its padding included (default: seq_len, samples padded to "
     "it or packed). Less where the loader pads each micro-batch only to its longest sample or the "
     "kernels skip padding: NVIDIA LDDL's sequence binning, unpadded attention, Hugging Face "
     "DataCollatorWithFlattening. It prices the FLOPs and the activations TP, CP and experts exchange; "
     "memory stays at seq_len (the longest micro-batch), and advisor calibrate's proxy runs seq_len.")
    vocab: Annotated[Int, Field(gt=0, le=MAX_VOCAB)] | None = None
    """Vocabulary size of the calibration proxy's embedding (default 32000)."""
    precision: Literal["fp8", "bf16", "fp16", "fp32"] = "bf16"
    ("Compute dtype of the matmuls, whose catalog peak prices the compute. fp8: FP8 matmuls (NVIDIA "
     "Transformer Engine, torchao Float8) with bf16 weights, activations and gradients (2 bytes each). "
     "fp32: priced at the TF32 tensor-core peak where the GPU has one (NVIDIA Ampere and later, AMD CDNA 3: PyTorch's "
     "float32_matmul_precision 'high'), else at its FP32 single-precision peak (V100, T4, MI355X).")
    kv_heads: Annotated[Int, Field(gt=0, le=MAX_HEADS)] | None = None
    ("Key/value heads (grouped-query attention, GQA; default: heads). Must divide heads; "
     "sizes the K/V that context parallelism exchanges and the proxy's K/V projection.")
    flops_per_sample: Annotated[Real, Field(ge=1, le=MAX_FLOPS_PER_SAMPLE)] | None = None
    """Training FLOPs per sample (forward + backward). Required without a transformer shape (a CNN, a recommender)."""
    compile: bool = False
    ("torch.compile (torchtitan --compile.enable, Megatron's fused kernels alike): fused elementwise "
     "kernels; part of what the prior's MFU model conditions on.")
    experts: Annotated[Int, Field(ge=1, le=MAX_EXPERTS)] | None = None
    ("Mixture-of-experts: routed experts in each MoE layer (Mixtral 8x7B: 8; DeepSeek-V3: 256). Needs a "
     "transformer shape and model.experts_per_token; each token's FLOPs use the active parameters only.")
    experts_per_token: Annotated[Int, Field(ge=1, le=MAX_EXPERTS)] | None = None
    ("Experts each token is routed to, top-k (Switch Transformer 1, GShard and Mixtral 2, DeepSeek-V3 8); "
     "at most model.experts.")
    expert_params: Annotated[Count, Field(gt=0, le=MAX_PARAMS)] | None = None
    ("Parameters in the routed experts, all layers and experts together (part of model.params; shared "
     "experts and the router count as dense). Default: model.params less the attention weights, "
     "2·layers·hidden²·(1 + kv_heads/heads), and the untied input and output embeddings, 2·vocab·hidden "
     "(Mixtral 8x7B: 46.7B - 1.6B = 45.1B).")
    moe_layers: Annotated[Int, Field(gt=0, le=MAX_LAYERS)] | None = None
    """Layers with an MoE block, whose tokens are exchanged all-to-all (default: every layer; DeepSeek-V3: 58 of 61)."""

    @property
    def is_transformer(self) -> bool:
        return None not in (self.layers, self.hidden, self.heads, self.seq_len)

    @property
    def computed_seq_len(self) -> float:
        """Tokens one sample computes on average (`mean_seq_len`, else `seq_len`; 0 without a sequence
        length): what the FLOPs and the per-token traffic count. Wikipedia at seq_len 512 is about half
        padding (Krell et al. 2021, arXiv:2107.02027: "in excess of 50%"), so a padding-free or
        length-binned loader computes about half the tokens a padded one does."""
        if self.seq_len is None:
            return 0.0
        return float(self.mean_seq_len) if self.mean_seq_len is not None else float(self.seq_len)

    @property
    def bytes_per_element(self) -> int:
        return BYTES_PER_ELEMENT[self.precision]

    @property
    def gradient_bytes(self) -> float:
        """Bytes of one full gradient (params x bytes per element)."""
        return self.params * self.bytes_per_element

    @property
    def is_moe(self) -> bool:
        """A mixture-of-experts model (model.experts declared)."""
        return self.experts is not None

    @property
    def non_expert_params_rule(self) -> float:
        """The weights `expert_params`' default leaves out of the experts: attention's Q and O (h x h each)
        and K and V (h x h·kv_heads/heads each, grouped-query attention), 2·L·h²·(1 + kv/heads), and the
        untied input and output embeddings, 2·v·h (Mixtral 8x7B, Jiang et al. 2024 §2: L = 32,
        h = 4096, 8 KV heads of 32, v = 32000 gives 1.34B + 0.26B; 46.7B - 1.6B = 45.1B in experts, and
        12.9B active at top-2, the paper's figures). Layer norms and the router (h·E per layer) are
        under 0.01% and count as dense. 0 without a transformer shape."""
        if not self.is_transformer:
            return 0.0
        return self.attention_params + 2 * (self.vocab or DEFAULT_VOCAB) * self.hidden

    @property
    def attention_params(self) -> float:
        """Weights of the attention projections, which every layer of the shape holds: Q and O (h x h
        each), K and V (h x h·kv_heads/heads each), 2·L·h²·(1 + kv/heads); 0 without a transformer shape.
        A model.params below it contradicts the shape (a count of another model, or a dropped letter)."""
        if not self.is_transformer:
            return 0.0
        kv = (self.kv_heads or self.heads) / self.heads
        return 2 * self.layers * self.hidden**2 * (1 + kv)

    @property
    def routed_expert_params(self) -> float:
        """Parameters in the routed experts: declared `expert_params`, else params less
        `non_expert_params_rule`; 0 for a dense model."""
        if not self.is_moe:
            return 0.0
        if self.expert_params is not None:
            return self.expert_params
        return self.params - self.non_expert_params_rule

    @property
    def dense_params(self) -> float:
        """Parameters every token uses and every data-parallel rank reduces: all but the routed experts."""
        return self.params - self.routed_expert_params

    @property
    def active_params(self) -> float:
        """Parameters one token computes with: the dense ones and k of the E experts' (top-k routing,
        Shazeer et al. 2017 §2; Fedus et al. 2022 "Switch Transformers" §2.1; Mixtral 8x7B: 12.9B of 46.7B)."""
        if not self.is_moe:
            return self.params
        return self.dense_params + self.routed_expert_params * self.experts_per_token / self.experts

    @property
    def training_flops_per_sample(self) -> float:
        """Forward + backward FLOPs per sample.

        Declared value if given, else the PaLM / nanoGPT estimate per token, 6·P + 12·L·H·T
        (Chowdhery et al. 2022, App. B; karpathy/nanoGPT `estimate_mfu`), times T tokens, with P the
        active parameters under mixture-of-experts (`active_params`: a token runs through k experts,
        so 6·P_active, as Megatron-Core and DeepSeek-V3's 37B-active count their FLOPs).
        """
        if self.flops_per_sample is not None:
            return self.flops_per_sample
        assert self.is_transformer, "validated: flops_per_sample or a transformer shape"
        return (6 * self.active_params + self.attention_flops_per_token) * self.computed_seq_len

    @property
    def attention_flops_per_token(self) -> float:
        """Forward + backward FLOPs of the attention score and value matmuls per token, 12·L·H·T
        (PaLM App. B): 4·L·H·T in the forward (Q·K^T and softmax·V, 2·L·H·T each), twice that backward.
        T is the tokens a sample computes (`computed_seq_len`): with varying lengths the mean of T² is
        above the square of the mean, so this undercounts attention a little (by the lengths' variance
        over the mean squared), which at 6·P per token is a small share. 0 without a transformer shape."""
        return 12 * self.layers * self.hidden * self.computed_seq_len if self.is_transformer else 0.0


class BatchSpec(_Section):
    policy: Literal["fixed-global", "fixed-per-gpu"]
    """fixed-global: strong scaling (global batch fixed, per-GPU share shrinks); fixed-per-gpu: weak scaling."""
    global_samples: Annotated[Int, Field(gt=0, le=MAX_BATCH_SAMPLES)] | None = None
    """Samples per optimizer step across all GPUs; required when policy is fixed-global."""
    per_gpu_samples: Annotated[Int, Field(gt=0, le=MAX_BATCH_SAMPLES)] | None = None
    """Samples per optimizer step on each GPU; required when policy is fixed-per-gpu."""
    micro_samples: Annotated[Int, Field(gt=0, le=MAX_BATCH_SAMPLES)] | None = None
    """Per-GPU micro-batch; gradient accumulation steps follow from it (default: no accumulation)."""
    gradient_noise_scale: Annotated[Real, Field(gt=0, le=MAX_JOB_SAMPLES)] | None = None
    """Gradient noise scale B_noise in samples (McCandlish et al. 2018): steps grow as S_min·(1 + B_noise/B)."""
    max_global_samples: Annotated[Int, Field(gt=0, le=MAX_BATCH_SAMPLES)] | None = None
    """fixed-per-gpu: largest global batch; beyond it the per-GPU batch shrinks to floor(max / N) (strong scaling)."""


#: A parallelism degree: a whole number of GPUs, at most the largest count a spec may ask about.
Degree = Annotated[Int, Field(ge=1, le=MAX_GPUS_LIMIT)]


class ParallelismSpec(_Section):
    strategy: Literal["ddp", "fsdp", "hsdp", "auto"]
    ("ddp: replicated weights, one gradient all-reduce per step; "
     "fsdp: sharded over every data-parallel rank (all-gather x2 + reduce-scatter); "
     "hsdp: sharded inside a node, replicated across nodes; "
     "auto: advisor chooses the layout per GPU count (advisor.planning.layout_choice).")
    data_parallel_shard_degree: Annotated[Int, Field(ge=-1, le=MAX_GPUS_LIMIT)] | None = None
    ("torchtitan's name: ranks that shard the weights (FSDP). -1 = the rest of the GPUs "
     "(default: every data-parallel rank under fsdp, 1 under ddp, the data-parallel ranks in one node under hsdp).")
    data_parallel_replicate_degree: Annotated[Int, Field(ge=-1, le=MAX_GPUS_LIMIT)] | None = None
    """torchtitan's name: replicas of the (sharded) weights that all-reduce gradients (DDP / HSDP). -1 = the rest."""
    tensor_parallel_degree: Degree | None = None
    ("Megatron-style tensor parallelism inside a layer "
     "(default 1; under strategy auto, advisor tries 1, 2, 4, ... up to a node).")
    tensor_parallel_across_nodes: bool = False
    ("Allow tensor_parallel_degree larger than cluster.gpus_per_node "
     "(its per-layer all-reduces then cross the slow link).")
    pipeline_parallel_degree: Degree = 1
    """Pipeline stages (layers split across GPUs; point-to-point activations between stages)."""
    pipeline_microbatches: Degree | None = None
    """Micro-batches per pipeline per optimizer step (default: the data-parallel rank's batch / batch.micro_samples)."""
    pipeline_schedule: Literal["1f1b", "interleaved"] = "1f1b"
    ("1f1b (PipeDream-Flush) or interleaved 1F1B with pipeline_virtual_stages model chunks per GPU "
     "(Megatron-LM SC21 §2.2).")
    pipeline_virtual_stages: Degree | None = None
    """Model chunks per GPU for the interleaved schedule (default 2; 1 for 1f1b)."""
    context_parallel_degree: Degree = 1
    """Ranks that split each sequence (ring attention: K/V passed around the context-parallel ring)."""
    expert_parallel_degree: Degree = 1
    ("Ranks that split a mixture-of-experts layer's experts (E / degree each), carved out of the "
     "data-parallel ranks (Megatron-Core MoE --expert-model-parallel-size; torchtitan borrows it from "
     "dp_shard x cp): tokens go to their experts' ranks and back by all-to-all. Must divide model.experts.")
    activation_checkpoint: Literal["none", "selective", "full"] = "none"
    ("Activation recomputation (Korthikanti et al. 2022): none, selective (attention's softmax and "
     "dropout recomputed) or full (only layer inputs kept; the forward runs twice, ~1/3 more compute).")
    sequence_parallel: bool | None = None
    ("Megatron sequence parallelism (--sequence-parallel; torchtitan's TP plan always uses it): TP's "
     "all-reduces become reduce-scatter + all-gather and the layer-norm/dropout activations split by TP "
     "(Korthikanti et al. 2022 §4.2.2). Default: true when tensor_parallel_degree > 1.")
    distributed_optimizer: bool = False
    ("Megatron --use-distributed-optimizer (ZeRO-1 over the data-parallel group, Rajbhandari et al. SC20): "
     "optimizer state sharded, gradients reduce-scattered, parameters all-gathered. ddp or hsdp only.")
    reshard_after_forward: bool | None = None
    ("FSDP2 fully_shard(reshard_after_forward): true (default) frees the gathered parameters after the "
     "forward and gathers them again for the backward; false keeps them (ZeRO-2-like: one all-gather per "
     "micro-batch, more memory). fsdp or hsdp only.")
    overlap_grad_reduce: bool = True
    ("Gradient reduction runs under the backward (PyTorch DDP buckets and FSDP2 do by default; Megatron "
     "--overlap-grad-reduce). false: it waits for the backward to end.")
    overlap_param_gather: bool = True
    ("Parameter all-gathers run under compute (FSDP2 prefetch; Megatron --overlap-param-gather with the "
     "distributed optimizer). false: each gather is exposed.")
    tp_comm_overlap: bool = False
    ("Megatron --tp-comm-overlap (Transformer Engine userbuffers): TP's collectives pipelined with the "
     "GEMMs they feed. Needs tensor_parallel_degree > 1.")
    overlap_p2p_comm: bool | None = None
    ("Megatron's pipeline send/receive overlap (--overlap-p2p-communication, on by default; NeMo "
     "overlap_p2p_comm, valid only with virtual pipeline stages): the interleaved schedule's stage-to-stage "
     "sends run while another model chunk computes. Default: true under pipeline_schedule = 'interleaved', "
     "false under '1f1b' (its sends sit between dependent stages; Megatron-LM SC21 §2.2).")
    reduce_dtype: Literal["fp32", "bf16", "fp16"] | None = None
    ("Gradient reduction dtype. Default fp32, what each layout's reference does: torchtitan FSDP2 "
     "(MixedPrecisionPolicy reduce_dtype float32), Megatron bf16 (fp32 gradient accumulation and "
     "all-reduce) and PyTorch mixed-precision DDP (fp32 parameters, so fp32 gradients).")

    @property
    def gradient_element_bytes(self) -> int:
        """Bytes per gradient element on the wire (reduce_dtype, default fp32)."""
        return BYTES_PER_ELEMENT[self.reduce_dtype or "fp32"]

    @property
    def sequence_parallel_on(self) -> bool:
        """Sequence parallelism in effect: declared, else with tensor parallelism (torchtitan's default)."""
        return (self.tensor_parallel_degree or 1) > 1 and self.sequence_parallel is not False

    @property
    def reshard(self) -> bool:
        """FSDP2 reshard_after_forward in effect (default true)."""
        return self.reshard_after_forward is not False

    @property
    def p2p_overlapped(self) -> bool:
        """Pipeline sends overlapped in effect: declared, else under the interleaved schedule (Megatron's default)."""
        if self.overlap_p2p_comm is None:
            return self.pipeline_schedule == "interleaved"
        return self.overlap_p2p_comm

    @property
    def virtual_stages(self) -> int:
        if self.pipeline_schedule == "1f1b":
            return 1
        return self.pipeline_virtual_stages or 2


class ClusterSpec(_Section):
    gpu: Annotated[Name, Field(min_length=1, max_length=200)]
    """GPU model, free text; a catalog entry (`advisor gpus`) supplies peak FLOP/s for MFU and defaults.
    A Name: "H100 " matched the catalog (its key ignores spaces) yet printed "H100  x8" and went to
    SkyPilot as written, so surrounding spaces are refused, as a tier name's are."""
    gpus_per_node: Annotated[Int, Field(gt=0, le=MAX_GPUS_PER_NODE)] = 8
    """GPUs in one node (one NVLink/NVSwitch domain)."""
    max_gpus: Annotated[Int, Field(gt=0, le=MAX_GPUS_LIMIT)]
    """Largest GPU count to consider."""
    intra_node_bandwidth: Annotated[Bandwidth, Field(ge=MIN_BANDWIDTH, le=MAX_BANDWIDTH)] | None = None
    """Per-GPU one-direction bandwidth inside a node, e.g. "450 GB/s" (default: the catalog's)."""
    intra_node_latency: Annotated[Duration, Field(ge=0, le=MAX_LATENCY)] = 3e-6
    """Per-hop latency inside a node (default 3 us: order of NCCL's NVLink base latency, src/graph/tuning.cc)."""
    inter_node_bandwidth: Annotated[Bandwidth, Field(ge=MIN_BANDWIDTH, le=MAX_BANDWIDTH)]
    """Per-node bandwidth between nodes, all NICs together, e.g. "3200 Gbit/s" (8 x 400 Gbit/s)."""
    inter_node_latency: Annotated[Duration, Field(ge=0, le=MAX_LATENCY)] = 10e-6
    """Per-hop latency between nodes (default 10 us: order of NCCL's network base latency)."""
    intra_node_link: Literal["nvlink", "pcie"] | None = None
    """The intra-node link's class: centres its speed prior on what NCCL reaches on that class
    (advisor.scaling.priors.LINK_CLASS_LOG_BW); unset (and pcie, unmeasured): the corpus-learned prior."""
    inter_node_link: Literal["infiniband", "roce", "ethernet"] | None = None
    """The network's class (ethernet: GPU-direct fabrics such as TCPXO or EFA), as intra_node_link."""
    peak_flops: Annotated[Real, Field(ge=MIN_PEAK_FLOPS, le=MAX_PEAK_FLOPS)] | None = None
    """Peak dense FLOP/s per GPU at the spec's precision, for MFU (default: the catalog's)."""
    gpu_memory: Annotated[Size, Field(ge=MIN_GPU_MEMORY, le=MAX_GPU_MEMORY)] | None = None
    """Memory per GPU, e.g. "96 GB" (default: the catalog's); plans whose footprint exceeds it are left out."""


class JobSpec(_Section):
    samples: Annotated[Count, Field(ge=1, le=MAX_JOB_SAMPLES)] | None = None
    """Total training samples, e.g. "250M"."""
    steps: Annotated[Count, Field(ge=1, le=MAX_JOB_STEPS)] | None = None
    """Total optimizer steps (instead of samples)."""
    tokens: Annotated[Count, Field(ge=1, le=MAX_JOB_TOKENS)] | None = None
    """Total training tokens, e.g. "2T" (instead of samples; needs model.seq_len): samples = tokens / seq_len."""


class Tier(_Section):
    name: Annotated[Name, Field(min_length=1, max_length=200)]
    """Billing tier name, unique within the spec (on-demand, spot, reserved-1mo, ...)."""
    usd_per_gpu_hour: Annotated[Real, Field(ge=0, le=MAX_USD_PER_GPU_HOUR)]
    """Price per GPU-hour in USD."""
    preemptions_per_node_hour: Annotated[Real, Field(ge=0, le=MAX_PREEMPTIONS_PER_NODE_HOUR)] = 0.0
    """Spot: expected preemptions per node per hour; any node lost stops a synchronous job."""
    restart: Annotated[Duration, Field(ge=0, le=MAX_TIER_DURATION)] = 0.0
    """Spot: time from a preemption to training again."""
    checkpoint: Annotated[Duration, Field(ge=0, le=MAX_TIER_DURATION)] = 0.0
    """Spot: time to write one checkpoint."""
    min_hours: Annotated[Real, Field(ge=0, le=MAX_MIN_HOURS)] = 0.0
    """Reserved: billed for at least this many hours."""
    max_gpus: Annotated[Int, Field(gt=0, le=MAX_GPUS_LIMIT)] | None = None
    """Most GPUs available on this tier."""
    instance_gpus: Annotated[Int, Field(gt=0, le=MAX_GPUS_PER_NODE)] | None = None
    """GPUs per rentable instance (e.g. 8 for an 8x H100 VM): only whole instances are priced."""


class CalibrationSpec(_Section):
    gpus: Annotated[list[Annotated[Int, Field(gt=0, le=MAX_GPUS_LIMIT)]],
                    Field(min_length=1, max_length=64)] = [1, 2, 4, 8, 16]
    """GPU counts to calibrate at."""
    warmup_steps: Annotated[Int, Field(ge=0, le=MAX_CALIBRATION_STEPS)] = 3
    """Untimed steps before timing."""
    steps: Annotated[Int, Field(gt=0, le=MAX_CALIBRATION_STEPS)] = 10
    """Timed optimizer steps per GPU count."""
    proxy_layers: Annotated[Int, Field(gt=0, le=MAX_LAYERS)] | None = None
    """Layers of the calibration proxy when the full model does not fit (default: all)."""


class Workload(_Section):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=64)]
    """Workload name: lower-case letters, digits, '-' and '_'; used in file names."""
    description: Annotated[Text, Field(max_length=2000)] = ""
    """One line saying what is trained."""
    model: ModelSpec
    batch: BatchSpec
    parallelism: ParallelismSpec
    cluster: ClusterSpec
    job: JobSpec
    tiers: Annotated[list[Tier], Field(min_length=1)]
    """Billing tiers to compare."""
    calibration: CalibrationSpec = CalibrationSpec()

    #: Where the spec was read from (not part of the spec).
    source: Path | None = Field(default=None, exclude=True)

    def model_parallel_size(self) -> int:
        """GPUs that hold one data-parallel replica's share of the work: tensor x pipeline x context
        parallel degrees (1 when the spec has none; strategy auto's own choices go through
        advisor.planning.layout_choice)."""
        p = self.parallelism
        return (p.tensor_parallel_degree or 1) * p.pipeline_parallel_degree * p.context_parallel_degree

    def global_batch(self, gpus: Any) -> Any:
        """Samples per optimizer step at `gpus` GPUs (scalar or numpy array): the batch policy and
        `batch.max_global_samples`, as advisor.batch applies them (per data-parallel rank
        under tensor, pipeline or context parallelism)."""
        from advisor.batch import global_batch

        return _like(gpus, global_batch(self, gpus))

    def per_gpu_batch(self, gpus: Any) -> Any:
        """Samples per optimizer step on one data-parallel rank (may be fractional for fixed-global at large N)."""
        from advisor.batch import per_gpu_batch

        return _like(gpus, per_gpu_batch(self, gpus))

    @property
    def intra_node_bandwidth(self) -> float:
        """Declared per-GPU intra-node bandwidth, else the catalog's for this GPU (validated)."""
        if self.cluster.intra_node_bandwidth is not None:
            return self.cluster.intra_node_bandwidth
        return find_gpu(self.cluster.gpu).intra_node_bandwidth

    @property
    def peak_flops(self) -> float | None:
        """Peak dense FLOP/s per GPU at the spec's precision: declared, else catalog, else None (no MFU)."""
        if self.cluster.peak_flops is not None:
            return self.cluster.peak_flops
        gpu = find_gpu(self.cluster.gpu)
        return gpu.peak_flops(self.model.precision) if gpu else None

    def nodes(self, gpus: Any) -> Any:
        """Nodes needed for `gpus` GPUs when nodes are filled: ceil(gpus / gpus_per_node) (`nodes_filled`)."""
        return nodes_filled(gpus, self.cluster.gpus_per_node)

    def tier_named(self, name: str) -> "Tier":
        """The tier called `name` (`--tier` of recommend and plan-calibration); InputError naming
        the spec's `tiers`, with the closest name (difflib) or the list, when there is none."""
        import difflib

        for t in self.tiers:
            if tier_key(t.name) == tier_key(name):  # at most one: tier names are unique under tier_key
                return t
        names = [t.name for t in self.tiers]
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; tiers: {', '.join(names)}"
        raise InputError.at(self.source or self.name, "tiers", f"no tier named {name!r}{hint}", name)


def _like(gpus: Any, values: Any) -> Any:
    """A scalar (int when whole) for a scalar count, else the array."""
    import numpy as np

    if np.ndim(gpus) == 0:
        value = float(values)
        return int(value) if value.is_integer() else value
    return values


def _model_problems(w: Workload) -> list[tuple[str, str, object]]:
    """The model section's cross-field checks: a whole transformer shape, heads dividing the width,
    params holding the shape's attention weights, FLOPs when no shape says them."""
    out: list[tuple[str, str, object]] = []
    m = w.model
    shape = {"layers": m.layers, "hidden": m.hidden, "heads": m.heads, "seq_len": m.seq_len}
    given = [k for k, v in shape.items() if v is not None]
    if given and len(given) < len(shape):
        for k in shape:
            if shape[k] is None:
                out.append((f"model.{k}", f"required with {', '.join(given)} "
                            "(a transformer shape needs layers, hidden, heads and seq_len)", None))
    if m.hidden is not None and m.heads is not None and m.hidden % m.heads:
        out.append(("model.heads", f"must divide model.hidden ({m.hidden})", m.heads))
    elif (m.is_transformer and not m.is_moe and m.params < m.attention_params
          and not (m.kv_heads and m.heads % m.kv_heads)):
        # The FLOPs (6·params per token), the memory and the gradient bytes all read params: 1M with a Llama-8B
        # shape planned a 1-GPU run 3.6x faster per GPU than the 8 it was calibrated on. (Mixture of experts:
        # _expert_problems holds params above attention and embeddings.)
        out.append(("model.params", f"fewer than the attention weights of the shape alone (2·layers·hidden²·"
                    f"(1 + kv_heads/heads) = {format_count(m.attention_params)} for {plural(m.layers, 'layer')} of "
                    f"{m.hidden}): the count or the shape is wrong",
                    int(m.params) if m.params.is_integer() else m.params))
    if m.mean_seq_len is not None and m.seq_len is None:
        out.append(("model.mean_seq_len", "needs model.seq_len (the longest sample) and a transformer shape",
                    m.mean_seq_len))
    elif m.mean_seq_len is not None and m.mean_seq_len > m.seq_len:
        out.append(("model.mean_seq_len", f"at most model.seq_len ({m.seq_len}): a sample's mean length, "
                    "padding included, cannot exceed the longest", m.mean_seq_len))
    if not given and m.flops_per_sample is None:
        out.append(("model.flops_per_sample",
                    "required when no transformer shape (layers, hidden, heads, seq_len) is given", None))
    return out


def _batch_problems(w: Workload) -> list[tuple[str, str, object]]:
    """Each policy needs its own batch size (which the micro-batch must divide) and ignores the other's."""
    out: list[tuple[str, str, object]] = []
    b = w.batch
    policies = {"fixed-global": "global_samples", "fixed-per-gpu": "per_gpu_samples"}
    for policy, key in sorted(policies.items(), key=lambda item: item[0] != b.policy):
        size = getattr(b, key)
        if policy == b.policy and size is None:
            out.append((f"batch.{key}", f"required when batch.policy is '{policy}'", None))
        elif policy == b.policy and b.micro_samples is not None and size % b.micro_samples:
            out.append(("batch.micro_samples", f"must divide batch.{key} ({size})", b.micro_samples))
        elif policy != b.policy and size is not None:
            out.append((f"batch.{key}", f"only used when batch.policy is '{policy}'", size))
    if b.max_global_samples is not None and b.policy != "fixed-per-gpu":
        out.append(("batch.max_global_samples", "only used when batch.policy is 'fixed-per-gpu'", b.max_global_samples))
    elif b.max_global_samples is not None:
        # a cap under one sample per rank of a full node left that node's global batch at 0, and the prior,
        # scaled by the step time of a full node, raised ZeroDivisionError (advisor.scaling.estimator)
        ranks = max(w.cluster.gpus_per_node // w.model_parallel_size(), 1)
        if b.max_global_samples < ranks:
            out.append(("batch.max_global_samples", f"below the {plural(ranks, 'data-parallel rank')} of one "
                        f"{w.cluster.gpus_per_node}-GPU node: a full node would train ranks without a sample "
                        "(for a batch this small, use policy 'fixed-global')", b.max_global_samples))
    return out


def tier_key(name: str) -> str:
    """What makes two tier names one: `spot` and `SPOT` (and a fullwidth `ｓｐｏｔ`) are one tier to a reader
    and to `--tier`; so are `on-demand` and `on‐demand` (U+2010, or any other dash or the minus sign), which
    NFKC keeps apart and a table prints alike."""
    import unicodedata

    text = unicodedata.normalize("NFKC", name).casefold()
    return "".join("-" if unicodedata.category(c) == "Pd" or c == "\u2212" else c for c in text)


def _tier_problems(w: Workload) -> list[tuple[str, str, object]]:
    """A name twice, a price below a cent, and an instance larger than every count the tier may rent
    (instance_gpus 16 under max_gpus 8 validated, then recommend found "no plan meets the limits")."""
    out: list[tuple[str, str, object]] = []
    seen: dict[str, str] = {}
    for i, t in enumerate(w.tiers):
        if (key := tier_key(t.name)) in seen:
            how = "case" if seen[key].casefold() == t.name.casefold() or "-" not in key else "case or dashes"
            like = "" if seen[key] == t.name else f" ({seen[key]!r}: names differing only in {how} are one tier)"
            out.append((f"tiers[{i}].name", f"duplicate tier name{like}", t.name))
        seen.setdefault(key, t.name)
        if 0 < t.usd_per_gpu_hour < MIN_USD_PER_GPU_HOUR:
            out.append((f"tiers[{i}].usd_per_gpu_hour", f"must be 0 (free) or at least {MIN_USD_PER_GPU_HOUR:g} USD",
                        t.usd_per_gpu_hour))
        cap, what = min((t.max_gpus or MAX_GPUS_LIMIT + 1, f"tiers[{i}].max_gpus"),
                        (w.cluster.max_gpus, "cluster.max_gpus"))
        if t.instance_gpus is not None and t.instance_gpus > cap:
            out.append((f"tiers[{i}].instance_gpus", f"more than {what} ({cap}): not one whole instance can be "
                        "rented, so the tier offers no GPU count", t.instance_gpus))
    return out


def _cross_field_problems(w: Workload) -> list[tuple[str, str, object]]:
    """Checks that span fields: (dotted path, message, offending value)."""
    out = _model_problems(w) + _batch_problems(w) + _gpu_problems(w)
    m = w.model
    if sum(x is not None for x in (w.job.samples, w.job.steps, w.job.tokens)) != 1:
        out.append(("job", "give exactly one of job.samples, job.steps or job.tokens", None))
    elif w.job.tokens is not None and m.seq_len is None:
        out.append(("job.tokens", "needs model.seq_len (tokens per sample) to count samples", w.job.tokens))
    elif w.job.tokens is not None and w.job.tokens < m.seq_len:  # job.samples >= 1 holds for tokens too
        out.append(("job.tokens", f"fewer than one sample of model.seq_len ({m.seq_len:,} tokens): a job trains "
                    "at least one", w.job.tokens))

    out += _tier_problems(w)
    out += _parallelism_problems(w)
    out += _expert_problems(w)

    for i, n in enumerate(w.calibration.gpus):
        if n > w.cluster.max_gpus:
            out.append((f"calibration.gpus[{i}]", f"exceeds cluster.max_gpus ({w.cluster.max_gpus})", n))
    if len(set(w.calibration.gpus)) != len(w.calibration.gpus):
        out.append(("calibration.gpus", "counts must be unique", w.calibration.gpus))
    out += _uneven_calibration_counts(w)
    out += _empty_rank_counts(w)
    if w.calibration.proxy_layers is not None and m.layers is not None and w.calibration.proxy_layers > m.layers:
        out.append(("calibration.proxy_layers", f"exceeds model.layers ({m.layers})", w.calibration.proxy_layers))
    return out


def _empty_rank_counts(w: Workload) -> list[tuple[str, str, object]]:
    """Calibration counts whose batch leaves a data-parallel rank without a sample (advisor.batch: a
    fixed-per-gpu cap, batch.max_global_samples, under the count's ranks): nothing to time there, and the
    prior's stand-in runs at them divided 0 by 0 (a numpy RuntimeWarning printed advisor's path)."""
    from advisor.batch import per_gpu_batch

    mp = w.model_parallel_size()
    cap = w.batch.max_global_samples
    if w.batch.policy != "fixed-per-gpu" or cap is None or cap < max(w.cluster.gpus_per_node // mp, 1):
        return []  # no cap, or one under a node's ranks: refused once, under batch.max_global_samples
    return [(f"calibration.gpus[{i}]", f"under one sample per data-parallel rank: batch.max_global_samples "
             f"({w.batch.max_global_samples}) over {plural(n // mp, 'rank')}", n)
            for i, n in enumerate(w.calibration.gpus) if n % mp == 0 and per_gpu_batch(w, n) < 1]


def _gpu_problems(w: Workload) -> list[tuple[str, str, object]]:
    """An unknown GPU is refused unless its peak is declared (a silent guess would price it 45x off);
    a known one must have a peak at the spec's precision (no fp8 on an A100, no bf16 on a V100)."""
    c, gpu = w.cluster, find_gpu(w.cluster.gpu)
    if gpu is None and c.peak_flops is None:
        close = suggest_gpus(c.gpu)
        names = ", ".join(map(repr, close[:-1])) + f" or {close[-1]!r}" if len(close) > 1 else "".join(map(repr, close))
        hint = f"did you mean {names}? For" if close else "for"
        return [("cluster.gpu", f"not in the catalog (advisor gpus): {hint} another GPU declare "
                 "cluster.peak_flops (dense FLOP/s at model.precision) and cluster.intra_node_bandwidth", c.gpu)]
    out: list[tuple[str, str, object]] = []
    if c.intra_node_bandwidth is None and (gpu is None or gpu.intra_node_bandwidth is None):
        out.append(("cluster.intra_node_bandwidth",
                    f"required: GPU {c.gpu!r} is not in the catalog (advisor gpus)", None))
    ceiling = gpu.link_ceiling if gpu is not None else None
    if c.intra_node_bandwidth is not None and ceiling and c.intra_node_bandwidth > ceiling * (1 + LINK_BUSBW_MARGIN):
        out.append(("cluster.intra_node_bandwidth", f"above the catalog's {gpu.name} line rate "
                    f"({ceiling / 1e9:.4g} GB/s per GPU, one direction, and {LINK_BUSBW_MARGIN:.0%} for a busbw "
                    "NVLink SHARP lifts): a link cannot be faster than its hardware; leave it out or name the GPU "
                    "you have", f"{c.intra_node_bandwidth / 1e9:.4g} GB/s"))
    if gpu is not None and c.gpu_memory is not None and c.gpu_memory > gpu.memory_bytes * MEMORY_VARIANT_FACTOR:
        out.append(("cluster.gpu_memory", f"more than {MEMORY_VARIANT_FACTOR:g}x the catalog's {gpu.name} "
                    f"({gpu.memory_bytes / 1e9:g} GB): no build of a GPU has that much more (A100 40 -> 80 GB "
                    "is the widest); plans would fit that cannot. Name the GPU you have, or check the unit",
                    f"{c.gpu_memory / 1e9:g} GB"))
    per_gpu = c.inter_node_bandwidth / c.gpus_per_node
    if per_gpu > MAX_NIC_BANDWIDTH_PER_GPU:
        out.append(("cluster.inter_node_bandwidth", f"{per_gpu * 8 / 1e9:.4g} Gbit/s per GPU over "
                    f"{plural(c.gpus_per_node, 'GPU')} per node, above {MAX_NIC_BANDWIDTH_PER_GPU * 8 / 1e9:.4g} "
                    "Gbit/s, twice the fastest NIC a GPU ships with: it is the whole node's NICs together "
                    "(8 x 400 Gbit/s = \"3200 Gbit/s\"), in bits or bytes as written",
                    f"{c.inter_node_bandwidth / 1e9:.4g} GB/s"))
    fastest = max((gpu.peak_flops(p) or 0.0 for p in BYTES_PER_ELEMENT), default=0.0) if gpu is not None else 0.0
    if c.peak_flops is not None and fastest and c.peak_flops > fastest * (1 + PEAK_ROUNDING):
        # a declared peak above every tensor-core peak of the catalog's GPU is compute the hardware does not
        # have (fp8 declared at 600 TFLOP/s on an A100, whose fastest mode is bf16 at 312): refused
        best = max(BYTES_PER_ELEMENT, key=lambda p: gpu.peak_flops(p) or 0.0)
        out.append(("cluster.peak_flops", f"above the catalog's {gpu.name} at its fastest tensor-core mode "
                    f"({best}: {fastest:.4g} FLOP/s): a GPU cannot compute faster than its hardware; leave it out "
                    "or name the GPU you have", c.peak_flops))
    if gpu is not None and c.peak_flops is None and gpu.peak_flops(w.model.precision) is None:
        modes = [p for p in ("fp8", "bf16", "fp16", "fp32") if gpu.peak_flops(p)]
        out.append(("model.precision", f"the catalog's {gpu.name} has no {w.model.precision} tensor-core peak "
                    f"(it has {', '.join(modes)}): choose one of those or declare cluster.peak_flops",
                    w.model.precision))
    return out


def nodes_filled(gpus: Any, gpus_per_node: int) -> Any:
    """Nodes `gpus` GPUs fill at `gpus_per_node` a node: ceil(gpus / gpus_per_node), for an int or a numpy
    array of counts. THE rounding of a bare count to its nodes (`Workload.nodes`, advisor.placement's
    bare `N`, init's calibration counts)."""
    return -(-gpus // gpus_per_node)


def splits_evenly(gpus: int, nodes: int) -> bool:
    """Whether N GPUs over M nodes run the same number of ranks on every node: the one test of
    advisor.placement's rule (check_placement, this spec's calibration.gpus, init's calibration counts).
    Owned here with its wording (uneven_message): placement imports spec, so spec cannot import placement."""
    return gpus % nodes == 0


def uneven_message(gpus: int, nodes: int) -> str:
    """Why N GPUs cannot run over M nodes that do not divide them: the one wording of advisor.placement's rule."""
    return f"{gpus} GPUs do not split evenly over {nodes} nodes: every node must run the same number of ranks"


def _uneven_calibration_counts(w: Workload) -> list[tuple[str, str, object]]:
    """calibration.gpus over the nodes they fill (w.nodes) must split evenly, as advisor.placement.check_placement
    requires of every placement `advisor calibrate --emit` runs: 8 GPUs at 3 per node validated, and calibrate
    refused them."""
    return [(f"calibration.gpus[{i}]", uneven_message(n, w.nodes(n)), n) for i, n in enumerate(w.calibration.gpus)
            if n <= w.cluster.max_gpus and not splits_evenly(n, w.nodes(n))]


def _parallelism_problems(w: Workload) -> list[tuple[str, str, object]]:
    """Degrees that cannot run: see advisor.topology.layouts for what each degree means and costs."""
    out: list[tuple[str, str, object]] = []
    p, m, g = w.parallelism, w.model, w.cluster.gpus_per_node
    at = "parallelism."
    if m.kv_heads is not None:
        if m.heads is None:
            out.append(("model.kv_heads", "needs model.heads (grouped-query attention groups the query heads)",
                        m.kv_heads))
        elif m.heads % m.kv_heads:
            out.append(("model.kv_heads", f"must divide model.heads ({m.heads})", m.kv_heads))
    tp, pp, cp = p.tensor_parallel_degree or 1, p.pipeline_parallel_degree, p.context_parallel_degree
    for key, degree in (("tensor_parallel_degree", tp), ("pipeline_parallel_degree", pp),
                        ("context_parallel_degree", cp)):
        if degree > 1 and not m.is_transformer:
            out.append((at + key, "needs a transformer shape (model.layers, hidden, heads, seq_len)", degree))
    if tp > g and not p.tensor_parallel_across_nodes:
        out.append((at + "tensor_parallel_degree", f"exceeds cluster.gpus_per_node ({g}): "
                    "its per-layer all-reduces would "
                    "cross nodes; set parallelism.tensor_parallel_across_nodes = true to allow it", tp))
    if m.is_transformer:
        # Megatron-LM splits attention heads (and GQA's query groups) evenly over tensor-parallel ranks.
        for key, heads in (("model.heads", m.heads), ("model.kv_heads", m.kv_heads)):
            if heads is not None and heads % tp:
                out.append((at + "tensor_parallel_degree", f"must divide {key} ({heads})", tp))
        if pp * p.virtual_stages > m.layers:
            out.append((at + "pipeline_parallel_degree",
                        f"x {plural(p.virtual_stages, 'model chunk')} per GPU exceeds model.layers "
                        f"({m.layers}): every stage needs a layer", pp))
        # torchtitan's load-balanced ring attention cuts each sequence into 2 x cp chunks.
        if cp > 1 and m.seq_len % (2 * cp):
            out.append((at + "context_parallel_degree", f"2 x the degree must divide model.seq_len ({m.seq_len})", cp))
    out += _recipe_problems(w, tp)
    if p.pipeline_schedule == "1f1b" and p.pipeline_virtual_stages not in (None, 1):
        out.append((at + "pipeline_virtual_stages", "only used with pipeline_schedule = 'interleaved'",
                    p.pipeline_virtual_stages))
    if pp == 1:
        for key, unset in (("pipeline_microbatches", None), ("pipeline_schedule", "1f1b")):
            if getattr(p, key) != unset:
                out.append((at + key, "only used with pipeline_parallel_degree > 1", getattr(p, key)))
    elif p.pipeline_schedule == "interleaved" and p.pipeline_microbatches and p.pipeline_microbatches % pp:
        # Megatron-LM SC21 §2.2.2: the interleaved schedule needs micro-batches in multiples of the stages.
        out.append((at + "pipeline_microbatches", f"must be a multiple of pipeline_parallel_degree ({pp}) for the "
                    "interleaved schedule", p.pipeline_microbatches))
    if pp > 1 and p.pipeline_microbatches is not None:
        out += _microbatch_problems(w, p.pipeline_microbatches)
    out += _data_parallel_problems(w, tp * pp * cp)
    return out


def _microbatch_problems(w: Workload, micro_batches: int) -> list[tuple[str, str, object]]:
    """Pipeline micro-batches the batch cannot make: more than one data-parallel rank's samples (8 micro-batches
    of 2 samples were priced as quarter-sample micro-batches, the bubble shrinking 4x for free), or, under
    fixed-per-gpu, a count batch.micro_samples contradicts (Megatron derives one from the other)."""
    b, at = w.batch, "parallelism.pipeline_microbatches"
    most = b.per_gpu_samples if b.policy == "fixed-per-gpu" else b.global_samples
    if most is not None and micro_batches > most:
        where = "batch.per_gpu_samples" if b.policy == "fixed-per-gpu" else "batch.global_samples, all on one rank"
        return [(at, f"more micro-batches than the {plural(most, 'sample')} of a data-parallel rank ({where}): "
                 "each micro-batch holds at least one sample", micro_batches)]
    if b.policy == "fixed-per-gpu" and b.micro_samples is not None and micro_batches * b.micro_samples != most:
        return [(at, f"contradicts batch.micro_samples: {plural(most, 'sample')} per data-parallel rank in "
                 f"micro-batches of {b.micro_samples} make {-(-most // b.micro_samples)}; give one of the two",
                 micro_batches)]
    return []


def _expert_problems(w: Workload) -> list[tuple[str, str, object]]:
    """Mixture-of-experts fields that cannot describe a model or a layout: routing to more experts
    than exist, experts split over ranks that do not divide them, expert weights that are not part
    of the model (advisor.topology.layouts prices the all-to-all and the expert state)."""
    m, p, out = w.model, w.parallelism, []
    ep = p.expert_parallel_degree
    if not m.is_moe:
        for key, value in (("model.experts_per_token", m.experts_per_token), ("model.expert_params", m.expert_params),
                           ("model.moe_layers", m.moe_layers), ("parallelism.expert_parallel_degree", ep)):
            if value is not None and not (key.endswith("degree") and value == 1):
                out.append((key, "needs model.experts (a mixture-of-experts model)", value))
        return out
    if not m.is_transformer:
        return [("model.experts", "needs a transformer shape (model.layers, hidden, heads, seq_len): tokens of "
                 "model.hidden values cross the all-to-all in every MoE layer", m.experts)]
    if m.experts_per_token is None:
        out.append(("model.experts_per_token", "required with model.experts (top-k: experts per token)", None))
    elif m.experts_per_token > m.experts:
        out.append(("model.experts_per_token", f"must be at most model.experts ({m.experts})", m.experts_per_token))
    if m.expert_params is not None and m.expert_params >= m.params:
        out.append(("model.expert_params", f"must be less than model.params ({m.params:g}): attention and "
                    "embeddings are not experts", m.expert_params))
    elif m.expert_params is None and m.routed_expert_params <= 0:
        out.append(("model.expert_params", f"required: model.params ({m.params:g}) is not more than the attention "
                    f"and embedding weights the default leaves out ({m.non_expert_params_rule:g})", None))
    if m.moe_layers is not None and m.moe_layers > m.layers:
        out.append(("model.moe_layers", f"exceeds model.layers ({m.layers})", m.moe_layers))
    if m.experts % ep:
        out.append(("parallelism.expert_parallel_degree", f"must divide model.experts ({m.experts})", ep))
    elif ep > 1:
        # EP is carved out of the data-parallel ranks, GPUs / (tensor x pipeline) (Megatron-Core MoE).
        per = (p.tensor_parallel_degree or 1) * p.pipeline_parallel_degree * ep
        bad = [n for n in w.calibration.gpus if n % per]
        if per > w.cluster.max_gpus:
            out.append(("parallelism.expert_parallel_degree", f"x tensor x pipeline degrees is {per} GPUs, more "
                        f"than cluster.max_gpus ({w.cluster.max_gpus})", ep))
        elif bad:
            out.append(("parallelism.expert_parallel_degree", "must divide the data-parallel ranks (GPUs / "
                        f"(tensor x pipeline degrees)), so calibration.gpus {', '.join(map(str, bad))} cannot run: "
                        f"GPU counts must be multiples of {per}", ep))
    return out


def _recipe_problems(w: Workload, tp: int) -> list[tuple[str, str, object]]:
    """Recipe switches that the layout cannot use (strategy auto may choose any layout: none refused)."""
    p, at = w.parallelism, "parallelism."
    if p.strategy == "auto":
        return []
    out: list[tuple[str, str, object]] = []
    if tp == 1:
        for key in ("sequence_parallel", "tp_comm_overlap"):
            if getattr(p, key):
                out.append((at + key, "needs parallelism.tensor_parallel_degree > 1", getattr(p, key)))
    if p.overlap_p2p_comm and p.pipeline_schedule != "interleaved":
        out.append((at + "overlap_p2p_comm", "needs parallelism.pipeline_schedule = 'interleaved' (Megatron "
                    "overlaps pipeline sends only between virtual stages)", True))
    if p.distributed_optimizer and p.strategy == "fsdp":
        out.append((at + "distributed_optimizer", "fsdp already shards the optimizer state (and more): "
                    "leave it out, or use strategy = 'ddp' for ZeRO-1", True))
    if p.reshard_after_forward is not None and p.strategy == "ddp":
        out.append((at + "reshard_after_forward", "only used with strategy 'fsdp' or 'hsdp' (ddp keeps the "
                    "weights whole)", p.reshard_after_forward))
    return out


def _data_parallel_problems(w: Workload, model_parallel: int) -> list[tuple[str, str, object]]:
    """The strategy shorthand against the explicit data-parallel degrees, and the degrees' product
    against the GPU counts the spec names (torchtitan ParallelDims: all degrees multiply to the world size)."""
    p, at = w.parallelism, "parallelism."
    shard, rep = p.data_parallel_shard_degree, p.data_parallel_replicate_degree
    out: list[tuple[str, str, object]] = []
    for key, value in (("data_parallel_shard_degree", shard), ("data_parallel_replicate_degree", rep)):
        if value == 0:
            out.append((at + key, "must be -1 (the rest of the GPUs) or at least 1", value))
    if out:
        return out
    conflict = {"ddp": ("data_parallel_shard_degree", shard, "ddp does not shard weights: 1 or leave it out"),
                "fsdp": ("data_parallel_replicate_degree", rep, "fsdp shards over every data-parallel rank: 1 or leave "
                         "it out (shard in a node and replicate across nodes is strategy = 'hsdp')")}
    if p.strategy in conflict:
        key, value, message = conflict[p.strategy]
        if value not in (None, 1):
            out.append((at + key, message, value))
    if p.strategy == "auto":
        for key, value in (("data_parallel_shard_degree", shard), ("data_parallel_replicate_degree", rep)):
            if value is not None:
                out.append((at + key, "strategy 'auto' chooses the data-parallel degrees: "
                            "leave it out or name a strategy", value))
    if shard == -1 and rep == -1:
        out.append((at + "data_parallel_replicate_degree", "only one degree may be -1 (the rest)", rep))
    if out:
        return out
    fixed = model_parallel * max(shard or 1, 1) * max(rep or 1, 1)
    # Which degree takes the rest of the GPUs: a -1, else the strategy's (ddp: replicas; fsdp: shards;
    # hsdp: replicas, or shards when the replicas are given); with both given, none does.
    fills = (-1 in (shard, rep) or (shard is None and rep is None)
             or (rep is None and p.strategy != "fsdp") or (shard is None and p.strategy != "ddp"))
    named = [k for k, v in (("data_parallel_shard_degree", shard), ("data_parallel_replicate_degree", rep),
                            ("tensor_parallel_degree", p.tensor_parallel_degree if model_parallel > 1 else None))
             if v not in (None, -1)]
    if not named:
        return out
    key = named[0]
    if fixed > w.cluster.max_gpus:
        out.append((at + key,
                    f"the degrees multiply to {fixed} GPUs, more than cluster.max_gpus ({w.cluster.max_gpus})",
                    getattr(p, key)))
    bad = [n for n in w.calibration.gpus if ((n % fixed) if fills else (n != fixed))]
    if bad:
        need = f"a multiple of {fixed}" if fills else f"{fixed} (no degree is -1 to fill other counts)"
        out.append((at + key, f"the degrees multiply to {fixed} GPUs, so calibration.gpus {', '.join(map(str, bad))} "
                    f"cannot run: GPU counts must be {need}", getattr(p, key)))
    return out


def _layout_problems(w: Workload) -> list[tuple[str, str, object]]:
    """calibration.gpus the declared layout cannot split, by the one rule every command uses
    (advisor.topology.layouts.build: the checks above name the common cases by their fields; this
    catches the rest, such as an expert degree that HSDP's shard group in a node cannot hold: the
    spec validated, then every command refused every count). Asked only of a spec that is otherwise
    valid, since the layout is built from it."""
    if w.parallelism.strategy == "auto":
        return []
    from advisor.topology.layouts import build, split_rule

    gpus = w.calibration.gpus
    bad = [n for n, ok in zip(gpus, build(w, gpus).valid.tolist(), strict=True) if not ok]
    if not bad:
        return []
    return [("calibration.gpus", f"the parallel layout cannot split {', '.join(map(str, bad))} GPUs "
             f"({split_rule(w)})", bad)]


def parse_toml(path: Path) -> dict:
    """Read a TOML input through advisor's one reader (regular files only, size and depth capped);
    a syntax error names line and column."""
    return load_toml(path, "a TOML file")


def workload_from_dict(data: dict, file: str | Path = "<spec>") -> Workload:
    """Validate a parsed spec; raises InputError with one Problem per mistake."""
    file = str(file)
    try:
        workload = Workload.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, file, Workload) from None
    problems = _cross_field_problems(workload) or _layout_problems(workload)
    if problems:
        raise InputError([Problem(file, p, msg, v, v is not None) for p, msg, v in problems])
    if workload.job.tokens is not None:  # everything downstream counts samples
        job = workload.job.model_copy(update={"samples": workload.job.tokens / workload.model.seq_len})
        workload = workload.model_copy(update={"job": job})
    return workload


def load_workload(path: str | Path) -> Workload:
    """Read and validate a workload spec (TOML). Raises InputError naming file and field."""
    path = Path(path)
    data = parse_toml(path)
    if "source" in data:
        raise InputError.at(path, "source", "unknown key", data["source"])
    workload = workload_from_dict(data, path)
    return workload.model_copy(update={"source": path})


def workload_json_schema() -> dict:
    """JSON Schema of the spec, with every field's description."""
    schema = Workload.model_json_schema(mode="validation")
    schema.get("properties", {}).pop("source", None)
    schema["title"] = "advisor workload spec"
    return schema
