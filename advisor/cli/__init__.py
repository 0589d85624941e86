"""advisor's command line. Each module registers its commands on the shared `app`.

Importing this package must not import torch (calibration imports it lazily). The import order
below is the order of `advisor --help`: write a spec, check it, plan and take (or import)
measurements, model them, decide.
"""

# isort: off
from advisor.cli.app import app, main
from advisor.cli import init as _init  # noqa: F401  (registers init)
from advisor.cli import spec as _spec  # noqa: F401  (registers validate, schema, gpus)
from advisor.cli import plan_calibration as _plan_calibration  # noqa: F401  (registers plan-calibration)
from advisor.cli import calibrate as _calibrate  # noqa: F401  (registers calibrate)
from advisor.cli import imports as _imports  # noqa: F401  (registers import nccl-tests / torchtitan)
from advisor.cli import model as _model  # noqa: F401  (registers fit, predict, backtest)
from advisor.cli import recommend as _recommend  # noqa: F401  (registers recommend)
# isort: on

__all__ = ["app", "main"]
