"""Inputs shared by the cost and recommendation tests: a small workload whose numbers can be
worked by hand, and an explicit step-time function (test input, not a model result).

The workload: 4 GPUs per node, up to 16 GPUs (counts 1, 2, 4, 8, 12, 16), 3600 steps, so the
compute hours equal the step time in seconds. Tiers:
- on-demand $2/GPU-h;
- spot $1/GPU-h, 0.5 preemptions per node-hour, checkpoint 72 s (0.02 h), restart 360 s (0.1 h);
- reserved $1.5/GPU-h, min_hours 2.
"""

from __future__ import annotations

import copy
import math

import numpy as np
from scipy.optimize import minimize_scalar

from advisor.spec import workload_from_dict
from advisor.step_model import StepTimeModel

SPEC = {
    "name": "hand",
    "model": {"params": 1e9, "flops_per_sample": 1e12},
    "batch": {"policy": "fixed-global", "global_samples": 64},
    "parallelism": {"strategy": "ddp"},
    "cluster": {"gpu": "H100-SXM", "gpus_per_node": 4, "max_gpus": 16, "inter_node_bandwidth": "100 Gbit/s"},
    "job": {"steps": 3600},
    "tiers": [
        {"name": "on-demand", "usd_per_gpu_hour": 2.0},
        {"name": "spot", "usd_per_gpu_hour": 1.0, "preemptions_per_node_hour": 0.5, "checkpoint": "72 s",
         "restart": "6 min"},
        {"name": "reserved", "usd_per_gpu_hour": 1.5, "min_hours": 2},
    ],
    "calibration": {"gpus": [1, 2, 4]},
}


def workload(**changes):
    """The hand workload with dotted-path changes, e.g. workload(**{"job.steps": 36000})."""
    spec = copy.deepcopy(SPEC)
    for dotted, value in changes.items():
        *parents, key = dotted.split(".")
        node = spec
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is None:
            node.pop(key, None)
        else:
            node[key] = value
    return workload_from_dict(spec)


class Amdahl(StepTimeModel):
    """Step time T(N) = serial + parallel / N seconds (plus per_node per extra node), whatever the
    batch; the 90% interval is [low_ratio, high_ratio] x T. An explicit function the tests price by
    hand, through the contract planning reads (advisor.step_model): `peaks` are measured memory
    peaks it carries (none by default), as a fitted model carries its calibration's."""

    def __init__(self, serial=0.2, parallel=3.2, per_node=0.0, low_ratio=1.0, high_ratio=1.0, baseline_gpus=1,
                 peaks=()):
        self.serial, self.parallel, self.per_node = serial, parallel, per_node
        self.low_ratio, self.high_ratio = low_ratio, high_ratio
        self.baseline_gpus = baseline_gpus
        self.peaks = tuple(peaks)

    def seconds(self, gpus, nodes):
        return self.serial + self.parallel / gpus + self.per_node * (nodes - 1)

    def step_time(self, gpus, nodes, global_batch=None):
        t = self.seconds(np.asarray(gpus, dtype=float), np.asarray(nodes, dtype=float))
        return t, t * self.low_ratio, t * self.high_ratio


def exact_factor(rate, checkpoint_h, restart_h):
    """Expected wall hours per compute hour under exponential preemptions (Daly 2006, eq. 20):
    M e^{R/M} (e^{(τ+δ)/M} − 1) / τ with M = 1/Λ, τ minimised numerically (bounded scalar search);
    returns (factor, τ). Independent of advisor.planning.billing's Newton-solved optimum."""
    mtbf = 1 / rate
    wall = lambda tau: mtbf * math.exp(restart_h / mtbf) * math.expm1((tau + checkpoint_h) / mtbf) / tau  # noqa: E731
    best = minimize_scalar(wall, bounds=(1e-9 * mtbf, 10 * mtbf), method="bounded", options={"xatol": 1e-12})
    return float(best.fun), float(best.x)
