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



@dataclass(frozen=True)
class BatchPlan:
    """Per-GPU work of one optimizer step at `gpus` GPUs."""

    gpus: int
    per_gpu: int
    micro_batches: tuple[int, ...]
    global_batch: int

    @property
    def micro(self) -> int:
        return self.micro_batches[0]


def batch_plan(w: Workload, gpus: int) -> BatchPlan:
    """Split the workload's batch over `gpus` GPUs (see module docstring for the rules)."""
    dp = max(1, gpus // w.model_parallel_size())  # data-parallel ranks: TP/PP/CP ranks share samples
    if w.batch.policy == "fixed-global":
        per_gpu = max(1, w.batch.global_samples // dp)
    else:
        per_gpu = w.batch.per_gpu_samples
    micro = min(w.batch.micro_samples or per_gpu, per_gpu)
    full, rest = divmod(per_gpu, micro)
    micro_batches = (micro,) * full + ((rest,) if rest else ())
    return BatchPlan(gpus=gpus, per_gpu=per_gpu, micro_batches=micro_batches, global_batch=per_gpu * dp)


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


def proxy_shape(w: Workload) -> ProxyShape:
    m = w.model
    if m.is_transformer:
        layers = w.calibration.proxy_layers or m.layers
        return ProxyShape("transformer", layers, m.hidden, m.heads, m.seq_len, m.vocab or DEFAULT_VOCAB, m.layers)
    # MLP proxy: 4 square layers of width h hold P parameters (4·h² ≈ P); a sample is T rows of
    # width h so that training FLOPs per sample, 6·P·T (forward 2·P·T, backward 4·P·T), match the
    # declared flops_per_sample.
    full_layers = 4
    hidden = max(8, round(math.sqrt(m.params / full_layers)))
    rows = max(1, round(m.training_flops_per_sample / (6 * full_layers * hidden * hidden)))
    layers = min(w.calibration.proxy_layers or full_layers, full_layers)
    return ProxyShape("mlp", layers, hidden, 1, rows, 0, full_layers)


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
#: job computes (advisor.measurements.Measurements.full_length), so changing them keeps the measurement.
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


