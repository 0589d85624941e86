"""A prior row weighs noise / sd: an sd of zero (or NaN) is refused, not turned into an infinite weight."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.scaling.estimator import OverlapModel


@pytest.mark.parametrize("sd", [0.0, -1.0, float("nan")])
def test_a_prior_without_a_positive_sd_is_refused(sd):
    X = np.column_stack([np.ones(4), np.arange(1.0, 5.0)])
    y = X @ np.array([0.5, 2.0])
    with pytest.raises(ValueError, match="sd must be positive"):
        OverlapModel(n_compute=2, prior=((1, "lin", 2.0, sd),)).fit(X, y)


def test_a_positive_sd_fits():
    X = np.column_stack([np.ones(4), np.arange(1.0, 5.0)])
    y = X @ np.array([0.5, 2.0])
    est = OverlapModel(n_compute=2, prior=((1, "lin", 2.0, 0.5),)).fit(X, y)
    assert est.predict(X) == pytest.approx(y, rel=1e-3)
