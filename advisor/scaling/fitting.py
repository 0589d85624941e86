"""Fit one model family to measured runs: design matrix from the workload, then the estimator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

from advisor.scaling.estimator import OverlapRegressor
from advisor.scaling.families import Coverage, Design, Family

if TYPE_CHECKING:
    from advisor.measurements import Measurements
    from advisor.spec import Workload


@dataclass(frozen=True)
class FitData:
    """Per-run arrays the model fits: placement, batch, median step and exposed communication."""

    gpus: np.ndarray
    nodes: np.ndarray
    batch: np.ndarray
    step: np.ndarray
    comm: np.ndarray

    @classmethod
    def of(cls, m: "Measurements") -> "FitData":
        return cls(m.gpus, m.nodes, m.global_batch, m.step, m.comm)

    def take(self, keep: np.ndarray) -> "FitData":
        return FitData(self.gpus[keep], self.nodes[keep], self.batch[keep], self.step[keep], self.comm[keep])


def coverage_of(m: "Measurements") -> Coverage:
    return Coverage(steps_crossed_nodes=bool((m.nodes > 1).any()),
                    probes_crossed_nodes=any(p.nodes > 1 for p in m.probes))


@dataclass
class FittedFamily:
    """One family fitted: predicts step seconds at any placement and batch."""

    family: Family
    workload: "Workload"
    coverage: Coverage
    estimator: OverlapRegressor
    columns: tuple

    def design(self, gpus, nodes, batch) -> Design:
        return self.family.design(self.workload, gpus, nodes, batch, self.coverage)

    def predict(self, gpus, nodes, batch) -> np.ndarray:
        return self.estimator.predict(self.design(gpus, nodes, batch).X)


def fit_family(family: Family, workload: "Workload", data: FitData, probes: list, coverage: Coverage,
               init: Optional[tuple] = None) -> FittedFamily:
    """Fit `family` to `data` (and collective `probes`), optionally warm-started from `init`."""
    d = family.design(workload, data.gpus, data.nodes, data.batch, coverage)
    probe_X, probe_y = family.probe_design(workload, probes, coverage)
    est = OverlapRegressor(n_compute=d.n_compute, fixed=d.fixed, prior=priors(d))
    est.fit(d.X, data.step, comm=data.comm if family.has_overlap else None,
            probe_X=probe_X if len(probe_y) else None, probe_y=probe_y if len(probe_y) else None, init=init)
    return FittedFamily(family, workload, coverage, est, d.columns)


def priors(d: Design) -> tuple:
    """Weak physical priors per column (see OverlapRegressor): seconds-valued terms towards 0,
    factors on declared link speeds towards 1.0; compute is left free."""
    out = []
    for j, col in enumerate(d.columns):
        if col.name in ("overhead", "contention"):
            out.append((j, "zero"))
    return tuple(out)


def naive_step(data: FitData, gpus, batch) -> np.ndarray:
    """Step seconds if per-GPU throughput stayed what it is at the largest measured count.

    The naive linear guess (DESIGN.md §5): a model that cannot beat it adds nothing. Per-GPU
    throughput is taken from the runs at the largest count with the same per-GPU batch where
    there are any (rows may differ in batch), else from all runs at that count (median).
    """
    gpus, batch = np.asarray(gpus, float), np.asarray(batch, float)
    top = data.gpus == data.gpus.max()
    per_gpu = data.batch[top] / (data.step[top] * data.gpus[top])
    local_top = data.batch[top] / data.gpus[top]
    local = batch / gpus
    thr = np.full(local.shape, float(np.median(per_gpu)))
    for value in np.unique(local_top):
        match = np.isclose(local, value, rtol=0.01)
        thr[match] = np.median(per_gpu[np.isclose(local_top, value, rtol=0.01)])
    return batch / (thr * gpus)
