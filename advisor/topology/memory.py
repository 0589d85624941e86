"""Bytes one GPU holds while training: model state plus activations, per parallel layout.

`footprint(workload, gpus, *, state_shards, tp, pp, cp)` is the total with its parts, at the degrees of
one layout: N = dp · tp · pp · cp GPUs (data, tensor, pipeline, context parallel); `state_shards` is
how many ranks share one copy of the model state (FSDP: the shard group x cp; DDP: 1). The layout
knows its degrees and asks (advisor.topology.layouts, `Layout.footprint` / `memory_bytes` / `fits`);
this module holds the formulas and `holds`, the comparison with the GPU's memory. Every argument
broadcasts over numpy arrays.

Model state (Rajbhandari et al. 2020, "ZeRO", §3.1): mixed-precision Adam keeps 16 bytes per
parameter: 2 (bf16/fp16 weights) + 2 (gradients) + 12 (fp32 master weights, momentum, variance); fp32
training keeps 4 + 4 + 8, also 16. Tensor and pipeline parallelism split the parameters (P / (tp·pp)
per GPU, Shoeybi et al. 2019; Narayanan et al. 2021); FSDP / ZeRO-3 shards all 16 bytes over the
shard group (dp_shard · cp ranks, torchtitan's "dp_shard_cp" mesh: context-parallel ranks hold the same
weights). A sharded layer is gathered before use: FSDP keeps the gathered weights of the running and
the prefetched unit plus the running unit's unsharded gradient (Zhao et al. 2023, "PyTorch FSDP",
VLDB, §3.3-3.4: one unit at a time, backward prefetch): 3 · (P / layers / tp) · bytes per element.

Activations (transformers; Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", §4, 16-bit activations): per layer and micro-batch of b samples, sequence s,
hidden h, heads a, with tensor-parallel degree t, with sequence parallelism (their eq. 4 / Table 2;
`parallelism.sequence_parallel`, on by default with TP) and without it (their eq. 2: 10 + 24/t):
  none:      s·b·h·34 / t bytes            without SP: s·b·h·(10 + 24/t)
  selective: as none
  full:      2·s·b·h / t (only each layer's input; their §4.2; without SP 2·s·b·h) plus one layer's
             "none" activations, rebuilt while its backward runs.
Model state: 16 bytes per parameter sharded by FSDP's shard group; under DDP with
`parallelism.distributed_optimizer` (ZeRO-1) the optimizer's 12 of them over the data-parallel ranks.
FSDP2 with `reshard_after_forward = false` also holds every gathered layer from forward to backward.
The paper's attention-score term, 5·a·s²·b per layer (scores, softmax and dropout mask), is not
counted: fused attention (FlashAttention, Dao et al. 2022, §3: only the softmax statistics, linear in s
memory; PyTorch's scaled_dot_product_attention picks it or the memory-efficient kernel for bf16/fp16
by default, as torchtitan, Megatron-LM and Hugging Face transformers do) never materialises them, so
"none" and "selective" keep the same bytes. Counting them would rule out every long-sequence plan
(13B at 8192 tokens: 27 GB of scores per layer and micro-batch of 2) that such jobs run every day.
Context parallelism splits the sequence: s/cp tokens per rank, the score term keeps the full key
length (s/cp · s). With pp stages a rank holds L/pp layers but, in 1F1B, its first stage keeps up to
pp micro-batches in flight (Korthikanti §4.2.3; Narayanan et al. 2021), so up to L layers' worth
(fewer when a step has fewer than pp micro-batches).
The output layer and cross entropy keep 4·s·b·v/t bytes of fp32 logits (Korthikanti §4.3, vocabulary
v; `model.vocab`, default 32000 as for the proxy), on the last stage. fp32 training doubles the
activation bytes. Models without a transformer shape: activations are unknown and counted as 0 (the
footprint is then a lower bound, `activations_known` False).

Mixture of experts: the routed experts' parameters (`spec.ModelSpec.routed_expert_params`) are split
over the ep expert-parallel ranks beyond tp·pp and their 16 bytes sharded by the expert data-parallel
shard group (`expert_shards`: FSDP's shard group / ep; DDP 1), the dense parameters' as above (so DDP
holds 16·(dense + experts/ep) bytes, FSDP 16·params/N either way); FSDP gathers a layer's dense share
and its ep-th of the experts. An MoE layer keeps its MLP block's 19·s·b·h once per routed expert of a
token (`moe_linear`, Korthikanti §4.1's MLP terms).

Not counted: the CUDA context and allocator fragmentation (a few GB); a calibration's measured peak
(`measured_peaks`, applied by advisor.topology.layouts.measured_offset) carries them where one exists.
A measured run without a peak (`MeasuredFit`: a CSV row, a calibration run) bounds the footprint at its
count by the memory it ran in (advisor.topology.layouts.ran_bound; docs/model.md, "Memory").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.batch import micro_batch, per_gpu_batch
from advisor.setup_record import UNSET, setup_differences

if TYPE_CHECKING:
    import numpy as np

    from advisor.calibration_data import Calibration
    from advisor.spec import Workload

#: Vocabulary when the spec gives none (the spec's embedding parameters, the calibration proxy's
#: embedding, the logits here): Llama 2's 32,000 (Touvron et al. 2023). Here, below the spec, so that
#: the spec's own checks can build layouts without an import cycle.
DEFAULT_VOCAB = 32000

#: Bytes of model state per parameter in mixed-precision Adam training (ZeRO §3.1: 2 + 2 + 12).
STATE_BYTES_PER_PARAM = 16

#: Of those, the optimizer's: fp32 master weights, momentum and variance (ZeRO §3.1, K = 12), which
#: ZeRO stage 1 (Megatron's --use-distributed-optimizer) shards over the data-parallel ranks.
OPTIMIZER_BYTES_PER_PARAM = 12

#: Bytes per token per hidden unit one layer keeps with no recomputation, besides the attention
#: scores (Korthikanti et al. 2022, eq. 1: 34·s·b·h); fused attention stores no scores (module docstring).
ACTIVATION_LINEAR = 34

#: Of those, what tensor parallelism without sequence parallelism leaves whole on every rank: the layer
#: norms' inputs and the dropout masks (Korthikanti et al. 2022 Table 2: 10 + 24/t; with SP 34/t).
TP_UNSPLIT = 10

#: Bytes per token per hidden unit a layer keeps under full recomputation: its 16-bit input (§4.2).
FULL_RECOMPUTE_INPUT = 2

#: Bytes per logit kept for the cross entropy: fp32 (Korthikanti §4.3, 4·s·b·v).
LOGIT_BYTES = 4

#: Gathered units FSDP holds at once: running weights + prefetched weights + running gradient.
FSDP_GATHERED_UNITS = 3

#: Bytes per token per hidden unit of a layer's MLP block (Korthikanti et al. 2022 §4.1: its two linear
#: layers' inputs 2·s·b·h and 8·s·b·h, the GeLU input 8·s·b·h, the dropout mask s·b·h: 19 of the 34).
#: An MoE layer runs each token through k experts, each an MLP, so it keeps k of these (`moe_linear`).
MLP_ACTIVATION = 19


@dataclass(frozen=True)
class Footprint:
    """Bytes per GPU (numpy arrays broadcast over the counts): state, gathered FSDP units, activations."""

    state: "np.ndarray"
    gathered: "np.ndarray"
    activations: "np.ndarray"
    activations_known: bool

    @property
    def total(self) -> "np.ndarray":
        return self.state + self.gathered + self.activations


def gpu_memory_bytes(w: "Workload") -> float | None:
    """Memory per GPU: `[cluster] gpu_memory`, else the catalog's, else None (unknown: nothing is ruled out)."""
    from advisor.catalog import find_gpu

    if w.cluster.gpu_memory is not None:
        return float(w.cluster.gpu_memory)
    gpu = find_gpu(w.cluster.gpu)
    return None if gpu is None else gpu.memory_bytes


