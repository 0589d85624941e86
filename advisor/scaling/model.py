"""The scaling model as a domain object: fit on measurements, predict at any GPU count.

    from advisor.scaling.model import build_model
    model = build_model(workload)                      # the workload's checked-in calibration
    model = build_model(workload, measurements="runs.csv")
    median, low, high = model.step_time(gpus, nodes)   # numpy arrays, seconds per step
    table = model.predict([8, 16, 64], [1, 2, 8])      # throughput, speedup, efficiency, MFU, 90% band

`build_model(workload, calibration=None, measurements=None, family="auto", n_bootstrap=64, seed=0)
-> ScalingModel`: `calibration` is a `Calibration` or a path, `measurements` a `Measurements` or a
CSV path; with neither, the workload's `calibrations/NAME*.toml` are used, and with none of those
the prior-only model answers (`calibrated` False: a first estimate from the spec alone).

`ScalingModel.step_time(gpus, nodes=None, global_batch=None) -> (median, low, high)`: vectorised
over arrays of any length (a sweep of 65,536 counts takes milliseconds); `nodes` defaults to
filled nodes (ceil(gpus / gpus_per_node)), `global_batch` to the workload's batch policy;
low/high bound a 90% prediction interval.

How it fits (docs/model.md): the topology family of `advisor.scaling.families`, maximum a
posteriori with physical bounds and the priors learned from published series
(`advisor.scaling.priors`); intervals from its posterior (`advisor.scaling.intervals`).
`n_bootstrap` is the number of posterior draws (the name is kept for callers). Speedup and
efficiency are relative to the smallest measured count (`baseline_gpus`, 1 when uncalibrated); MFU
is achieved FLOP/s per GPU over the GPU's peak (PaLM, Chowdhery et al. 2022, App. B), None when
the peak is unknown, and never above 100% (the compute coefficient is bounded).

`ScalingModel` is the advisor.step_model contract implemented from measurements (what planning
reads: baseline, calibrated, peaks, measured_batch, warnings, for_workload); what one fit produced
is one frozen `FitRecord` (`model.record`), and what the evidence says about it (what the runs
span, the caveats) lives in `advisor.scaling.evidence`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from advisor.errors import InputError
from advisor.measurements import Measurements, from_calibration
from advisor.scaling.anchor import Anchor
from advisor.scaling.ceiling import Ceiling
from advisor.scaling.evidence import (
    Extent,
    extrapolation_warnings,
    fit_warnings,
    memory_pressed,
    memory_pressure,
    memory_warnings,
    term_sources,
)
from advisor.scaling.families import family_named
from advisor.scaling.features import PRESSURE_COLUMN, compute_seconds, flops_per_gpu
from advisor.scaling.fitting import (
    FIT_NOISE,
    FitData,
    FittedFamily,
    Problem,
    fit_family,
    in_job_units,
    job_units_ratio,
    naive_step,
)
from advisor.scaling.intervals import Draws, NoiseModel, interval, pooled_noise, posterior_draws, sigma_spread
from advisor.scaling.priors import LEARNED, Priors
from advisor.scaling.selection import CrossValidation, leave_one_count_out
from advisor.step_model import LEVEL, StepTimeModel
from advisor.topology import launch

if TYPE_CHECKING:
    from advisor.calibration_data import Calibration
    from advisor.spec import Workload

def load_measurements(workload: "Workload", calibration: "Calibration" | str | Path | None = None,
                      measurements: Measurements | str | Path | None = None,
                      required: bool = True, left_out: list[str] | None = None) -> Measurements | None:
    """The measurements to fit: a CSV, a calibration file, or the workload's checked-in calibration.
    None when there is none and `required` is false (the model then answers from its prior). Runs of
    the checked-in calibration that this spec's layout cannot run are left out, with a sentence in
    `left_out` when given (advisor.measurements.from_calibration); runs in files the user names are refused."""
    from advisor.calibration_data import load_workload_calibration

    if calibration or measurements is not None:  # several files and/or a CSV combine (docs/formats.md)
        from advisor.measurements import combine_sources

        return combine_sources(workload, calibration, measurements)
    cal = load_workload_calibration(workload.name, workload.source)
    if cal is None:
        if not required:
            return None
        where = workload.source or workload.name
        raise InputError.at(where, "", f"no calibration data (calibrations/{workload.name}*.toml); "
                                       "run `advisor calibrate` or pass --calibration FILE.toml or "
                                       "--measurements FILE.csv")
    notes: list[str] = []
    m = from_calibration(cal, workload, left_out=notes)
    if left_out is not None:
        left_out += notes
    if m is None and required:
        raise InputError.at(workload.source or workload.name, "", f"{notes[0]}; nothing else measured to fit")
    return m


def build_model(workload: "Workload", calibration=None, measurements=None, family: str = "auto",
                n_bootstrap: int = 40, seed: int = 0, priors: Priors = LEARNED) -> "ScalingModel":
    """Fit the scaling model of `workload` (see the module docstring); with no calibration data at
    all, the prior-only model (`calibrated` False)."""
    notes: list[str] = []
    m = load_measurements(workload, calibration, measurements, required=False, left_out=notes)
    notes += m.notes if m is not None else []
    return ScalingModel(workload, m, family, n_bootstrap, seed, priors, notes=tuple(notes))


@dataclass(kw_only=True)
class Prediction:
    """Predicted quantities per placement (numpy arrays of equal length), built by keyword."""

    gpus: np.ndarray
    nodes: np.ndarray
    global_batch: np.ndarray
    step_seconds: np.ndarray
    step_low: np.ndarray
    step_high: np.ndarray
    throughput: np.ndarray
    throughput_low: np.ndarray
    throughput_high: np.ndarray
    speedup: np.ndarray
    efficiency: np.ndarray
    mfu: np.ndarray | None
    naive_throughput: np.ndarray
    warnings: list[str] = field(default_factory=list)
    #: seconds per part of the median step (advisor.scaling.breakdown.PARTS), arrays like the others
    breakdown: dict[str, np.ndarray] = field(default_factory=dict)

    def rows(self) -> list[dict]:
        """One dict per placement with the JSON fields of docs/model.md ("Outputs")."""
        out = []
        for i in range(len(self.gpus)):
            out.append({
                "gpus": int(self.gpus[i]), "nodes": int(self.nodes[i]),
                "step_seconds": float(self.step_seconds[i]),
                "step_seconds_low": float(self.step_low[i]), "step_seconds_high": float(self.step_high[i]),
                "throughput": float(self.throughput[i]),
                "throughput_low": float(self.throughput_low[i]), "throughput_high": float(self.throughput_high[i]),
                "speedup": float(self.speedup[i]), "efficiency": float(self.efficiency[i]),
                "mfu": None if self.mfu is None else float(self.mfu[i]),
                "naive_throughput": float(self.naive_throughput[i]),
                "global_batch": float(self.global_batch[i]),
                "breakdown": {k: float(v[i]) for k, v in self.breakdown.items()},
            })
        return out


#: Warn when a fitted coefficient sits within this factor of its physical bound (the fit leans on it).
BOUND_WARN = 1.02


@dataclass(frozen=True, kw_only=True)
class FitRecord:
    """One workload's measurements fitted, fixed once made: everything a ScalingModel predicts from.

    `fitted` holds the family, the problem (workload, grouped runs, probes, coverage, priors) and
    the estimator; `cv` the leave-one-count-out errors and residuals behind `noise`; `anchor` the
    median log residual per measured count and whether it ran near memory capacity
    (ScalingModel.anchoring); `draws` the posterior draws behind describe()'s ranges; `extent` what
    the runs span; `ceiling` the measured per-GPU throughput no prediction may exceed
    (advisor.scaling.ceiling); `warnings` the fit's own caveats (advisor.scaling.evidence)."""

    fitted: FittedFamily
    requested_family: str
    cv: CrossValidation
    naive_cv_mape: float | None
    anchor: Anchor
    noise: NoiseModel
    draws: Draws
    extent: Extent
    ceiling: Ceiling
    warnings: tuple[str, ...]

    @property
    def problem(self) -> Problem:
        return self.fitted.problem


