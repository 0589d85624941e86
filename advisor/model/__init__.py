"""The scaling model's machinery: the regression core (`estimator`), the model families and
their physical design matrices (`families`), cross-validated selection (`selection`) and
bootstrap prediction intervals (`intervals`). `advisor.predict.ScalingModel` puts them together;
use that, not these, from commands and notebooks.
"""
