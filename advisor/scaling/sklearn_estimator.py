"""`OverlapRegressor`: the regression core (advisor.scaling.estimator.OverlapModel) as a scikit-learn
estimator, for notebooks and pipelines: scikit-learn's input validation, parameters and tags. The
model itself fits with `OverlapModel`, so commands never import scikit-learn."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from advisor.scaling.estimator import OverlapModel

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    def _validate_data(est, X, y=None, reset=True, **kw):
        if y is None:
            return est._validate_data(X, reset=reset, **kw)
        return est._validate_data(X, y, reset=reset, **kw)


class OverlapRegressor(RegressorMixin, BaseEstimator, OverlapModel):
    __doc__ = OverlapModel.__doc__

    def fit(self, X, y, sample_weight=None, comm=None, probe_X=None, probe_y=None, init=None):
        """Fit coefficients and γ (MAP) after scikit-learn's validation of X, y and the weights."""
        X, y = _validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        if sample_weight is not None:
            from sklearn.utils.validation import _check_sample_weight

            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        return self._fit_arrays(X, y, sample_weight, comm, probe_X, probe_y, init)

    def predict(self, X):
        check_is_fitted(self, "coef_")
        X = _validate_data(self, X, reset=False, dtype=np.float64)
        return self._predict_with(X, self.coef_, self.gamma_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # physical model: bounded, not a general learner
        return tags

    def _more_tags(self):  # scikit-learn < 1.6
        return {"poor_score": True}
