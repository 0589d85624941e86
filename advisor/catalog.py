"""The GPU catalog (advisor/data/gpus.toml): peak FLOP/s, memory and NVLink bandwidth per model.

Data, not code: every number carries its source in the TOML file. Used for MFU and for defaults
that a spec may omit (intra-node bandwidth, peak FLOP/s).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from advisor.units import parse_bandwidth

#: A declared cluster.gpu_memory may exceed the catalog GPU's by this factor, not more: a name covers
#: builds of more memory (llm7b's "H100-SXM" cards are Grand Teton's 96 GB HBM2e, 1.2x the catalog's 80;
#: A100 40 -> 80 GB, 2x, is the widest family in the catalog), but "1 TB" on an H100 fits plans no H100 holds.
#: advisor.spec bounds the declaration by it and advisor.topology.memory a measured peak.
MEMORY_VARIANT_FACTOR = 2.0

#: Which catalog column gives the peak for each compute precision. fp32 training on tensor-core
#: GPUs runs matmuls in TF32 by default in most frameworks' mixed setups; we report against TF32
#: where the GPU has it, else plain FP32. fp8 is the dense FP8 tensor-core peak (Transformer Engine /
#: torchao Float8 run the matmuls in FP8; the catalog has it from Hopper, Ada and CDNA 3 on).
_PEAK_COLUMN = {
    "fp8": ("peak_fp8_flops",),
    "bf16": ("peak_bf16_flops",),
    "fp16": ("peak_fp16_flops",),
    "fp32": ("peak_tf32_flops", "peak_fp32_flops"),
}


@dataclass(frozen=True)
class GPU:
    name: str
    aliases: tuple[str, ...]
    memory_bytes: float
    peaks: dict
    intra_node_bandwidth: float | None
    source: str
    has_tensor_cores: bool = True
    """False for GPUs built without tensor or matrix cores (Pascal, Kepler): every peak is a CUDA-core one."""
    fastest_intra_node_bandwidth: float | None = None
    """The fastest per-GPU one-direction link any build of the GPU has, where it beats the usual build's
    `intra_node_bandwidth` (a PCIe card's NVLink bridge to its pair); None: that one."""

    @property
    def link_ceiling(self) -> float | None:
        """Per-GPU one-direction line rate no build of this GPU exceeds (advisor.spec checks a declared
        cluster.intra_node_bandwidth against it)."""
        rates = [r for r in (self.intra_node_bandwidth, self.fastest_intra_node_bandwidth) if r is not None]
        return max(rates) if rates else None

    def peak_flops(self, precision: str) -> float | None:
        """Peak dense FLOP/s at a compute precision, or None when the GPU has no such mode."""
        for column in _PEAK_COLUMN[precision]:
            if self.peaks.get(column):
                return float(self.peaks[column])
        return None

    def peak_column(self, precision: str) -> str | None:
        """The catalog column `peak_flops(precision)` reads (fp32: TF32 where the GPU has it), or None."""
        return next((c for c in _PEAK_COLUMN[precision] if self.peaks.get(c)), None)

    def tensor_cores(self, precision: str) -> bool:
        """Whether the peak at `precision` is a tensor-core (matrix-core) peak. Not for plain FP32 (the
        "single precision" figure every datasheet gives is the CUDA cores', Volta's and Turing's tensor
        cores take fp16 only: NVIDIA Tesla V100 GPU architecture whitepaper WP-08608-001, "Tensor Cores"),
        nor on a GPU built without them (`tensor_cores = false`: Pascal, Kepler). A CUDA-core peak is 8x
        lower and far easier to approach: NVIDIA's Transformer-XL Large on one DGX-2H reaches ~58% of the
        V100's 15.7 TFLOP/s in fp32 and ~20% of its 125 in fp16 (benchmarks/data/transformerxl-*), which
        the compute prior conditions on (`priors.mfu_features`)."""
        column = self.peak_column(precision)
        return column is not None and column != "peak_fp32_flops" and self.has_tensor_cores


#: Vendor words that nvidia-smi / rocm-smi put before the model ("NVIDIA H100 80GB HBM3", "Tesla T4",
#: "AMD Instinct MI300X"): a name matches with or without them.
_VENDOR_WORDS = ("nvidia", "tesla", "amd", "instinct")


def _key(name: str) -> str:
    """Case, spaces, dashes and vendor words ignored: "nvidia-h100 SXM" and "H100SXM" are one key."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    stripped = True
    while stripped:
        stripped = False
        for word in _VENDOR_WORDS:
            if key.startswith(word) and len(key) > len(word):
                key, stripped = key[len(word):], True
    return key


@lru_cache(maxsize=1)
def gpus() -> tuple[GPU, ...]:
    """Every catalog entry, in file order."""
    text = resources.files("advisor").joinpath("data/gpus.toml").read_text(encoding="utf-8")
    entries = tomllib.loads(text)["gpu"]
    return tuple(
        GPU(
            name=e["name"],
            aliases=tuple(e.get("aliases", ())),
            memory_bytes=float(e["memory_bytes"]),
            peaks={k: v for k, v in e.items() if k.startswith("peak_")},
            intra_node_bandwidth=parse_bandwidth(e["intra_node_bandwidth"]) if "intra_node_bandwidth" in e else None,
            source=e["source"],
            has_tensor_cores=bool(e.get("tensor_cores", True)),
            fastest_intra_node_bandwidth=(parse_bandwidth(e["fastest_intra_node_bandwidth"])
                                          if "fastest_intra_node_bandwidth" in e else None),
        )
        for e in entries
    )


@lru_cache(maxsize=1)
def _by_key() -> dict[str, GPU]:
    return {key: gpu for gpu in gpus() for key in (_key(gpu.name), *(_key(a) for a in gpu.aliases))}


def find_gpu(name: str) -> GPU | None:
    """The catalog entry whose name or alias matches `name` (case, punctuation and vendor words ignored)."""
    return _by_key().get(_key(name))


def suggest_gpus(name: str, limit: int = 3) -> list[str]:
    """Catalog names closest to an unknown `name` (difflib over every name and alias), best first."""
    from difflib import get_close_matches

    keys = _by_key()
    close = get_close_matches(_key(name), list(keys), n=4 * limit, cutoff=0.5)
    return list(dict.fromkeys(keys[k].name for k in close))[:limit]
