"""What a calibration plan promises: the model's own 90% interval at the target, now and after the runs.

`advisor plan-calibration` picks runs with a cheap design criterion (advisor.calibrate.design), but
the interval it prints is the one `advisor predict` would print (advisor.scaling.model): "now" is
the model fitted on what is measured today (the workload's checked-in calibrations, or the prior
alone) at the target placement; "after" is the same model refitted with the planned runs added, each
simulated at today's model median at the batch the run trains (calibrate.plan.batch_plan, the
worker's split, which the run's result records for the fit), as the run will time it: the proxy
advisor calibrate builds (calibrate.plan.proxy_workload, which the fit reads proxy-timed runs as:
advisor.measurements.measured_workload), or the declared model where what is measured today is the
job's own steps (a published file), so the two sets fit as one: its step time, its exposed
communication (advisor calibrate times every step also without gradient sync: step minus the compute
part) and, at N > 1, the collective probes advisor calibrate makes (all_reduce, reduce_scatter,
all_gather at `calibrate.plan.probe_sizes`), timed by today's link factors. Simulated runs land on
today's curve, so the promise is the narrowing from pinning the coefficients, not from the values
changing: the posterior, the leave-one-count-out residuals and the widening past the data are those
predict uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from advisor.measurements import Measurements
    from advisor.scaling.model import ScalingModel
    from advisor.spec import Workload

#: Posterior draws per model here: the band comes from sigma points (intervals.sigma_spread); the
#: draws only feed `describe`, which the plan does not print.
_DRAWS = 5


@dataclass(frozen=True)
class Band:
    """Median and 90% interval of the step time at one placement, seconds."""

    median: float
    low: float
    high: float

    @property
    def relative_width(self) -> float:
        """(high - low) / median: the width `predict`'s interval has there."""
        return (self.high - self.low) / self.median

    @property
    def half_width(self) -> float:
        return self.relative_width / 2

    def as_dict(self) -> dict:
        return {"step_seconds": self.median, "step_seconds_low": self.low, "step_seconds_high": self.high,
                "low": self.low / self.median - 1, "high": self.high / self.median - 1,
                "relative_width": self.relative_width}


def current_model(w: "Workload") -> "ScalingModel":
    """The model predict uses without --calibration: the checked-in calibrations, else the prior."""
    from advisor.scaling.model import build_model

    return build_model(w, n_bootstrap=_DRAWS)


def band(model: "ScalingModel", target: tuple[int, int]) -> Band:
    med, lo, hi = model.step_time(np.array([float(target[0])]), np.array([float(target[1])]))
    return Band(float(med[0]), float(lo[0]), float(hi[0]))


def simulated(model: "ScalingModel", places: list[tuple[int, int]], proxy: bool = True) -> "Measurements":
    """The planned runs (and their probes) as `model` predicts them (module docstring): timed on the
    proxy advisor calibrate builds, or with `proxy` false as the declared model's own steps."""
    from advisor.calibrate.plan import batch_plan, probe_sizes, proxy_shape, proxy_workload
    from advisor.calibration_data import Collective
    from advisor.measurements import MeasuredRun, Measurements
    from advisor.topology.collectives import bus_bandwidth_gbps

    w = model.workload
    depth = proxy_shape(w).layers if proxy else None
    if proxy:
        model = model.for_workload(proxy_workload(w))
    fitted = model.record.fitted
    est = fitted.estimator
    nc = est.n_compute
    runs, probes = [], []
    for gpus, nodes in places:
        g, n = np.array([float(gpus)]), np.array([float(nodes)])
        batch = np.array([float(batch_plan(w, gpus).global_batch)])
        step = float(model.step_time(g, n, batch)[0][0])
        compute = float(fitted.design(g, n, batch).X[0, :nc] @ est.coef_[:nc]) * step / float(fitted.predict(g, n,
                                                                                                             batch)[0])
        runs.append(MeasuredRun(gpus, nodes, float(batch[0]), np.array([step]), np.array([max(step - compute, 0.0)])))
        if gpus < 2:
            continue
        for op in ("all_reduce", "reduce_scatter", "all_gather"):
            for size in probe_sizes(w.model.gradient_bytes, "cuda", gpus):
                probes.append((op, gpus, nodes, size))
    if probes:
        stub = [Collective(op=o, gpus=g, nodes=n, bytes=b, seconds=1.0, busbw=0.0) for o, g, n, b in probes]
        X, _ = fitted.family.probe_design(w, stub, fitted.problem.coverage)
        secs = np.maximum(X[:, nc:] @ est.coef_[nc:], 1e-9)
        probes = [c.model_copy(update={"seconds": float(s), "busbw": bus_bandwidth_gbps(c.op, c.gpus, c.bytes, s),
                                       "source": "simulated by plan-calibration"}) for c, s in zip(stub, secs,
                                                                                                  strict=True)]
    return Measurements(runs, probes, "planned runs (simulated)", proxy_layers=depth)


def after(model: "ScalingModel", places: list[tuple[int, int]], target: tuple[int, int]) -> Band:
    """The target's band once `places` are measured, as the same model code would give it."""
    from advisor.measurements import Measurements
    from advisor.scaling.model import ScalingModel

    have = model.measurements
    # in the units of what is measured: a published table's runs are the job's own steps
    sim = simulated(model, places, proxy=have is None or not have.runs or have.proxy_layers is not None)
    both = sim if have is None else Measurements([*have.runs, *sim.runs], [*have.probes, *sim.probes],
                                                 f"{have.source} + {sim.source}", list(have.peaks),
                                                 proxy_layers=sim.proxy_layers)
    r = model.record
    return band(ScalingModel(model.workload, both, r.requested_family, _DRAWS, 0, r.problem.priors), target)