def holds(w: "Workload", memory_bytes) -> "np.ndarray":
    """Whether GPUs with `memory_bytes` each fit in GPU memory; True everywhere when it is unknown."""
    import numpy as np

    capacity = gpu_memory_bytes(w)
    memory = np.asarray(memory_bytes, dtype=float)
    return np.ones(memory.shape, dtype=bool) if capacity is None else memory <= capacity


def footprint(w: "Workload", gpus, *, state_shards, tp, pp, cp, micro_samples=None, ep=1,
              expert_shards=1) -> Footprint:
    """State, gathered units and activations per GPU at one layout's degrees (module docstring).

    `micro_samples` overrides the micro-batch per GPU (default: advisor.batch.micro_batch at the
    data-parallel size); the spec's activation_checkpoint (none/selective/full) applies. A
    mixture-of-experts model's routed experts are split over `ep` expert-parallel ranks and their
    state shared by `expert_shards` ranks (the layout's expert-data-parallel shard group).
    """
    import numpy as np

    gpus = np.asarray(gpus, dtype=float)
    model_parallel = np.asarray(tp, dtype=float) * np.asarray(pp, dtype=float)
    shard = np.asarray(state_shards, dtype=float)
    m, par = w.model, w.parallelism
    expert_parallel = model_parallel * np.asarray(ep, dtype=float)
    eshard = np.asarray(expert_shards, dtype=float)
    state = (_state_bytes(w, m.dense_params, model_parallel, shard, gpus)
             + _state_bytes(w, m.routed_expert_params, expert_parallel, eshard, gpus))
    gathered = np.zeros(np.broadcast(gpus, shard).shape)
    if m.layers:
        t = np.asarray(tp, dtype=float)
        for params, shared_by, split in ((m.dense_params, shard, 1.0), (m.routed_expert_params, eshard, ep)):
            unit = params / np.asarray(split, dtype=float) / m.layers / t * m.bytes_per_element
            # FSDP2 reshard_after_forward=False holds every layer's gathered weights from forward to backward
            held = unit * m.layers / np.asarray(pp, dtype=float) if not par.reshard else 0.0
            gathered = np.where(shared_by > 1, FSDP_GATHERED_UNITS * unit + held, 0.0) + gathered
    if micro_samples is None:
        micro_samples = micro_batch(w, gpus)  # per data-parallel rank (advisor.batch)
    micro_samples = np.asarray(micro_samples, dtype=float)
    micro_batches = np.maximum(np.ceil(per_gpu_batch(w, gpus) / micro_samples), 1.0)  # per step, per data-parallel rank
    acts = activation_bytes(w, micro_samples, tp=tp, pp=pp, cp=cp,
                            activation_checkpoint=w.parallelism.activation_checkpoint, micro_batches=micro_batches)
    state, gathered, acts = np.broadcast_arrays(state, gathered, acts + 0 * gpus)
    return Footprint(state, gathered, acts, w.model.is_transformer)


