"""Choosing a family by cross-validation, and measuring how error grows past the data.

- Leave-one-count-out: for each measured GPU count except the smallest (it anchors the baseline),
  fit on the other counts, predict the held-out runs. CV error is the mean absolute percentage
  error over held-out runs; the log residuals are the out-of-sample noise the intervals use.
- Forward CV: fit on counts <= half the largest, predict the rest. The growth of its error over
  the leave-one-out error, per doubling of N, sets how fast intervals widen past the data.

Leave-one-count-out cannot tell tree from ring hops across nodes (identical within 16 GPUs on the
Pollux traces); it does separate the physical families from Amdahl and Ernest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

from advisor.scaling.families import Coverage, Family
from advisor.scaling.fitting import FitData, fit_family

if TYPE_CHECKING:
    from advisor.spec import Workload

#: Interval widening per doubling of N past the data when forward CV is impossible (fewer than 2
#: counts at or below half the largest). An assumption, not a measurement; the fit output says so.
DEFAULT_WIDENING = 0.25


@dataclass(frozen=True)
class CrossValidation:
    family: str
    mape: Optional[float]
    """Mean absolute percentage error over held-out runs; None when fewer than 3 counts."""
    log_residuals: np.ndarray
    """log(measured / predicted) of every held-out run."""


def leave_one_count_out(family: Family, workload: "Workload", data: FitData, probes: list, coverage: Coverage,
                        init=None) -> CrossValidation:
    counts = np.unique(data.gpus)
    if counts.size < 3:
        return CrossValidation(family.name, None, np.zeros(0))
    residuals = []
    for held in counts[1:]:
        test = data.gpus == held
        fitted = fit_family(family, workload, data.take(~test), probes, coverage, init)
        pred = fitted.predict(data.gpus[test], data.nodes[test], data.batch[test])
        residuals.append(np.log(data.step[test] / np.maximum(pred, 1e-300)))
    r = np.concatenate(residuals)
    mape = float(np.mean(np.abs(np.expm1(-r))) * 100)  # |pred - y| / y = |exp(-r) - 1|
    return CrossValidation(family.name, mape, r)


def widening_per_doubling(family: Family, workload: "Workload", data: FitData, probes: list, coverage: Coverage,
                          in_sample_rms: float, init=None) -> tuple[float, bool]:
    """(κ, measured?): relative growth of the log-error RMS per doubling of N past the fitted range."""
    half = data.gpus.max() / 2
    train = data.gpus <= half
    if np.unique(data.gpus[train]).size < 2 or (~train).sum() == 0 or not in_sample_rms > 0:
        return DEFAULT_WIDENING, False
    fitted = fit_family(family, workload, data.take(train), probes, coverage, init)
    pred = fitted.predict(data.gpus[~train], data.nodes[~train], data.batch[~train])
    r = np.log(data.step[~train] / np.maximum(pred, 1e-300))
    doublings = np.log2(data.gpus[~train] / data.gpus[train].max())
    out_rms = float(np.sqrt(np.mean(r**2)))
    return max(out_rms / in_sample_rms - 1.0, 0.0) / max(float(np.mean(doublings)), 1e-9) * 1.0, True
