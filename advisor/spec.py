"""The workload spec: what is trained, how it is batched and sharded, on what cluster, at what prices.

A spec is a TOML file (contract: DESIGN.md §2). `load_workload(path)` parses and validates it
into a `Workload`; every problem becomes one line `FILE: dotted.path: message (got VALUE)` in an
`InputError`. Quantities accept unit strings (see `advisor.units`). Field docstrings become the
descriptions in `advisor schema`.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from advisor.catalog import find_gpu
from advisor.errors import InputError, Problem
from advisor.units import parse_bandwidth, parse_count, parse_duration
from advisor.validation import validation_error

Count = Annotated[float, BeforeValidator(parse_count)]
Bandwidth = Annotated[float, BeforeValidator(parse_bandwidth)]
Duration = Annotated[float, BeforeValidator(parse_duration)]

#: Bytes per gradient element for each compute precision (mixed-precision training reduces
#: gradients in the compute dtype; PyTorch FSDP MixedPrecisionPolicy(reduce_dtype) default).
BYTES_PER_ELEMENT = {"bf16": 2, "fp16": 2, "fp32": 4}

#: Largest GPU count a spec may ask about: the recommendation sweep is vectorised over every
#: count up to max_gpus, and 2^20 keeps that sweep under a second.
MAX_GPUS_LIMIT = 2**20

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True, frozen=True
    )


class ModelSpec(_Section):
    params: Annotated[Count, Field(gt=0)]
    """Trainable parameters, e.g. "6.7B"."""
    layers: Optional[Annotated[int, Field(gt=0)]] = None
    """Transformer layers. With hidden, heads and seq_len: builds the calibration proxy and adds the attention FLOPs."""
    hidden: Optional[Annotated[int, Field(gt=0)]] = None
    """Transformer hidden size (model width)."""
    heads: Optional[Annotated[int, Field(gt=0)]] = None
    """Attention heads; must divide hidden."""
    seq_len: Optional[Annotated[int, Field(gt=0)]] = None
    """Tokens per sample."""
    vocab: Optional[Annotated[int, Field(gt=0)]] = None
    """Vocabulary size of the calibration proxy's embedding (default 32000)."""
    precision: Literal["bf16", "fp16", "fp32"] = "bf16"
    """Compute dtype; also sets gradient bytes (bf16/fp16: 2, fp32: 4)."""
    flops_per_sample: Optional[Annotated[float, Field(gt=0)]] = None
    """Training FLOPs per sample (forward + backward). Required without a transformer shape (a CNN, a recommender)."""

    @property
    def is_transformer(self) -> bool:
        return None not in (self.layers, self.hidden, self.heads, self.seq_len)

    @property
    def bytes_per_element(self) -> int:
        return BYTES_PER_ELEMENT[self.precision]

    @property
    def gradient_bytes(self) -> float:
        """Bytes of one full gradient (params x bytes per element)."""
        return self.params * self.bytes_per_element

    @property
    def training_flops_per_sample(self) -> float:
        """Forward + backward FLOPs per sample.

        Declared value if given, else the PaLM / nanoGPT estimate per token, 6·P + 12·L·H·T
        (Chowdhery et al. 2022, App. B; karpathy/nanoGPT `estimate_mfu`), times T tokens.
        """
        if self.flops_per_sample is not None:
            return self.flops_per_sample
        assert self.is_transformer, "validated: flops_per_sample or a transformer shape"
        per_token = 6 * self.params + 12 * self.layers * self.hidden * self.seq_len
        return per_token * self.seq_len


class BatchSpec(_Section):
    policy: Literal["fixed-global", "fixed-per-gpu"]
    """fixed-global: strong scaling (global batch fixed, per-GPU share shrinks); fixed-per-gpu: weak scaling."""
    global_samples: Optional[Annotated[int, Field(gt=0)]] = None
    """Samples per optimizer step across all GPUs; required when policy is fixed-global."""
    per_gpu_samples: Optional[Annotated[int, Field(gt=0)]] = None
    """Samples per optimizer step on each GPU; required when policy is fixed-per-gpu."""
    micro_samples: Optional[Annotated[int, Field(gt=0)]] = None
    """Per-GPU micro-batch; gradient accumulation steps follow from it (default: no accumulation)."""
    gradient_noise_scale: Optional[Annotated[float, Field(gt=0)]] = None
    """Gradient noise scale B_noise in samples (McCandlish et al. 2018): steps grow as S_min·(1 + B_noise/B)."""


class ParallelismSpec(_Section):
    strategy: Literal["ddp", "fsdp"]
    """ddp: replicated weights, one gradient all-reduce per step; fsdp: sharded, all-gather x2 + reduce-scatter."""


