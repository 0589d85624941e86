"""The scaling model: one package for everything that turns measurements into step times.

- `features`: the physical columns (FLOPs per GPU, collective volumes, link bandwidths, hops);
- `families`: the model families and their design matrices;
- `estimator`: the regression core (non-negative coefficients, Pollux overlap);
- `fitting`, `selection`, `intervals`: fitting, cross-validated choice, posterior intervals;
- `evidence`: what the measurements span and the caveats every prediction carries;
- `model`: `ScalingModel`, the domain object commands and notebooks use
  (`advisor.scaling.build_model(workload).predict([8, 16, 64])`), implementing the planning
  contract of `advisor.step_model`;
- `plot`: the scaling-curve PNG.

The equations are written once, in docs/model.md. Importing this package imports nothing heavy:
`build_model`, `ScalingModel` and `backtest` load scikit-learn on first use.
"""

from __future__ import annotations

__all__ = ["ScalingModel", "backtest", "build_model"]


def __getattr__(name: str):
    if name in __all__:
        from advisor.scaling import model

        return getattr(model, name)
    raise AttributeError(name)
