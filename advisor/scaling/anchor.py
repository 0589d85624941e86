"""The level a prediction keeps from the measurements: the fit's log residual where it was measured.

The model predicts how the step changes going up from a measured count; the level at that count is
what was measured there (docs/model.md, "The step-time equation": exp(r(N))). `Anchor` holds, per
grouped measured row, its count, its per-GPU batch and the fit's log residual, and per count whether
it ran near memory capacity; `Anchor.factor` is ScalingModel.anchoring's factor.

Within a count the residual is read at the measured per-GPU batch nearest the query's (in log2): a
count measured at two per-GPU batches the model cannot reconcile (Transformer-XL at 16 GPUs, 8 and 4
samples per GPU: +3.4% and -3.3%) keeps, for a query at 4 per GPU, the level measured at 4, not the
median of both. With one batch per count (most calibrations) it is that count's median residual.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Anchor:
    """Per grouped measured row: log2 count, log2 per-GPU batch, log residual; per count: pressed."""

    row_count: np.ndarray
    row_batch: np.ndarray
    row_residual: np.ndarray
    counts: np.ndarray  # log2 of each measured count, ascending
    pressed: np.ndarray  # that count ran near memory capacity (all its rows)

    @classmethod
    def of(cls, gpus: np.ndarray, batch: np.ndarray, in_sample: np.ndarray, pressed: np.ndarray) -> "Anchor":
        gpus = np.asarray(gpus, float)
        if gpus.size == 0:
            e = np.zeros(0)
            return cls(e, e, e, e, np.zeros(0, bool))
        counts = np.unique(gpus)
        return cls(np.log2(gpus), np.log2(np.asarray(batch, float) / gpus), np.asarray(in_sample, float),
                   np.log2(counts), np.array([bool(pressed[gpus == c].all()) for c in counts]))

    def residuals(self, count: float, per_gpu: np.ndarray | None) -> np.ndarray | float:
        """Median log residual at measured count `count` (log2) of its rows at the per-GPU batch nearest
        each of `per_gpu` (log2; None, or a batch that is not positive: all its rows)."""
        at = np.isclose(self.row_count, count)
        r = self.row_residual[at]
        if per_gpu is None:
            return float(np.median(r))
        per_gpu = np.asarray(per_gpu, float)
        gap = np.abs(self.row_batch[at][:, None] - np.where(np.isfinite(per_gpu), per_gpu, 0.0)[None, :])
        nearest = np.isclose(gap, gap.min(axis=0, keepdims=True)) | ~np.isfinite(per_gpu)[None, :]
        return np.nanmedian(np.where(nearest, r[:, None], np.nan), axis=0)

    def factor(self, gpus, batch=None, pressed_at: np.ndarray | None = None) -> np.ndarray:
        """exp of the residual at the largest measured count at or below N (the smallest's below it),
        read at the query's per-GPU batch; a count near memory capacity sets the level at itself, below
        the smallest count and at the counts still near capacity (`pressed_at`) only: above it the
        largest count with memory to spare at or below N does, else nothing (ScalingModel.anchoring)."""
        lg = np.log2(np.asarray(gpus, float))
        if self.counts.size == 0:
            return np.ones_like(lg)
        with np.errstate(divide="ignore", invalid="ignore"):  # an empty batch (0) reads every row at its count
            per_gpu = None if batch is None else np.log2(np.asarray(batch, float) / np.asarray(gpus, float))
        at = np.maximum(np.searchsorted(self.counts, lg + 1e-9, side="right") - 1, 0)
        use = self.counts[at].astype(float)
        if self.pressed.any():
            spare = self.counts[~self.pressed]
            at_spare = np.searchsorted(spare, lg + 1e-9, side="right") - 1
            exact = np.isclose(use, lg)
            still = np.zeros(lg.shape, bool) if pressed_at is None else np.asarray(pressed_at, bool)
            moved = (np.searchsorted(self.counts, lg + 1e-9, side="right") >= 1) & self.pressed[at] & ~exact & ~still
            use = np.where(moved, np.where(at_spare >= 0, spare[np.maximum(at_spare, 0)] if spare.size else np.nan,
                                           np.nan), use)
        out = np.zeros(lg.shape)
        per_gpu = None if per_gpu is None else np.broadcast_to(per_gpu, lg.shape)
        for c in np.unique(use[~np.isnan(use)]):
            here = use == c
            out[here] = self.residuals(c, None if per_gpu is None else per_gpu[here])
        return np.exp(out)