def fit_record(workload: "Workload", measurements: Measurements | None, requested: str, n_draws: int, seed: int,
               priors: Priors) -> FitRecord:
    """Fit the family `requested` names (advisor.scaling.families.family_named) to `measurements`
    (None: the prior alone), cross-validate it, set its interval noise and draw its posterior."""
    fam = family_named(requested)
    problem = Problem.of(workload, measurements, priors.for_workload(workload))
    # Rows near memory capacity ran slower than their count would with memory to spare (evidence.
    # memory_pressed): they stay in the fit, where the memory-pressure column (features.pressure_column)
    # explains their extra time, so compute is what the other rows or the prior say; counts where the
    # memory estimate frees memory carry no pressure, and pressed rows neither anchor their level nor cap
    # their per-GPU throughput (the ceiling).
    peaks = measurements.peaks if measurements is not None else []
    flagged = _flagged(measurements)
    pressed = memory_pressed(problem.data, peaks, workload, flagged)
    pressure = memory_pressure(problem.data, pressed, peaks, workload, problem.data_workload, flagged)
    if pressure is not None:
        problem = replace(problem, coverage=replace(problem.coverage, pressure=pressure))
    fitted = fit_family(fam, problem)
    est = fitted.estimator
    cv = leave_one_count_out(fam, problem, init=(est.coef_, est.gamma_))
    in_sample = _log_residuals(fitted, problem.data)
    noise = NoiseModel.from_residuals(cv.log_residuals, priors.widening, priors.noise, in_sample, priors.drift)
    calibrated = measurements is not None and bool(measurements.runs)  # probes alone leave compute to the prior
    if calibrated:  # the posterior at the data's own noise (the fit weighed them at FIT_NOISE)
        est.cov_ = est.covariance((FIT_NOISE / pooled_noise(in_sample, priors.noise)) ** 2)
    ceiling = Ceiling.of(in_job_units(fitted, problem.data), pressed)
    return FitRecord(fitted=fitted, requested_family=requested, cv=cv, naive_cv_mape=_naive_cv(problem.data),
                     anchor=Anchor.of(problem.data.gpus, problem.data.batch, in_sample, pressed), noise=noise,
                     draws=posterior_draws(est, n_draws, seed),
                     extent=Extent.of(problem.data) if calibrated else Extent(), ceiling=ceiling,
                     warnings=tuple(fit_warnings(fitted, noise, calibrated=calibrated)
                                    + ceiling.superlinear_warnings()
                                    + memory_warnings(problem.data, pressed, pressure is not None)))


