"""The scaling model as a domain object: fit on measurements, predict at any GPU count.

    from advisor.scaling.model import build_model
    model = build_model(workload)                      # the workload's checked-in calibration
    model = build_model(workload, measurements="runs.csv")
    median, low, high = model.step_time(gpus, nodes)   # numpy arrays, seconds per step
    table = model.predict([8, 16, 64], [1, 2, 8])      # throughput, speedup, efficiency, MFU, 90% band

`build_model(workload, calibration=None, measurements=None, family="auto", n_bootstrap=40, seed=0)
-> ScalingModel`: `calibration` is a `Calibration` or a path, `measurements` a `Measurements` or a
CSV path; with neither, the workload's `calibrations/NAME*.toml` are used.

`ScalingModel.step_time(gpus, nodes=None, global_batch=None) -> (median, low, high)`: vectorised
over arrays of any length (a sweep of 65,536 counts takes milliseconds); `nodes` defaults to
filled nodes (ceil(gpus / gpus_per_node)), `global_batch` to the workload's batch policy;
low/high bound a 90% prediction interval.

How it fits (DESIGN.md §5): every family of `advisor.scaling.families` is fitted with non-negative
coefficients, compared by leave-one-count-out cross-validation, and the best one kept (or the one
`family` names); intervals come from `advisor.scaling.intervals`. Speedup and efficiency are relative
to the smallest measured count (`baseline_gpus`); MFU is achieved FLOP/s per GPU over the GPU's
peak (PaLM, Chowdhery et al. 2022, App. B), None when the peak is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from advisor.errors import InputError
from advisor.measurements import Measurements, from_calibration, read_measurements_csv
from advisor.scaling.families import FAMILIES
from advisor.scaling.fitting import FitData, coverage_of, fit_family, naive_step
from advisor.scaling.intervals import ALTERNATIVE_MARGIN, NoiseModel, bootstrap, bootstrap_spread, interval
from advisor.scaling.selection import CrossValidation, leave_one_count_out, widening_per_doubling
from advisor.text import plural

if TYPE_CHECKING:
    from advisor.calibration_data import Calibration
    from advisor.spec import Workload

FAMILY_CHOICES = ("auto", *FAMILIES)

#: Warn when predicting past this multiple of the largest measured GPU count (DESIGN.md §5).
EXTRAPOLATION_WARN = 4.0

#: Warn when a collective probe's bus bandwidth is below this fraction of the declared link: far
#: below is a misconfiguration (NCCL over TCP sockets instead of RDMA reaches ~10-25% of an
#: InfiniBand link), not a slow network.
BUSBW_WARN_FRACTION = 0.25


def load_measurements(workload: "Workload", calibration: Union["Calibration", str, Path, None] = None,
                      measurements: Union[Measurements, str, Path, None] = None) -> Measurements:
    """The measurements to fit: a CSV, a calibration file, or the workload's checked-in calibration."""
    from advisor.calibration_data import Calibration, load_calibration, load_workload_calibration

    if calibration or measurements is not None:  # several files and/or a CSV combine (docs/formats.md)
        from advisor.measurements import combine_sources

        return combine_sources(workload, calibration, measurements)
    cal = load_workload_calibration(workload.name, workload.source)
    if cal is None:
        where = workload.source or workload.name
        raise InputError.at(where, "", f"no calibration data (calibrations/{workload.name}*.toml); run `advisor calibrate` "
                                       "or pass --calibration FILE.toml or --measurements FILE.csv")
    return from_calibration(cal, workload)


def build_model(workload: "Workload", calibration=None, measurements=None, family: str = "auto",
                n_bootstrap: int = 40, seed: int = 0) -> "ScalingModel":
    """Fit the scaling model of `workload` (see the module docstring)."""
    return ScalingModel(workload, load_measurements(workload, calibration, measurements), family, n_bootstrap, seed)


@dataclass
class Prediction:
    """Predicted quantities per placement (numpy arrays of equal length)."""

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
    mfu: Optional[np.ndarray]
    naive_throughput: np.ndarray
    warnings: list[str] = field(default_factory=list)

    def rows(self) -> list[dict]:
        """One dict per placement with the JSON fields of DESIGN.md §4 (and a few more)."""
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
            })
        return out


#: Fewest measured GPU counts for choosing a family by leave-one-count-out CV; below it the
#: topology-aware model (the physics of DESIGN.md §5) is used.
MIN_COUNTS_TO_SELECT = 4