def _state_bytes(w: "Workload", params, split, shard, gpus):
    """Model state per GPU of `params` split over `split` model-parallel ranks (tp·pp, times ep for
    the routed experts) and sharded over `shard` ranks (ZeRO §3.1: 16 bytes per parameter); under DDP
    with the distributed optimizer (ZeRO-1) the optimizer's 12 of them over every data-parallel rank of
    those params, gpus / split (module docstring)."""
    par = w.parallelism
    if par.distributed_optimizer and par.strategy == "ddp":  # ZeRO-1 over the data-parallel x context-parallel ranks
        replicated = (STATE_BYTES_PER_PARAM - OPTIMIZER_BYTES_PER_PARAM) * params / split
        return replicated + OPTIMIZER_BYTES_PER_PARAM * params / gpus  # over gpus / split ranks
    return STATE_BYTES_PER_PARAM * params / split / shard


def moe_linear(w: "Workload") -> float:
    """Activation bytes per token per hidden unit a layer keeps beyond the dense 34, averaged over the
    layers: an MoE layer keeps its MLP block's 19 for each of the k experts a token visits (Korthikanti
    §4.1's MLP terms at the expert's shape; an expert is the dense layer's MLP in Mixtral and GShard),
    so (k - 1)·19 more, on model.moe_layers of model.layers. 0 for a dense model. The router's logits
    and the permuted token copies (k·s·b·h·2 bytes, under 4%) are not counted."""
    m = w.model
    if not m.is_moe:
        return 0.0
    return (m.experts_per_token - 1) * MLP_ACTIVATION * (m.moe_layers or m.layers) / m.layers


