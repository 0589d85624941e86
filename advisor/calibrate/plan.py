"""What one calibration run at N GPUs does: batch split, proxy shape, probe sizes.

Shared by the local launcher, the worker and the emitted multi-node commands, so all three agree
on the work done at each N. Pure Python: no torch import here.

Batch policy at N (docs/formats.md: the spec; docs/model.md: the step):

- fixed-per-gpu: every GPU processes `per_gpu_samples` per optimizer step.
- Under tensor, pipeline or context parallelism "GPU" below means data-parallel rank
  (N / (tp·pp·cp) of them): the ranks of one model-parallel group share their samples.
- fixed-global: every GPU processes `global_samples // N`. When N does not divide the global batch
  the per-GPU share is rounded down; when N exceeds the global batch each GPU still needs one
  sample, so the global batch grows to N. Either way the run records the global batch it really
  used (`Run.global_batch`), so the fit uses true work per step, not the declared one.
- The per-GPU share is processed in micro-batches of `micro_samples` (gradient accumulation, one
  gradient synchronisation per optimizer step). When the share is smaller than `micro_samples`
  (fixed-global at large N) the micro-batch shrinks to the share: a GPU cannot run a micro-batch
  larger than the samples it has. A share that `micro_samples` does not divide ends with one
  smaller micro-batch.
- Capped accumulation (fixed-global only): a calibration step accumulates at most
  MAX_CALIBRATION_MICRO_BATCHES (32) micro-batches per data-parallel rank; a larger share (the whole
  global batch on one GPU, or on one tensor-parallel group) is cut to that many full micro-batches.
  Why a cap: the share grows as N shrinks, so the smallest counts ran the longest steps (a 13B job's
  1,024-sample batch on one GPU: 512 micro-batches of 2, priced at 7.2 h for the full model), yet
  the gradient is synchronised once, on the last micro-batch, so the extra micro-batches repeat the
  same forward and backward, which the model prices linearly (compute and contention per
  micro-batch, docs/model.md) and the fit reads at the batch the run records. Why 32 and not fewer:
  every count below the cut runs the same work per GPU, so those counts stop varying the per-GPU
  batch that separates compute from the per-step constants and communication in a strong-scaling
  fit. At 8, llm70b's 8, 16 and 32 GPUs all ran 128 samples per tensor-parallel group, and
  plan-calibration's promised 90% half-width at 4,096 GPUs widened to 3.22 from the uncut runs'
  2.03. At 32 llm70b's 8 GPUs keep their 32 micro-batches and tiny-cpu's 1 rank its 8 (bert-large's
  65,536-sample LAMB batch is cut below 32 GPUs, 1,024 micro-batches at 1), and a cut step is still
  at most 32 micro-batches long (the 13B job's 1-GPU run: 64 samples, 5.7 s a step on its 2-layer
  proxy, 90.6 s uncut). Under pipeline parallelism with declared `pipeline_microbatches` the cut
  share stays a multiple of them (the schedule splits it evenly). fixed-per-gpu is not cut: its
  share is the job's own at every N, so no count runs a longer step than the job does. The run
  records the batch it really used (`global_batch`, as for the rounding above) and the fit reads it;
  the planner (advisor.calibrate.design) prices this same plan, so it never prices a batch the
  worker does not run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.setup_record import UNSET
from advisor.spec import Workload
from advisor.topology.memory import DEFAULT_VOCAB

MIB = 1 << 20

#: Largest collective probe message on CPU (gloo over loopback moves ~1 GB/s on the development
#: machine, so 64 MiB is ~0.1 s per op) and on CUDA (1 GiB: where NVLink/IB busbw has plateaued in
#: nccl-tests all_reduce_perf sweeps).
PROBE_CAP_BYTES = {"cpu": 64 * MIB, "cuda": 1024 * MIB}

#: Smallest probe message: 1 MiB (issue 3; below it latency dominates and the step's gradient
#: buckets - DDP's default bucket_cap_mb = 25 - are never that small).
PROBE_MIN_BYTES = MIB



#: Most micro-batches one calibration step accumulates per data-parallel rank under fixed-global
#: (module docstring: capped accumulation).
MAX_CALIBRATION_MICRO_BATCHES = 32


@dataclass(frozen=True)
class BatchPlan:
    """Per-GPU work of one optimizer step at `gpus` GPUs. `share` is the per-rank batch the policy
    gives at this N before the calibration's accumulation cap; `per_gpu` is what the worker runs."""

    gpus: int
    per_gpu: int
    micro_batches: tuple[int, ...]
    global_batch: int
    share: int = 0

    @property
    def micro(self) -> int:
        return self.micro_batches[0]

    @property
    def capped(self) -> bool:
        """The calibration runs fewer samples per rank than the policy's share (capped accumulation)."""
        return self.per_gpu < self.share