def _flagged(m: Measurements | None) -> tuple:
    """(gpus, nodes, global batch) of the runs their source flags as memory-bound (advisor.measurements)."""
    if m is None or not m.runs or not m.memory_bound.any():
        return ()
    keep = m.memory_bound
    return tuple(zip(m.gpus[keep], m.nodes[keep], m.global_batch[keep], strict=True))


def _pressed_at(d) -> np.ndarray | None:
    """Per placement of design `d`: near memory capacity (its memory-pressure column is non-zero);
    None without the column (no measured row was pressed)."""
    names = [c.name for c in d.columns]
    return d.X[:, names.index(PRESSURE_COLUMN)] > 0 if PRESSURE_COLUMN in names else None


def _naive_cv(d: FitData) -> float | None:
    """Leave-one-count-out error of the naive linear guess (per-GPU throughput of the largest other count)."""
    counts = np.unique(d.gpus)
    if counts.size < 3:
        return None
    errors = []
    for held in counts[1:]:
        test = d.gpus == held
        pred = naive_step(d.take(~test), d.gpus[test], d.batch[test])
        errors.append(np.abs(pred - d.step[test]) / d.step[test])
    return float(np.mean(np.concatenate(errors)) * 100)


def _log_residuals(fitted: FittedFamily, d: FitData) -> np.ndarray:
    if d.empty:
        return np.zeros(0)
    return np.log(d.step / np.maximum(fitted.predict_measured(d.gpus, d.nodes, d.batch), 1e-300))