def activation_bytes(w: "Workload", micro_samples, *, tp=1, pp=1, cp=1, activation_checkpoint: str = "none",
                     micro_batches=None) -> "np.ndarray":
    """Activation bytes one GPU keeps for its micro-batches in flight (Korthikanti et al. 2022; 0 without a shape).

    `micro_batches` per step caps the micro-batches a pipeline's first stage holds (default: pp of them)."""
    import numpy as np

    b = np.asarray(micro_samples, dtype=float)
    m = w.model
    if not m.is_transformer:
        return np.zeros(b.shape)
    t, p, c = (np.asarray(x, dtype=float) for x in (tp, pp, cp))
    s_local = m.seq_len / c
    sbh = s_local * b * m.hidden
    scale = m.bytes_per_element / 2  # the paper's counts are for 16-bit activations
    # Korthikanti Table 2 without the scores: sequence parallelism splits all 34 by t; without it the
    # layer norms' and dropouts' 10 stay whole on every tensor-parallel rank (10 + 24/t), and so does a
    # layer's input kept for full recomputation
    sp = w.parallelism.sequence_parallel is not False
    linear = ACTIVATION_LINEAR + moe_linear(w)
    none = sbh * np.where(sp, linear / t, TP_UNSPLIT + (linear - TP_UNSPLIT) / t) * scale
    if activation_checkpoint in ("none", "selective"):
        per_layer, working = none, 0.0
    elif activation_checkpoint == "full":
        per_layer, working = sbh * FULL_RECOMPUTE_INPUT / np.where(sp, t, 1.0) * scale, none
    else:
        raise ValueError(f"activation_checkpoint must be none, selective or full (got {activation_checkpoint!r})")
    layers_per_stage = m.layers / p
    # 1F1B: the first stage holds pp micro-batches, or all of the step's when it has fewer
    in_flight = p if micro_batches is None else np.minimum(p, np.asarray(micro_batches, dtype=float))
    first_stage = layers_per_stage * in_flight * per_layer + working
    logits = LOGIT_BYTES * s_local * b * (m.vocab or DEFAULT_VOCAB) / t
    last_stage = layers_per_stage * per_layer + working + logits
    return np.where(p > 1, np.maximum(first_stage, last_stage), first_stage + logits)


@dataclass(frozen=True)
class MeasuredPeak:
    """A calibration run's measured peak device memory: the full model at `gpus` GPUs."""

    gpus: int
    peak_bytes: float
    micro_samples: int | None
    where: str  # for messages: the file and the device it ran on
    layout: str | None = None  # the run's parallel layout, as recorded (advisor.topology.layouts.Layout.label)


#: Spec fields, as a calibration's `[setup]` records them (advisor.calibrate.plan.measurement_setup),
#: that set a run's memory peak beyond the layout and the micro-batch (which `measured_offset`
#: re-estimates): the model's size and shape and the recomputation. A peak measured at another value of
#: any is not this job's: llm7b's 88.5 GB at seq_len 8192, kept at 4,000,000 (488x the activations),
#: let 8 GPUs "fit".
PEAK_SHAPE_FIELDS = ("model.params", "model.layers", "model.hidden", "model.heads", "model.kv_heads",
                     "model.seq_len", "model.vocab", "model.precision", "model.experts", "model.expert_params",
                     "parallelism.activation_checkpoint")


@dataclass(frozen=True)
class MeasuredFit:
    """A run of the full model at `gpus` GPUs that recorded no memory peak: it trained, so its footprint
    per GPU was at most `bound_bytes`, the memory of the device it ran on (None: the spec's GPU's). A
    bound, not a level: advisor.topology.layouts.ran_bound applies it to the counts that hold no more
    than the run did (docs/model.md, "Memory"); the memory-pressure rule (advisor.scaling) never sees it."""

    gpus: int
    global_batch: float
    micro_samples: int | None
    where: str  # for messages: the file or CSV
    layout: str | None = None  # the run's parallel layout, as recorded (None: the spec's)
    bound_bytes: float | None = None