class ClusterSpec(_Section):
    gpu: Annotated[str, Field(min_length=1)]
    """GPU model, free text; a catalog entry (`advisor gpus`) supplies peak FLOP/s for MFU and defaults."""
    gpus_per_node: Annotated[int, Field(gt=0)] = 8
    """GPUs in one node (one NVLink/NVSwitch domain)."""
    max_gpus: Annotated[int, Field(gt=0, le=MAX_GPUS_LIMIT)]
    """Largest GPU count to consider."""
    intra_node_bandwidth: Optional[Annotated[Bandwidth, Field(gt=0)]] = None
    """Per-GPU one-direction bandwidth inside a node, e.g. "450 GB/s" (default: the catalog's)."""
    intra_node_latency: Annotated[Duration, Field(ge=0)] = 3e-6
    """Per-hop latency inside a node (default 3 us: order of NCCL's NVLink base latency, src/graph/tuning.cc)."""
    inter_node_bandwidth: Annotated[Bandwidth, Field(gt=0)]
    """Per-node bandwidth between nodes, all NICs together, e.g. "3200 Gbit/s" (8 x 400 Gbit/s)."""
    inter_node_latency: Annotated[Duration, Field(ge=0)] = 10e-6
    """Per-hop latency between nodes (default 10 us: order of NCCL's network base latency)."""
    peak_flops: Optional[Annotated[float, Field(gt=0)]] = None
    """Peak dense FLOP/s per GPU at the spec's precision, for MFU (default: the catalog's)."""


class JobSpec(_Section):
    samples: Optional[Annotated[Count, Field(gt=0)]] = None
    """Total training samples, e.g. "250M"."""
    steps: Optional[Annotated[Count, Field(gt=0)]] = None
    """Total optimizer steps (instead of samples)."""
    tokens: Optional[Annotated[Count, Field(gt=0)]] = None
    """Total training tokens, e.g. "2T" (instead of samples; needs model.seq_len): samples = tokens / seq_len."""


class Tier(_Section):
    name: Annotated[str, Field(min_length=1)]
    """Billing tier name, unique within the spec (on-demand, spot, reserved-1mo, ...)."""
    usd_per_gpu_hour: Annotated[float, Field(ge=0)]
    """Price per GPU-hour in USD."""
    preemptions_per_node_hour: Annotated[float, Field(ge=0)] = 0.0
    """Spot: expected preemptions per node per hour; any node lost stops a synchronous job."""
    restart: Annotated[Duration, Field(ge=0)] = 0.0
    """Spot: time from a preemption to training again."""
    checkpoint: Annotated[Duration, Field(ge=0)] = 0.0
    """Spot: time to write one checkpoint."""
    min_hours: Annotated[float, Field(ge=0)] = 0.0
    """Reserved: billed for at least this many hours."""
    max_gpus: Optional[Annotated[int, Field(gt=0)]] = None
    """Most GPUs available on this tier."""


class CalibrationSpec(_Section):
    gpus: Annotated[list[Annotated[int, Field(gt=0)]], Field(min_length=1)] = [1, 2, 4, 8, 16]
    """GPU counts to calibrate at."""
    warmup_steps: Annotated[int, Field(ge=0)] = 3
    """Untimed steps before timing."""
    steps: Annotated[int, Field(gt=0)] = 10
    """Timed optimizer steps per GPU count."""
    proxy_layers: Optional[Annotated[int, Field(gt=0)]] = None
    """Layers of the calibration proxy when the full model does not fit (default: all)."""


