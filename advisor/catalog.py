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

#: Which catalog column gives the peak for each compute precision. fp32 training on tensor-core
#: GPUs runs matmuls in TF32 by default in most frameworks' mixed setups; we report against TF32
#: where the GPU has it, else plain FP32.
_PEAK_COLUMN = {
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

    def peak_flops(self, precision: str) -> float | None:
        """Peak dense FLOP/s at a compute precision, or None when the GPU has no such mode."""
        for column in _PEAK_COLUMN[precision]:
            if self.peaks.get(column):
                return float(self.peaks[column])
        return None


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


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
        )
        for e in entries
    )


def find_gpu(name: str) -> GPU | None:
    """The catalog entry whose name or alias matches `name` (case and punctuation ignored)."""
    key = _key(name)
    for gpu in gpus():
        if key in {_key(gpu.name), *(_key(a) for a in gpu.aliases)}:
            return gpu
    return None