class ScalingModel:
    """A fitted scaling curve for one workload, with intervals and the evidence behind it."""

    def __init__(self, workload: "Workload", measurements: Measurements, family: str = "auto",
                 n_bootstrap: int = 40, seed: int = 0):
        if family not in FAMILY_CHOICES:
            raise InputError.at("--model", "", f"unknown model family; choose from {', '.join(FAMILY_CHOICES)}", family)
        # One count fixes compute only; collective probes can pin communication instead of a second count.
        counts = sorted({int(g) for g in measurements.gpus})
        if len(counts) < 2 and not measurements.probes:
            raise InputError.at(measurements.source or "<measurements>", "runs",
                                "measure at least 2 GPU counts (or 1 with collective probes) to fit a scaling curve; "
                                "3+ across 2+ nodes to extrapolate across nodes", counts)
        from threadpoolctl import threadpool_limits

        # Hundreds of small least-squares problems: multi-threaded BLAS only adds contention
        # (one fit on 540 runs: 0.5 s with 2 threads on a busy 2-core host, 0.02 s with one).
        with threadpool_limits(limits=1):
            self._fit(workload, measurements, family, n_bootstrap, seed)

    def _fit(self, workload, measurements, family, n_bootstrap, seed) -> None:
        self.workload = workload
        self.measurements = measurements
        self.data = FitData.of(measurements)
        self.coverage = coverage_of(measurements)
        probes = list(measurements.probes)
        names = list(FAMILIES) if family == "auto" else [family]
        full = {n: fit_family(FAMILIES[n], workload, self.data, probes, self.coverage) for n in names}
        self.cv: dict[str, CrossValidation] = {
            n: leave_one_count_out(FAMILIES[n], workload, self.data, probes, self.coverage,
                                   init=(f.estimator.coef_, f.estimator.gamma_))
            for n, f in full.items()
        }
        self.naive_cv_mape = self._naive_cv()
        # Choosing by CV needs enough held-out counts: with 3, each fit sees two points and the
        # node-unaware families win on luck (the emulated cluster picked Ernest, 48% off at 8@4).
        n_counts = np.unique(self.data.gpus).size
        scored = [n for n in names if self.cv[n].mape is not None and n_counts >= MIN_COUNTS_TO_SELECT]
        if family != "auto":
            chosen = family
        elif scored:
            chosen = min(scored, key=lambda n: self.cv[n].mape)
        else:
            chosen = "topology"
        self.family = chosen
        self.fitted = full[chosen]
        self.requested_family = family
        best = self.cv[chosen].mape
        self.alternatives = [full[n] for n in scored if n != chosen and best is not None
                             and self.cv[n].mape <= ALTERNATIVE_MARGIN * best]

        cv = self.cv[chosen]
        residuals = cv.log_residuals  # empty without CV: the prior noise carries the interval
        rms = float(np.sqrt(np.mean(residuals**2))) if residuals.size else 0.0
        kappa, kappa_measured = widening_per_doubling(FAMILIES[chosen], workload, self.data, probes, self.coverage, rms,
                                                      init=(self.fitted.estimator.coef_, self.fitted.estimator.gamma_))
        self.noise = NoiseModel.from_residuals(residuals, kappa, kappa_measured)
        self.boot = bootstrap(self.fitted, measurements, probes, n_bootstrap, seed)

        self.baseline_gpus = int(self.data.gpus.min())
        base_rows = self.data.gpus == self.baseline_gpus
        self.baseline_nodes = int(self.data.nodes[base_rows].min())
        self.max_gpus_measured = int(self.data.gpus.max())
        self.max_nodes_measured = int(self.data.nodes.max())
        self.fit_warnings = self._fit_warnings()

    # ---- predictions -------------------------------------------------------------------------

    def _placements(self, gpus, nodes, global_batch):
        gpus = np.atleast_1d(np.asarray(gpus, dtype=float))
        if gpus.size and (not np.all(np.isfinite(gpus)) or gpus.min() < 1):
            raise InputError.at("gpus", "", "GPU counts must be >= 1", gpus.min())
        nodes = self.workload.nodes(gpus) if nodes is None else np.broadcast_to(np.asarray(nodes, dtype=float), gpus.shape)
        if np.any(nodes < 1) or np.any(nodes > gpus):
            raise InputError.at("nodes", "", "node counts must be between 1 and the GPU count")
        batch = self.workload.global_batch(gpus) if global_batch is None else np.broadcast_to(np.asarray(global_batch, float), gpus.shape)
        return gpus, np.asarray(nodes, float), np.asarray(batch, float)

    def step_time(self, gpus, nodes=None, global_batch=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(median, low, high) seconds per optimizer step; low/high bound a 90% prediction interval."""
        gpus, nodes, batch = self._placements(gpus, nodes, global_batch)
        d = self.fitted.design(gpus, nodes, batch)
        est = self.fitted.estimator
        median = est.predict(d.X)
        spread = bootstrap_spread(d.X, d.n_compute, median, self.boot)
        distance = np.maximum(gpus / self.max_gpus_measured, nodes / self.max_nodes_measured)
        alternatives = tuple(a.predict(gpus, nodes, batch) for a in self.alternatives)
        low, high = interval(median, spread, self.noise, distance, alternatives)
        return median, low, high

    def predict(self, gpus, nodes=None, global_batch=None) -> Prediction:
        """Step time, throughput (samples/s), speedup and efficiency vs `baseline_gpus`, MFU, naive guess.

        The baseline runs the workload's batch policy, or, when `global_batch` is given, each row's
        per-GPU batch (so speedup compares like with like when rows differ in batch).
        """
        gpus, nodes, batch = self._placements(gpus, nodes, global_batch)
        t, lo, hi = self.step_time(gpus, nodes, batch)
        base = np.full_like(gpus, float(self.baseline_gpus))
        base_batch = self.workload.global_batch(base) if global_batch is None else batch / gpus * base
        t_base, _, _ = self.step_time(base, np.full_like(gpus, float(self.baseline_nodes)), base_batch)
        thr = batch / t
        speedup = thr / (base_batch / t_base)
        peak = self.workload.peak_flops
        mfu = None
        if peak:
            from advisor.scaling.features import flops_per_gpu

            mfu = flops_per_gpu(self.workload, gpus, batch) / t / peak
        return Prediction(gpus, nodes, batch, t, lo, hi, thr, batch / hi, batch / lo, speedup,
                          speedup * self.baseline_gpus / gpus, mfu, batch / naive_step(self.data, gpus, batch),
                          self.fit_warnings + self.extrapolation_warnings(gpus, nodes))

    # ---- evidence ----------------------------------------------------------------------------

    def extrapolation_warnings(self, gpus, nodes) -> list[str]:
        out = []
        far = gpus > EXTRAPOLATION_WARN * self.max_gpus_measured
        if far.any():
            out.append(f"extrapolating to {int(gpus[far].max())} GPUs, {gpus[far].max() / self.max_gpus_measured:.0f}x the "
                       f"largest measured count ({self.max_gpus_measured}): treat as an estimate, see the interval")
        wide = nodes > self.max_nodes_measured
        if wide.any():
            out.append(f"predicting up to {plural(int(nodes[wide].max()), 'node')}, past the largest measured node count "
                       f"({self.max_nodes_measured})")
        return out

    def _fit_warnings(self) -> list[str]:
        out = []
        w = self.workload
        if FAMILIES[self.family].has_overlap and not (self.coverage.steps_crossed_nodes or self.coverage.probes_crossed_nodes):
            out.append(f"no measurement crossed nodes: the inter-node terms use the declared inter_node_bandwidth "
                       f"({w.cluster.inter_node_bandwidth / 1e9:g} GB/s per node) and inter_node_latency "
                       f"({w.cluster.inter_node_latency * 1e6:g} us), not a measurement; calibrating across >= 3 nodes "
                       f"is what makes extrapolation work")
        n_counts = np.unique(self.data.gpus).size
        if self.requested_family == "auto" and n_counts < MIN_COUNTS_TO_SELECT:
            out.append(f"{plural(n_counts, 'measured GPU count')}: too few to choose a model family by cross-validation "
                       f"(needs {MIN_COUNTS_TO_SELECT}); using the physical model '{self.family}'")
        if self.noise.prior_dominated:
            from advisor.scaling.intervals import PRIOR_NOISE

            out.append(f"only {plural(self.noise.n_residuals, 'out-of-sample residual')}: intervals lean on an assumed "
                       f"{PRIOR_NOISE:.0%} run-to-run noise")
        if not self.noise.kappa_measured:
            out.append(f"too few counts to measure how error grows past the data: intervals widen by an assumed "
                       f"{self.noise.kappa:.0%} per doubling")
        out.extend(self._busbw_warnings())
        return out

    def _busbw_warnings(self) -> list[str]:
        from advisor.scaling.features import bus_bandwidth

        out = []
        largest: dict[tuple, object] = {}
        for p in self.measurements.probes:
            key = (p.op, p.gpus, p.nodes)
            if key not in largest or p.bytes > largest[key].bytes:
                largest[key] = p
        for (op, gpus, nodes), p in sorted(largest.items()):
            declared = float(bus_bandwidth(self.workload, np.array([nodes]))[0]) / 1e9
            if p.busbw < BUSBW_WARN_FRACTION * declared:
                link = "inter-node" if nodes > 1 else "intra-node"
                out.append(f"{op} on {plural(gpus, 'GPU')} over {plural(nodes, 'node')} reached {p.busbw:.3g} GB/s bus bandwidth, "
                           f"{p.busbw / declared:.0%} of the declared {link} {declared:.3g} GB/s: likely a misconfiguration "
                           "(e.g. NCCL falling back to TCP) or a wrong declared bandwidth")
        return out

    def _naive_cv(self) -> Optional[float]:
        """Leave-one-count-out error of the naive linear guess (per-GPU throughput of the largest other count)."""
        d = self.data
        counts = np.unique(d.gpus)
        if counts.size < 3:
            return None
        errors = []
        for held in counts[1:]:
            test = d.gpus == held
            pred = naive_step(d.take(~test), d.gpus[test], d.batch[test])
            errors.append(np.abs(pred - d.step[test]) / d.step[test])
        return float(np.mean(np.concatenate(errors)) * 100)

    def residuals(self) -> list[dict]:
        """In-sample fit per measured run: measured and fitted median step seconds."""
        d = self.data
        fitted = self.fitted.predict(d.gpus, d.nodes, d.batch)
        return [{"gpus": int(g), "nodes": int(n), "global_batch": float(b), "measured": float(m), "fitted": float(f),
                 "error": float((f - m) / m)} for g, n, b, m, f in zip(d.gpus, d.nodes, d.batch, d.step, fitted)]

    def describe(self) -> dict:
        """The chosen family, coefficients with units and bootstrap 90% ranges, CV errors, residuals."""
        est = self.fitted.estimator
        lo, hi = (np.quantile(self.boot.coefs, [0.05, 0.95], axis=0) if len(self.boot.coefs) >= 2
                  else (est.coef_, est.coef_))
        fixed = dict(est.fixed)
        coefficients = [{"name": c.name, "value": float(est.coef_[j]), "unit": c.unit, "meaning": c.meaning,
                         "low": float(lo[j]), "high": float(hi[j]), "fixed": j in fixed}
                        for j, c in enumerate(self.fitted.columns)]
        out = {
            "name": self.family,
            "requested": self.requested_family,
            "summary": FAMILIES[self.family].summary,
            "cv_mape": self.cv[self.family].mape,
            "families": [{"name": n, "cv_mape": cv.mape, "summary": FAMILIES[n].summary} for n, cv in self.cv.items()],
            "naive_linear_cv_mape": self.naive_cv_mape,
            "coefficients": coefficients,
            "interval": {"level": 0.9, "bootstrap": int(len(self.boot.coefs)), "residuals": self.noise.n_residuals,
                         "alternatives": [a.family.name for a in self.alternatives],
                         "widening_per_doubling": self.noise.kappa, "widening_measured": self.noise.kappa_measured},
            "measured": {"runs": len(self.measurements.runs), "steps": self.measurements.n_steps,
                         "gpus": sorted({int(g) for g in self.data.gpus}), "max_nodes": self.max_nodes_measured,
                         "probes": len(self.measurements.probes), "source": self.measurements.source},
        }
        if FAMILIES[self.family].has_overlap:
            out["overlap_gamma"] = est.gamma_
        return out


def backtest(workload: "Workload", measurements: Measurements, fit_max_gpus: int, family: str = "auto",
             n_bootstrap: int = 40, seed: int = 0) -> dict:
    """Fit on runs with gpus <= fit_max_gpus, predict the others: per-point error, MAPE, coverage.

    JSON fields (DESIGN.md §4): {"points": [{"gpus", "nodes", "measured", "predicted", "error"}],
    "mape"}, plus the interval per point, its coverage, and the fitted family.
    """
    train = measurements.gpus <= fit_max_gpus
    where = measurements.source or "--measurements"
    if not train.any():
        raise InputError.at("--fit-max-gpus", "", f"no measured run at or below this count in {where}", fit_max_gpus)
    if train.all():
        raise InputError.at("--fit-max-gpus", "", f"every measured run is at or below this count in {where}: nothing to predict",
                            fit_max_gpus)
    model = ScalingModel(workload, measurements.subset(train), family, n_bootstrap, seed)
    test = measurements.subset(~train)
    measured = test.step
    pred, lo, hi = model.step_time(test.gpus, test.nodes, test.global_batch)
    inside = (measured >= lo) & (measured <= hi)
    points = [{"gpus": int(g), "nodes": int(n), "global_batch": float(b), "measured": float(m), "predicted": float(p),
               "error": float((p - m) / m), "low": float(lo_), "high": float(hi_), "inside": bool(i)}
              for g, n, b, m, p, lo_, hi_, i in zip(test.gpus, test.nodes, test.global_batch, measured, pred, lo, hi, inside)]
    naive = naive_step(model.data, test.gpus, test.global_batch)
    return {
        "workload": workload.name,
        "fit_max_gpus": int(fit_max_gpus),
        "model": {"name": model.family, "cv_mape": model.cv[model.family].mape},
        "points": points,
        "mape": float(np.mean(np.abs(pred - measured) / measured) * 100),
        "coverage": float(inside.mean() * 100),
        "naive_linear_mape": float(np.mean(np.abs(naive - measured) / measured) * 100),
        "warnings": model.fit_warnings + model.extrapolation_warnings(test.gpus, test.nodes),
    }