class Workload(_Section):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=64)]
    """Workload name: lower-case letters, digits, '-' and '_'; used in file names."""
    description: str = ""
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
    source: Optional[Path] = Field(default=None, exclude=True)

    def global_batch(self, gpus: Any) -> Any:
        """Samples per optimizer step at `gpus` GPUs (scalar or numpy array)."""
        if self.batch.policy == "fixed-global":
            return self.batch.global_samples + 0 * gpus
        return self.batch.per_gpu_samples * gpus

    def per_gpu_batch(self, gpus: Any) -> Any:
        """Samples per optimizer step on one GPU (may be fractional for fixed-global at large N)."""
        if self.batch.policy == "fixed-global":
            return self.batch.global_samples / gpus
        return self.batch.per_gpu_samples + 0 * gpus

    @property
    def intra_node_bandwidth(self) -> float:
        """Declared per-GPU intra-node bandwidth, else the catalog's for this GPU (validated)."""
        if self.cluster.intra_node_bandwidth is not None:
            return self.cluster.intra_node_bandwidth
        return find_gpu(self.cluster.gpu).intra_node_bandwidth

    @property
    def peak_flops(self) -> Optional[float]:
        """Peak dense FLOP/s per GPU at the spec's precision: declared, else catalog, else None (no MFU)."""
        if self.cluster.peak_flops is not None:
            return self.cluster.peak_flops
        gpu = find_gpu(self.cluster.gpu)
        return gpu.peak_flops(self.model.precision) if gpu else None

    def nodes(self, gpus: Any) -> Any:
        """Nodes needed for `gpus` GPUs when nodes are filled: ceil(gpus / gpus_per_node)."""
        return -(-gpus // self.cluster.gpus_per_node)


def _cross_field_problems(w: Workload) -> list[tuple[str, str, object]]:
    """Checks that span fields: (dotted path, message, offending value)."""
    out: list[tuple[str, str, object]] = []
    m, b = w.model, w.batch
    shape = {"layers": m.layers, "hidden": m.hidden, "heads": m.heads, "seq_len": m.seq_len}
    given = [k for k, v in shape.items() if v is not None]
    if given and len(given) < len(shape):
        for k in shape:
            if shape[k] is None:
                out.append((f"model.{k}", f"required with {', '.join(given)} (a transformer shape needs layers, hidden, heads and seq_len)", None))
    if m.hidden is not None and m.heads is not None and m.hidden % m.heads:
        out.append(("model.heads", f"must divide model.hidden ({m.hidden})", m.heads))
    if not given and m.flops_per_sample is None:
        out.append(("model.flops_per_sample", "required when no transformer shape (layers, hidden, heads, seq_len) is given", None))

    # Each policy needs its own batch size (which the micro-batch must divide) and ignores the other's.
    policies = {"fixed-global": "global_samples", "fixed-per-gpu": "per_gpu_samples"}
    for policy, key in sorted(policies.items(), key=lambda item: item[0] != b.policy):
        size = getattr(b, key)
        if policy == b.policy and size is None:
            out.append((f"batch.{key}", f"required when batch.policy is '{policy}'", None))
        elif policy == b.policy and b.micro_samples is not None and size % b.micro_samples:
            out.append(("batch.micro_samples", f"must divide batch.{key} ({size})", b.micro_samples))
        elif policy != b.policy and size is not None:
            out.append((f"batch.{key}", f"only used when batch.policy is '{policy}'", size))

    if w.cluster.intra_node_bandwidth is None:
        gpu = find_gpu(w.cluster.gpu)
        if gpu is None or gpu.intra_node_bandwidth is None:
            out.append(("cluster.intra_node_bandwidth", f"required: GPU {w.cluster.gpu!r} is not in the catalog (advisor gpus)", None))

    if sum(x is not None for x in (w.job.samples, w.job.steps, w.job.tokens)) != 1:
        out.append(("job", "give exactly one of job.samples, job.steps or job.tokens", None))
    elif w.job.tokens is not None and m.seq_len is None:
        out.append(("job.tokens", "needs model.seq_len (tokens per sample) to count samples", w.job.tokens))

    seen: set[str] = set()
    for i, t in enumerate(w.tiers):
        if t.name in seen:
            out.append((f"tiers[{i}].name", "duplicate tier name", t.name))
        seen.add(t.name)

    for i, n in enumerate(w.calibration.gpus):
        if n > w.cluster.max_gpus:
            out.append((f"calibration.gpus[{i}]", f"exceeds cluster.max_gpus ({w.cluster.max_gpus})", n))
    if len(set(w.calibration.gpus)) != len(w.calibration.gpus):
        out.append(("calibration.gpus", "counts must be unique", w.calibration.gpus))
    if w.calibration.proxy_layers is not None and m.layers is not None and w.calibration.proxy_layers > m.layers:
        out.append(("calibration.proxy_layers", f"exceeds model.layers ({m.layers})", w.calibration.proxy_layers))
    return out


def parse_toml(path: Path) -> dict:
    """Read a TOML file; a syntax error names line and column."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError.at(path, "", "no such file") from None
    except IsADirectoryError:
        raise InputError.at(path, "", "is a directory, expected a TOML file") from None
    except OSError as exc:
        raise InputError.at(path, "", f"cannot read: {exc.strerror}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError.at(path, "", "not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        where = f"line {m.group(1)}, column {m.group(2)}" if m else "end of file"
        what = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", msg)
        raise InputError.at(path, "", f"{where}: malformed TOML: {what}") from None


def workload_from_dict(data: dict, file: str | Path = "<spec>") -> Workload:
    """Validate a parsed spec; raises InputError with one Problem per mistake."""
    file = str(file)
    try:
        workload = Workload.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, file, Workload) from None
    problems = _cross_field_problems(workload)
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
