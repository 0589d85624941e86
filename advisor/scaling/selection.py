"""Leave-one-count-out cross-validation: the out-of-sample error behind the intervals and the fit report.

For each measured GPU count except the smallest (it anchors the baseline), fit on the other counts,
predict the held-out runs. CV error is the mean absolute percentage error over held-out runs; the log
residuals are the out-of-sample noise the intervals use. Only the chosen family is cross-validated
by default (each held-out count is one warm-started solve on grouped rows); `--model` names another.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.scaling.families import Family
from advisor.scaling.fitting import Problem, fit_family


@dataclass(frozen=True)
class CrossValidation:
    family: str
    mape: float | None
    """Mean absolute percentage error over held-out runs; None when fewer than 3 counts."""
    log_residuals: np.ndarray
    """log(measured / predicted) of every held-out run."""


def leave_one_count_out(family: Family, problem: Problem, init=None) -> CrossValidation:
    data = problem.data
    counts = np.unique(data.gpus)
    if counts.size < 3:
        return CrossValidation(family.name, None, np.zeros(0))
    residuals = []
    for held in counts[1:]:
        test = data.gpus == held
        fitted = fit_family(family, problem.take(~test), init)
        pred = fitted.predict_measured(data.gpus[test], data.nodes[test], data.batch[test])
        residuals.append(np.log(data.step[test] / np.maximum(pred, 1e-300)))
    r = np.concatenate(residuals)
    mape = float(np.mean(np.abs(np.expm1(-r))) * 100)  # |pred - y| / y = |exp(-r) - 1|
    return CrossValidation(family.name, mape, r)