def accumulation_cap(w: Workload, micro: int) -> int:
    """Most samples per data-parallel rank one calibration step runs under fixed-global: full
    micro-batches of `micro`, MAX_CALIBRATION_MICRO_BATCHES of them, kept a multiple of declared
    pipeline micro-batches (module docstring)."""
    cap = MAX_CALIBRATION_MICRO_BATCHES * micro
    pipeline = w.parallelism.pipeline_microbatches if w.parallelism.pipeline_parallel_degree > 1 else None
    if pipeline:
        cap = max(pipeline, cap // pipeline * pipeline)
    return cap


def batch_plan(w: Workload, gpus: int) -> BatchPlan:
    """Split the workload's batch over `gpus` GPUs as a calibration step runs it (module docstring):
    the one rule the worker runs, the session checks collected results against and plan-calibration
    prices."""
    dp = max(1, gpus // w.model_parallel_size())  # data-parallel ranks: TP/PP/CP ranks share samples
    if w.batch.policy == "fixed-global":
        share = max(1, w.batch.global_samples // dp)
    else:
        share = w.batch.per_gpu_samples
    micro = min(w.batch.micro_samples or share, share)
    per_gpu = min(share, accumulation_cap(w, micro)) if w.batch.policy == "fixed-global" else share
    full, rest = divmod(per_gpu, micro)
    micro_batches = (micro,) * full + ((rest,) if rest else ())
    return BatchPlan(gpus=gpus, per_gpu=per_gpu, micro_batches=micro_batches, global_batch=per_gpu * dp,
                     share=share)


@dataclass(frozen=True)
class ProxyShape:
    """The calibration proxy: a GPT-style transformer, or for specs without a transformer shape an
    MLP with the declared parameter count whose FLOPs per sample match `flops_per_sample`."""

    kind: str  # "transformer" | "mlp"
    layers: int
    hidden: int
    heads: int
    seq_len: int  # transformer: tokens per sample; mlp: rows per sample
    vocab: int
    full_layers: int


#: Square layers of the MLP proxy of a model without a transformer shape (`proxy_shape`).
MLP_PROXY_LAYERS = 4


def proxy_shape(w: Workload) -> ProxyShape:
    m = w.model
    if m.is_transformer:
        layers = w.calibration.proxy_layers or m.layers
        return ProxyShape("transformer", layers, m.hidden, m.heads, m.seq_len, m.vocab or DEFAULT_VOCAB, m.layers)
    # MLP proxy: 4 square layers of width h hold P parameters (4·h² ≈ P); a sample is T rows of
    # width h so that training FLOPs per sample, 6·P·T (forward 2·P·T, backward 4·P·T), match the
    # declared flops_per_sample.
    full_layers = MLP_PROXY_LAYERS
    hidden = max(8, round(math.sqrt(m.params / full_layers)))
    rows = max(1, round(m.training_flops_per_sample / (6 * full_layers * hidden * hidden)))
    layers = min(w.calibration.proxy_layers or full_layers, full_layers)
    return ProxyShape("mlp", layers, hidden, 1, rows, 0, full_layers)


def params_of_transformer(layers: int, hidden: int, seq_len: int, vocab: int) -> int:
    """Parameters of the proxy transformer (advisor.calibrate.proxy): embeddings + blocks + final norm (head tied)."""
    return vocab * hidden + seq_len * hidden + layers * (12 * hidden * hidden + 13 * hidden) + 2 * hidden


def proxy_workload(w: Workload) -> Workload:
    """The workload as `advisor calibrate` runs it, for pricing its runs with the scaling model's own
    design (advisor.calibrate.design), and for fitting its runs (advisor.measurements.measured_workload): `w`
    itself at full length (mean_seq_len unset) when the proxy has every layer (the calibration
    stands for the declared model), else `w` with [model] replaced by the proxy that is built
    (proxy_shape): a dense GPT-style transformer of `layers` blocks with full K/V heads and its own
    parameter count (params_of_transformer: the tied embedding and head are there at any depth, so a
    1-layer proxy of a 70B model holds 1.9B, not 70.6B / 80), or the MLP's `layers` of its square
    layers (params and FLOPs per sample in that share). Built with model_copy, unvalidated: the
    spec's cross-checks (pipeline stages against layers, MoE fields) concern the declared model."""
    shape = proxy_shape(w)
    m = w.model
    if shape.layers >= shape.full_layers:
        # every layer: the declared model, but at full length (the proxy feeds seq_len tokens a sample)
        return w if m.mean_seq_len is None else w.model_copy(update={"model": m.model_copy(
            update={"mean_seq_len": None})})
    if shape.kind == "transformer":
        update = {"layers": shape.layers, "params": params_of_transformer(shape.layers, shape.hidden, shape.seq_len,
                                                                          shape.vocab),
                  "vocab": shape.vocab, "kv_heads": None, "flops_per_sample": None, "experts": None,
                  "experts_per_token": None, "expert_params": None, "moe_layers": None, "mean_seq_len": None}
    else:
        share = shape.layers / shape.full_layers
        update = {"params": m.params * share, "flops_per_sample": m.training_flops_per_sample * share}
    return w.model_copy(update={"model": m.model_copy(update=update)})


def probe_sizes(gradient_bytes: float, device: str, gpus: int) -> list[int]:
    """Message sizes (bytes) for the collective probes: at least 4, geometric from 1 MiB to the
    full gradient size capped per device (PROBE_CAP_BYTES), each a multiple of 4·gpus bytes so
    reduce_scatter and all_gather split it evenly into fp32 elements."""
    top = min(max(float(gradient_bytes), 8 * MIB), PROBE_CAP_BYTES[device])
    count = max(4, math.ceil(math.log(top / PROBE_MIN_BYTES, 4)) + 1)
    unit = 4 * gpus
    sizes = []
    for i in range(count):
        raw = PROBE_MIN_BYTES * (top / PROBE_MIN_BYTES) ** (i / (count - 1))
        sizes.append(max(unit, int(raw) // unit * unit))
    return sorted(set(sizes))


#: Spec fields that change what one calibration step measures; `measurement_setup` records them in
#: the calibration file, and `--resume`/`--collect` refuse a spec that differs in any. Left out on
#: purpose: job length, tiers, cluster bandwidths and limits, gradient_noise_scale (they change the
#: plan, not a step), and calibration.gpus/steps/warmup (how many, not what, is measured).
SETUP_SECTIONS = ("model", "parallelism")
SETUP_FIELDS = ("batch.policy", "batch.global_samples", "batch.per_gpu_samples", "batch.micro_samples",
                "calibration.proxy_layers")


#: Spec fields the proxy does not run: it feeds every sample at model.seq_len whatever mean length the
#: job computes (advisor.measurements.measured_workload), so changing them keeps the measurement.
NOT_RUN_BY_PROXY = ("model.mean_seq_len",)


def measurement_setup(w: Workload, device: str) -> dict:
    """What defines a measurement, as flat `section.field` keys (TOML-writable): every model and
    parallelism field the proxy runs (not `NOT_RUN_BY_PROXY`), the batch and the proxy depth, and the
    device kind; unset fields as UNSET."""
    setup: dict = {"device": device}
    for section in SETUP_SECTIONS:
        for key, value in getattr(w, section).model_dump().items():
            if f"{section}.{key}" not in NOT_RUN_BY_PROXY:
                setup[f"{section}.{key}"] = value
    for dotted in SETUP_FIELDS:
        section, key = dotted.split(".")
        setup[dotted] = getattr(getattr(w, section), key)
    scalar = (bool, int, float, str)
    return {k: UNSET if v is None else v for k, v in setup.items() if v is None or isinstance(v, scalar)}


