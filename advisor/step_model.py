"""The model contract: everything the decision layer (advisor.planning) asks of a step-time model.

`advisor.scaling.model.ScalingModel` implements it from measurements; tests subclass it with a
function that can be priced by hand (tests/support/recommend_inputs.py `Amdahl`). planning reads
a model only through this class, so a model never has to be probed for what it offers (no
getattr/hasattr/inspect on a model in advisor/planning/: tests/unit/test_step_model.py scans for
them), and the decision layer opens no file: what a calibration measured arrives with the model.

Stated as SkyPilot's `sky/clouds/cloud.py` states a cloud: one required method, and a documented
default for every optional part, so a subclass overrides only what it knows.

    required  step_time(gpus, nodes, global_batch=None) -> (median, low, high)
    optional  baseline_gpus, baseline_nodes   None: the planner's reference count and its fill
              calibrated                      True
              peaks                           (): no measured memory peak
              measured_batch                  None: nothing measured
              warnings(gpus=None, nodes=None) [], or one line when not calibrated
              for_workload(workload)          refuses: the model cannot predict another layout

The interval every model returns is two-sided at LEVEL (90%); `Z90` is its z, the one constant
every 90% band in advisor is read with (the intervals, the odds of meeting a budget, a calibration
plan's predicted width).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING

from advisor.errors import InputError

if TYPE_CHECKING:
    import numpy as np

    from advisor.spec import Workload

#: Level of the prediction interval a step-time model returns: (low, high) bound 90% of outcomes.
LEVEL = 0.90

#: z of the two-sided LEVEL interval: the 95th percentile of the standard normal
#: (scipy.stats.norm.ppf(0.95)); a log-normal 90% band spans median·exp(±Z90·sigma).
Z90 = 1.6448536269514722

#: What a model without measurements says with every plan, unless its own warnings say it.
NO_CALIBRATION = ("no calibration data: step times come from the declared hardware alone (a prior, not a "
                  "measurement); calibrate before renting at scale")


class StepTimeModel(abc.ABC):
    """Seconds per optimizer step at N GPUs over n nodes, with a 90% interval, and what backs them.

    Attributes, with their defaults (a subclass sets them as class attributes, instance attributes
    or properties):

    - `baseline_gpus`: the smallest measured GPU count, the reference of speedup and efficiency and
      of the gradient-noise-scale batch; None: the planner takes the smallest count of the spec's
      `[calibration] gpus`.
    - `baseline_nodes`: the node count that baseline ran on; None: the count filled node by node.
    - `calibrated`: False for a prior-only model (no measurement behind it): plans are marked so.
    - `peaks`: memory peaks the calibration measured (advisor.topology.memory.MeasuredPeak), which move the
      footprint estimate; () when none was measured.
    - `measured_batch`: the largest global batch behind the model, against which a plan's batch
      growth is judged; None: nothing measured (the planner takes the batch at the baseline count).
    """

    baseline_gpus: int | None = None
    baseline_nodes: int | None = None
    calibrated: bool = True
    peaks: Sequence = ()
    measured_batch: float | None = None

    @abc.abstractmethod
    def step_time(self, gpus: "np.ndarray", nodes: "np.ndarray", global_batch: "np.ndarray | None" = None,
                  ) -> tuple["np.ndarray", "np.ndarray", "np.ndarray"]:
        """(median, low, high) seconds per step for equal-length arrays of GPU and node counts; low
        and high bound a LEVEL interval. `global_batch` (samples per step, per row) is the batch
        advisor.batch gives each count; None: the workload's batch policy. A model whose
        step does not depend on the batch may ignore it."""

    def warnings(self, gpus: "np.ndarray | None" = None, nodes: "np.ndarray | None" = None) -> list[str]:
        """The model's caveats, shown with a plan: its own (how well the data pin it) and, given
        placements, those of predicting there (past the measured counts). Default: one line when
        the model is not calibrated (`NO_CALIBRATION`), else none."""
        return [] if self.calibrated else [NO_CALIBRATION]

    def for_workload(self, workload: "Workload") -> "StepTimeModel":
        """This model predicting for another layout of the same job (`workload` differs only in
        [parallelism]), which choosing a layout per count (strategy 'auto') needs. Default: refused
        with an InputError, as a model that does not know how traffic moves with the layout cannot
        compare layouts."""
        raise InputError.at("parallelism.strategy", "",
                            "choosing a layout needs a scaling model that predicts other layouts "
                            "(ScalingModel.for_workload); name a strategy instead of 'auto'", "auto")