def split_evidence(evidence) -> tuple[list[MeasuredPeak], list[MeasuredFit]]:
    """(measured peaks, runs that fit without a peak) of one memory-evidence sequence (`evidence`)."""
    items = list(evidence)
    return ([e for e in items if not isinstance(e, MeasuredFit)], [e for e in items if isinstance(e, MeasuredFit)])


def memory_evidence(model) -> list:
    """THE memory evidence a plan is sized with: a model's measured peaks (`ScalingModel.peaks`) and the
    runs it was fitted on that fit without a peak (`Measurements.fits`). Planning passes it where peaks
    go; the step-time fit reads only the peaks."""
    measurements = getattr(model, "measurements", None)
    return [*model.peaks, *(getattr(measurements, "fits", None) or [])]


def _full_model(cal: "Calibration") -> bool:
    """The calibration's runs trained the full model: published figures, or advisor calibrate's proxy
    with every layer (a proxy of fewer layers measured a smaller model)."""
    env = cal.environment or {}
    proxy, full = env.get("proxy_layers"), env.get("model_layers")
    return cal.provenance.source == "published" or (proxy is not None and proxy == full)


def measured_fits(cal: "Calibration" | None, w: "Workload") -> list[MeasuredFit]:
    """The runs of `cal` that ran the full model and whose peak is not applied as a level (none was
    recorded, or the file's peaks are not read: an imported log, `_the_job_itself`), each a bound: its
    recorded peak, else the device it ran on (`environment.device_memory_bytes`), else the spec's GPU.
    None from a proxy of fewer layers, a CPU run, or a calibration of another model shape
    (`peak_shape_changes`): their runs say nothing of this job's memory."""
    if cal is None or peak_shape_changes(cal, w):
        return []
    env = cal.environment or {}
    levels = _full_model(cal)  # its peaks are applied (measured_peaks): a run with one is a level, not a bound
    if not (levels or _the_job_itself(cal)) or cal.ran_on_cpu:
        return []
    recorded = env.get("device_memory_bytes")
    device = float(recorded) if isinstance(recorded, int | float) and not isinstance(recorded, bool) else None
    where = str(cal.path.name if cal.path else "the calibration")
    return [MeasuredFit(r.gpus, float(r.global_batch if r.global_batch is not None else w.global_batch(r.gpus)),
                        r.micro_samples, where, r.layout, float(r.peak_memory_bytes or 0) or device)
            for r in cal.runs if not (levels and r.peak_memory_bytes)]


def _the_job_itself(cal: "Calibration") -> bool:
    """A measured file that is neither advisor calibrate's (no `[setup]`, no proxy depth recorded) nor
    published: an import of the job's own logs (advisor import torchtitan), which timed the full model
    (advisor.measurements.proxy_depth reads its runs so)."""
    env = cal.environment or {}
    return cal.provenance.source == "measured" and not cal.setup and env.get("proxy_layers") is None


def peak_shape_changes(cal: "Calibration", w: "Workload") -> list[tuple[str, object, object]]:
    """(field, recorded, now) for every `PEAK_SHAPE_FIELDS` field the calibration's `[setup]` records
    at another value than `w` has; none where it records none (nothing to compare)."""
    recorded = {k: v for k, v in (cal.setup or {}).items() if k in PEAK_SHAPE_FIELDS}
    now = {}
    for key in recorded:
        section, name = key.split(".")
        value = getattr(getattr(w, section), name, None)
        now[key] = UNSET if value is None else value
    return setup_differences(recorded, now)


