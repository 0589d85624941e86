"""What no prediction may claim: per-GPU throughput above what was measured, beyond the noise.

Data parallelism adds GPUs that do the same work per sample; communication only takes time away.
So at N GPUs the per-GPU throughput (samples/s/GPU) is at most the best measured at some count
n <= N, times 1 + `NOISE`, unless N runs more samples per GPU than every such count (`step_floor`);
together with the compute bound at peak (advisor.scaling.features.compute_seconds, applied beside
it in ScalingModel.step_time) this is the floor on every predicted median step (docs/model.md,
"Limits"). A fitted curve is free to bend upwards between or past the measured counts (a
superlinear CSV's fit predicted 365% efficiency at 8 GPUs); the floor is what keeps it physical.

A measurement can itself be superlinear: a larger count's per-GPU throughput above the smallest
count's by more than `NOISE`. The usual cause is the small run, not the large (a busy host, a
memory-bound or differently configured baseline; advisor.calibrate.quality says so after each
calibrated count), so the reference of speedup and efficiency becomes the count with the best
per-GPU throughput (`reference_count`) and the fit says why (`superlinear_warnings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from advisor.scaling.fitting import FitData

#: Per-GPU throughput a count may show above a measured one before it is called superlinear, and the
#: allowance of the floor on predicted steps: run-to-run noise of one measured step. The smallest
#: noise advisor.calibrate.quality assumes when comparing two runs (a run's own spread can be ~0 by
#: luck); published repeated readings differ by 1-2% (NVIDIA's 8-GPU BERT, 1.2%), the Pollux cloud's
#: by ~10%: 5% is a judgement between them.
NOISE = 0.05
#: Per-GPU batches this close count as the same work per GPU (naive_step's tolerance).
SAME_BATCH = 0.01
#: Entries of one broadcast (query x measured row) block: memory stays ~8 MB for any sweep.
BLOCK = 2**20


def superlinear_ratio(rate: float, base_rate: float, noise: float = NOISE) -> float | None:
    """rate / base_rate when it exceeds 1 + `noise` (a superlinear measurement), else None: the one
    comparison both the model's warning and advisor.calibrate.quality's make."""
    ratio = rate / base_rate
    return ratio if ratio > 1 + noise else None


@dataclass(frozen=True, kw_only=True)
class Ceiling:
    """Measured per-GPU throughput per grouped row (FitData): count, per-GPU batch and samples/s/GPU."""

    gpus: np.ndarray
    local: np.ndarray
    rate: np.ndarray
    #: per row: ran near memory capacity (advisor.scaling.evidence.memory_pressed); None: no row did
    pressed: np.ndarray | None = None

    @classmethod
    def of(cls, data: "FitData", pressed: np.ndarray | None = None) -> "Ceiling":
        ok = np.isfinite(data.step) & (data.step > 0)
        g, b, t = data.gpus[ok], data.batch[ok], data.step[ok]
        keep = None if pressed is None or not np.any(pressed) else np.asarray(pressed, bool)[ok]
        return cls(gpus=g, local=b / g, rate=b / (t * g), pressed=keep)

    def step_floor(self, gpus: np.ndarray, batch: np.ndarray, pressed_at: np.ndarray | None = None) -> np.ndarray:
        """Shortest physical step at each (N, global batch): batch / (N x best rate x (1 + NOISE)), the
        best over measured rows with count <= N, whatever their batch; 0 below the smallest measured
        count, and where this per-GPU batch exceeds every such row's (more samples per step amortise the
        per-step communication and constants: a rate no row measured). Not only rows with at least this
        per-GPU batch: MPT-13B's 8-GPU row (64 per GPU, accumulated, 0.81 samples/s/GPU) would then cap
        32-128 GPUs at 14-16 per GPU below what its 16-GPU row (10 per GPU) and they ran (0.97).

        A row that ran near memory capacity (`pressed`) caps only the placements still near capacity
        (`pressed_at`, per query; None: none is): where memory is freed its per-GPU throughput is a
        lower bound, not a ceiling (the allocator's retries slowed it, not communication)."""
        gpus, batch = np.asarray(gpus, float), np.asarray(batch, float)
        out = np.zeros(gpus.shape)
        if self.gpus.size == 0 or gpus.size == 0:
            return out
        local = batch / gpus
        step = max(1, BLOCK // self.gpus.size)
        for s in range(0, gpus.size, step):
            ok = self.gpus <= gpus[s:s + step, None]
            if self.pressed is not None:
                here = np.zeros(ok.shape[0], bool) if pressed_at is None else np.asarray(pressed_at, bool)[s:s + step]
                ok = ok & (~self.pressed[None, :] | here[:, None])
            best = np.where(ok, self.rate, 0.0).max(axis=1)
            most = np.where(ok, self.local, 0.0).max(axis=1)
            capped = (best > 0) & (local[s:s + step] <= most * (1 + SAME_BATCH))
            out[s:s + step] = np.where(capped, batch[s:s + step] / (gpus[s:s + step] * np.maximum(best, 1e-300)
                                                                    * (1 + NOISE)), 0.0)
        return out

    def _per_count(self) -> tuple[np.ndarray, np.ndarray]:
        """Median per-GPU throughput per count, of the rows with memory to spare when any has."""
        g, rate = self.gpus, self.rate
        if self.pressed is not None and not self.pressed.all():
            g, rate = g[~self.pressed], rate[~self.pressed]
        counts = np.unique(g)
        return counts, np.array([float(np.median(rate[g == c])) for c in counts])

    def reference_count(self) -> int | None:
        """The count speedup and efficiency are measured against: the smallest, unless a larger count's
        median per-GPU throughput beats it beyond NOISE; then the count with the best (None: no rows)."""
        if self.gpus.size == 0:
            return None
        counts, rates = self._per_count()
        best = int(np.argmax(rates))
        return int(counts[best]) if superlinear_ratio(rates[best], rates[0]) else int(counts[0])

    def superlinear_warnings(self) -> list[str]:
        """One line per measured count whose per-GPU throughput beats the smallest count's beyond NOISE."""
        if self.gpus.size == 0:
            return []
        counts, rates = self._per_count()
        ratios = [(int(c), superlinear_ratio(r, rates[0])) for c, r in zip(counts[1:], rates[1:], strict=True)]
        high = [(c, r) for c, r in ratios if r]
        if not high:
            return []
        ref = self.reference_count()
        listed = ", ".join(f"N={c} {r:.0%}" for c, r in high)
        return [f"superlinear measurement: per-GPU throughput of N={int(counts[0])}'s at {listed}, beyond the "
                f"{NOISE:.0%} noise (a slowed, memory-bound or differently configured N={int(counts[0])} run is "
                f"the usual cause); speedup and efficiency are against N={ref}, and no count is predicted faster "
                "per GPU than the best measured at or below it"]