class ScalingModel(StepTimeModel):
    """A fitted (or, without measurements, prior-only) scaling curve for one workload, with intervals:
    the advisor.step_model contract, from measurements. Its state is the measurements and one frozen
    `record` (FitRecord); everything else is read from them."""

    def __init__(self, workload: "Workload", measurements: Measurements | None, family: str = "auto",
                 n_bootstrap: int = 40, seed: int = 0, priors: Priors = LEARNED, notes: tuple[str, ...] = ()):
        family_named(family)  # an unknown name fails before any fitting
        self.notes = notes  # what loading the measurements left out (load_measurements), warned with the fit's
        from threadpoolctl import threadpool_limits

        # Small least-squares problems: multi-threaded BLAS only adds contention, and one thread
        # makes the solver's arithmetic the same on every machine.
        with threadpool_limits(limits=1):
            self.record = fit_record(workload, measurements, family, n_bootstrap, seed, priors)
        self.measurements = measurements

    # ---- the contract (advisor.step_model) ---------------------------------------------------

    @property
    def workload(self) -> "Workload":
        return self.record.problem.workload

    @property
    def family(self) -> str:
        return self.record.fitted.family.name

    @property
    def calibrated(self) -> bool:
        """Step times were measured (a file of collective probes alone leaves compute to the prior)."""
        return self.measurements is not None and bool(self.measurements.runs)

    @property
    def peaks(self) -> list:
        """Memory peaks the calibration measured (advisor.topology.memory.MeasuredPeak), read with its runs."""
        return list(self.measurements.peaks) if self.measurements is not None else []

    @property
    def baseline_gpus(self) -> int:
        return self.record.extent.baseline_gpus

    @property
    def baseline_nodes(self) -> int:
        return self.record.extent.baseline_nodes

    @property
    def measured_batch(self) -> float | None:
        """The largest global batch the measurements ran (None without measured runs)."""
        m = self.measurements
        return float(np.max(m.global_batch)) if m is not None and np.size(m.global_batch) else None

    def warnings(self, gpus=None, nodes=None) -> list[str]:
        """The fit's caveats, and with placements those of extrapolating to them (advisor.scaling.evidence)."""
        out = list(self.notes) + list(self.record.warnings)
        if gpus is not None:
            out += extrapolation_warnings(self.record.extent, np.asarray(gpus), np.asarray(nodes))
        return out

    def for_workload(self, workload: "Workload") -> "ScalingModel":
        """This fitted model predicting for another layout of the same job (`workload` differs only in
        [parallelism], e.g. advisor.topology.layouts.with_layout): the coefficients are factors on compute and on
        each link's declared speed, so they carry over; the design follows the new layout's traffic."""
        import copy

        other = copy.copy(self)
        problem = replace(self.record.problem, workload=workload)
        other.record = replace(self.record, fitted=replace(self.record.fitted, problem=problem))
        return other

    # ---- predictions -------------------------------------------------------------------------

    def _placements(self, gpus, nodes, global_batch):
        gpus = np.atleast_1d(np.asarray(gpus, dtype=float))
        if gpus.size and (not np.all(np.isfinite(gpus)) or gpus.min() < 1):
            raise InputError.at("gpus", "", "GPU counts must be >= 1", gpus.min())
        if nodes is None:
            nodes = self.workload.nodes(gpus)
        else:
            nodes = np.broadcast_to(np.asarray(nodes, dtype=float), gpus.shape)
        if np.any(nodes < 1) or np.any(nodes > gpus):
            raise InputError.at("nodes", "", "node counts must be between 1 and the GPU count")
        if global_batch is None:
            batch = self.workload.global_batch(gpus)
        else:
            batch = np.broadcast_to(np.asarray(global_batch, float), gpus.shape)
        return gpus, np.asarray(nodes, float), np.asarray(batch, float)

    def step_time(self, gpus, nodes=None, global_batch=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(median, low, high) seconds per optimizer step; low/high bound a 90% prediction interval."""
        return self._steps(*self._placements(gpus, nodes, global_batch))[:3]

    def _steps(self, gpus, nodes, batch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(median, low, high, device median): the step, and its median on the device alone, before the
        host's kernel launches bound it (advisor.topology.launch; the breakdown's overhead takes the rest)."""
        fitted = self.record.fitted
        d = fitted.design(gpus, nodes, batch)
        pressed = _pressed_at(d)
        distance = self.record.extent.distance(gpus, nodes)
        median = (fitted.estimator.predict(d.X) * self.anchoring(gpus, pressed, batch)
                  * self.record.noise.drift_factor(distance))
        spread = sigma_spread(d.X, fitted.estimator)
        low, high = interval(median, spread, self.record.noise, distance)
        # The limits (docs/model.md, "Limits"): neither the fit, anchoring nor the band lifts achieved
        # FLOP/s above the peak; the median never has per-GPU throughput above the best measured at or
        # below N beyond the noise (advisor.scaling.ceiling). The band's low end is a future measurement,
        # noise included, so only the peak bounds it.
        peak = compute_seconds(self.workload, gpus, batch) if self.workload.peak_flops else np.zeros(gpus.shape)
        device = np.maximum(median, np.maximum(peak, self.record.ceiling.step_floor(gpus, batch, pressed)))
        # The host launches every kernel of the step, asynchronously: the step is at least those launches.
        return (*launch.bound(self.workload, gpus, nodes, device, np.maximum(low, peak), np.maximum(high, device)),
                device)

    def anchoring(self, gpus, pressed_at: np.ndarray | None = None, batch=None) -> np.ndarray:
        """Factor on the fitted step: exp of the fit's median log residual at the largest measured
        count at or below N (the smallest's below it), at that count's measured per-GPU batch nearest
        the query's (`batch`: global batch per query; None: all its rows) (advisor.scaling.anchor).

        The model predicts how the step changes going up from the measured counts; the level at the
        measured count below is what was measured there. A misfit at the largest count (per-row batches
        the model cannot reconcile, MPT-13B 8 and 16 GPUs: -10% and +8%) is the linear guess's strength:
        the guess is the measurement there. Carried forward, the prediction is the linear guess
        modulated by the model's physics, and with a good fit (residuals near 0) nothing changes.
        Held, not interpolated in log2 N between counts: interpolating mixed a multi-node count's
        residual, which carries the inter-node declaration's misfit, into the counts below it, so a
        faster declared link predicted a slower step (bert-large at 16 GPUs, declared 10 then 20
        Gbit/s: 10.98 -> 11.29 s) and a one-node fit's level moved with the declaration. A count that
        ran near memory capacity (evidence.memory_pressed) sets the level at itself, below the smallest
        count, and at the counts still near capacity (`pressed_at`, per query: the memory-pressure
        column's placements; None: none is) only: above it, where memory is freed, the largest count
        with memory to spare at or below N does, else nothing (the fit's own level; never a larger
        count's, which would carry its links' misfit down)."""
        return self.record.anchor.factor(gpus, batch, pressed_at)

    def predict(self, gpus, nodes=None, global_batch=None) -> Prediction:
        """Step time, throughput (samples/s), speedup and efficiency vs `baseline_gpus`, MFU, naive guess.

        The baseline runs the workload's batch policy, or, when `global_batch` is given, each row's
        per-GPU batch (so speedup compares like with like when rows differ in batch).
        """
        gpus, nodes, batch = self._placements(gpus, nodes, global_batch)
        t, lo, hi, device = self._steps(gpus, nodes, batch)
        base = np.full_like(gpus, float(self.baseline_gpus))
        base_batch = self.workload.global_batch(base) if global_batch is None else batch / gpus * base
        t_base, _, _ = self.step_time(base, np.full_like(gpus, float(self.baseline_nodes)), base_batch)
        thr = batch / t
        speedup = thr / (base_batch / t_base)
        peak = self.workload.peak_flops
        mfu = flops_per_gpu(self.workload, gpus, batch) / t / peak if peak else None
        from advisor.scaling.breakdown import breakdown

        naive = np.asarray(self.naive_step(gpus, batch), dtype=float)  # 0 or NaN where a count's batch is empty
        naive_throughput = np.divide(batch, naive, out=np.full(naive.shape, np.nan), where=naive > 0)
        return Prediction(gpus=gpus, nodes=nodes, global_batch=batch, step_seconds=t, step_low=lo, step_high=hi,
                          throughput=thr, throughput_low=batch / hi, throughput_high=batch / lo, speedup=speedup,
                          efficiency=speedup * self.baseline_gpus / gpus, mfu=mfu,
                          naive_throughput=naive_throughput, warnings=self.warnings(gpus, nodes),
                          breakdown=breakdown(self, gpus, nodes, batch, t, device))

    def naive_step(self, gpus, batch) -> np.ndarray:
        """The naive linear guess: per-GPU throughput of the largest measured count held (of the
        prior's one-GPU prediction before any measurement)."""
        if self.calibrated:
            return naive_step(in_job_units(self.record.fitted, self.record.problem.data), gpus, batch)
        one = np.ones(1)
        gpus, batch = np.broadcast_arrays(np.asarray(gpus, float), np.asarray(batch, float))
        b1 = batch / gpus
        # a count whose batch is empty (a cap under its ranks) has no naive guess: NaN, not 0 / 0 with a warning
        keep, out = b1 > 0, np.full(b1.shape, np.nan)
        if keep.any():
            t1 = self.record.fitted.predict(np.ones_like(b1[keep]), np.ones_like(b1[keep]), b1[keep])
            prior_data = FitData(gpus=np.ones_like(t1), nodes=np.ones_like(t1), batch=b1[keep], step=t1,
                                 comm=np.full_like(t1, np.nan), count=one)
            out[keep] = naive_step(prior_data, gpus[keep], batch[keep])
        return out

    # ---- the fit, as the commands report it ---------------------------------------------------

    def residuals(self) -> list[dict]:
        """In-sample fit per measured placement: measured and fitted median step seconds."""
        d = self.record.problem.data
        if d.empty:
            return []
        fitted = self.record.fitted.predict_measured(d.gpus, d.nodes, d.batch)
        return [{"gpus": int(g), "nodes": int(n), "global_batch": float(b), "measured": float(m), "fitted": float(f),
                 "error": float((f - m) / m)}
                for g, n, b, m, f in zip(d.gpus, d.nodes, d.batch, d.step, fitted, strict=True)]

    def describe(self) -> dict:
        """Calibrated or not, the family, coefficients with units and posterior 90% ranges, CV errors."""
        r = self.record
        est, fam = r.fitted.estimator, r.fitted.family
        lo, hi = (np.quantile(r.draws.coefs, [0.05, 0.95], axis=0) if len(r.draws.coefs) >= 2
                  else (est.coef_, est.coef_))
        fixed = dict(est.fixed)
        sources = term_sources(r.fitted)
        coefficients = [{"name": c.name, "value": float(est.coef_[j]), "unit": c.unit, "meaning": c.meaning,
                         "low": float(lo[j]), "high": float(hi[j]), "fixed": j in fixed, "measured_by": sources[c.name]}
                        for j, c in enumerate(r.fitted.columns)]
        m = self.measurements
        out = {
            "name": fam.name,
            "calibrated": self.calibrated,
            "terms": {"measured": sorted(k for k, v in sources.items() if v != "prior"),
                      "prior": sorted(k for k, v in sources.items() if v == "prior"), "by": sources},
            "requested": r.requested_family,
            "summary": fam.summary,
            "cv_mape": r.cv.mape,
            "families": [{"name": fam.name, "cv_mape": r.cv.mape, "summary": fam.summary}],
            "naive_linear_cv_mape": r.naive_cv_mape,
            "coefficients": coefficients,
            "priors": r.problem.priors.as_dict(),
            "interval": {"level": LEVEL, "posterior_draws": len(r.draws.coefs), "residuals": r.noise.n_residuals,
                         "widening_per_doubling": r.noise.widening, "drift_per_doubling": r.noise.drift,
                         "noise_log": [r.noise.lower, r.noise.upper],
                         "scatter_log": [r.noise.floor_lower, r.noise.floor_upper]},
            "measured": {"runs": len(m.runs) if m else 0, "steps": m.n_steps if m else 0,
                         "gpus": sorted({int(g) for g in r.problem.data.gpus}), "max_nodes": r.extent.max_nodes,
                         "probes": len(m.probes) if m else 0, "source": m.source if m else None},
        }
        if fam.has_overlap:
            out["overlap_gamma"] = est.gamma_
        return out


#: Fewest measured GPU counts a backtest fits on: one count fixes compute only, and a backtest
#: that scores the prior alone would report the prior's error as the model's.
MIN_BACKTEST_COUNTS = 2


def backtest(workload: "Workload", measurements: Measurements, fit_max_gpus: int, family: str = "auto",
             n_bootstrap: int = 40, seed: int = 0, priors: Priors = LEARNED) -> dict:
    """Fit on runs with gpus <= fit_max_gpus, predict the others: per-point error, MAPE, coverage.

    JSON fields: {"points": [{"gpus", "nodes", "measured", "predicted", "error", "low", "high",
    "inside"}], "mape", "coverage", "naive_linear_mape"}, and the fitted family.
    """
    train = measurements.gpus <= fit_max_gpus
    where = measurements.source or "--measurements"
    counts = sorted({int(g) for g in measurements.gpus[train]})
    if len(counts) < MIN_BACKTEST_COUNTS:
        raise InputError.at("--fit-max-gpus", "",
                            f"a backtest fits on at least {MIN_BACKTEST_COUNTS} measured GPU counts; "
                            f"{where} has {counts or 'none'} at or below this count: raise --fit-max-gpus or measure "
                            "more counts", fit_max_gpus)
    if train.all():
        raise InputError.at("--fit-max-gpus", "",
                            f"every measured run is at or below this count in {where}: nothing to predict",
                            fit_max_gpus)
    model = ScalingModel(workload, measurements.subset(train), family, n_bootstrap, seed, priors)
    test = measurements.subset(~train)
    measured = test.step
    # held-out runs of a proxy (advisor calibrate's fewer layers) are compared as the proxy ran them:
    # step_time predicts the declared model, ~40x a 2-layer proxy's step of an 80-layer model
    ratio = job_units_ratio(model.record.fitted, test.gpus, test.nodes, test.global_batch)
    pred, lo, hi = (x / ratio for x in model.step_time(test.gpus, test.nodes, test.global_batch))
    inside = (measured >= lo) & (measured <= hi)
    points = [{"gpus": int(g), "nodes": int(n), "global_batch": float(b), "measured": float(m), "predicted": float(p),
               "error": float((p - m) / m), "low": float(lo_), "high": float(hi_), "inside": bool(i)}
              for g, n, b, m, p, lo_, hi_, i in zip(test.gpus, test.nodes, test.global_batch, measured, pred, lo, hi,
                                                     inside, strict=True)]
    naive = naive_step(model.record.problem.data, test.gpus, test.global_batch)
    return {
        "workload": workload.name,
        "fit_max_gpus": int(fit_max_gpus),
        "model": {"name": model.family, "calibrated": True, "cv_mape": model.record.cv.mape},
        "points": points,
        "mape": float(np.mean(np.abs(pred - measured) / measured) * 100),
        "coverage": float(inside.mean() * 100),
        "naive_linear_mape": float(np.mean(np.abs(naive - measured) / measured) * 100),
        "warnings": model.warnings(test.gpus, test.nodes),
    }