def measured_peaks(cal: "Calibration" | None, w: "Workload" | None = None,
                   notes: list[str] | None = None) -> list[MeasuredPeak]:
    """Peaks of the runs that trained the full model (published figures, or a calibration whose proxy
    had every layer); a proxy with fewer layers measured a smaller model, so its peak says nothing here.
    With `w`, none where the calibration recorded another model shape (`peak_shape_changes`): the plan's
    memory is then the estimate's, and one sentence saying so is appended to `notes`."""
    if cal is None:
        return []
    env = cal.environment or {}
    if w is not None:
        _check_peaks_fit_a_device(cal, w)
    if not _full_model(cal):
        return []
    device = env.get("system") or env.get("device") or "its device"
    where = f"{cal.path.name if cal.path else 'the calibration'} ({device})"
    peaks = [
        MeasuredPeak(r.gpus, float(r.peak_memory_bytes), r.micro_samples, where, r.layout)
        for r in cal.runs
        if r.peak_memory_bytes
    ]
    changed = peak_shape_changes(cal, w) if w is not None and peaks else []
    if changed:
        if notes is not None:
            said = "; ".join(f"{k} is {now}, measured at {old}" for k, old, now in changed)
            notes.append(f"{cal.path or 'the calibration'}: its measured memory peaks are not applied, the spec "
                         f"changed what they measured ({said}): memory is the estimate's")
        return []
    if w is not None:
        _check_peaks_hold_the_weights(cal, w)
    return peaks


def device_memory_ceiling(w: "Workload", environment: dict | None = None) -> tuple[float, str] | None:
    """(bytes, what) no measured peak of one device can exceed: the `device_memory_bytes` a calibration
    recorded (torch's total_memory), else the largest build of the spec's GPU (the catalog's, or the
    declared gpu_memory outside the catalog, times catalog.MEMORY_VARIANT_FACTOR: the rule that bounds
    cluster.gpu_memory); None on a CPU run or a GPU of unknown memory."""
    from advisor.catalog import MEMORY_VARIANT_FACTOR, find_gpu

    env = environment or {}
    recorded = env.get("device_memory_bytes")
    if isinstance(recorded, int | float) and not isinstance(recorded, bool) and recorded > 0:
        return float(recorded), "device memory the run recorded (environment.device_memory_bytes)"
    if str(env.get("device", "")).lower().startswith("cpu"):
        return None
    gpu = find_gpu(w.cluster.gpu)
    base, name = ((gpu.memory_bytes, f"the catalog's {gpu.name}") if gpu is not None
                  else (w.cluster.gpu_memory, "cluster.gpu_memory"))
    if not base:
        return None
    return base * MEMORY_VARIANT_FACTOR, f"{MEMORY_VARIANT_FACTOR:g}x the memory of {name}, more than any build has"


def _check_peaks_fit_a_device(cal: "Calibration", w: "Workload") -> None:
    """Refuse a measured peak above the device it ran on (`device_memory_ceiling`): 500 GiB recorded at 8
    H100s was applied as measured, and the 8 GPUs that ran left out of every plan as not fitting."""
    from advisor.errors import InputError

    ceiling = device_memory_ceiling(w, cal.environment)
    if ceiling is None:
        return
    limit, what = ceiling
    for i, run in enumerate(cal.runs):
        for key in ("peak_memory_bytes", "peak_reserved_bytes"):
            value = getattr(run, key)
            if value and value > limit:
                raise InputError.at(str(cal.path or "<calibration>"), f"runs[{i}].{key}",
                                    f"above {limit / 1e9:.4g} GB, {what}: no GPU holds more than it has; the "
                                    "number is in other units or of another device", value)


def _check_peaks_hold_the_weights(cal: "Calibration", w: "Workload") -> None:
    """Refuse a measured peak below the weights alone spread evenly over the run's GPUs (every parameter
    lives on some GPU, whatever the layout): 1,000 bytes recorded for an 8B model on 8 GPUs moved every
    count's footprint to ~1 kB and 8 GPUs of 80 GB "held" a job no count holds. Such a number is in
    other units (GiB, MB) or of another model."""
    from advisor.errors import InputError
    from advisor.units import format_count

    element = w.model.bytes_per_element
    for i, run in enumerate(cal.runs):
        least = w.model.params * element / run.gpus
        if run.peak_memory_bytes and run.peak_memory_bytes < least:
            raise InputError.at(str(cal.path or "<calibration>"), f"runs[{i}].peak_memory_bytes",
                                f"below the model's weights alone over {run.gpus} GPUs ({least:.4g} bytes: "
                                f"{format_count(w.model.params)} parameters x {element} bytes / {run.gpus}): "
                                "a peak in bytes of this model cannot be smaller", run.peak_memory_bytes)
