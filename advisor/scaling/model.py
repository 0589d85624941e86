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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from advisor.errors import InputError
from advisor.measurements import Measurements, from_calibration
from advisor.scaling.families import FAMILIES
from advisor.scaling.features import flops_per_gpu
from advisor.scaling.fitting import FIT_NOISE, INTER_COLUMNS, FitData, Problem, fit_family, naive_step, staged
from advisor.scaling.intervals import NoiseModel, interval, pooled_noise, posterior_draws, sigma_spread
from advisor.scaling.priors import LEARNED, LINK_TOLERANCE, Priors
from advisor.scaling.selection import leave_one_count_out
from advisor.text import plural
from advisor.topology.collectives import bus_bandwidth

if TYPE_CHECKING:
    from advisor.calibration_data import Calibration
    from advisor.spec import Workload

FAMILY_CHOICES = ("auto", *FAMILIES)

#: Warn when predicting past this multiple of the largest measured GPU count.
EXTRAPOLATION_WARN = 4.0

#: Warn when a collective probe's bus bandwidth is below this fraction of the declared link: far
#: below is a misconfiguration (NCCL over TCP sockets instead of RDMA reaches ~10-25% of an
#: InfiniBand link), not a slow network.
BUSBW_WARN_FRACTION = 0.25


def load_measurements(workload: "Workload", calibration: "Calibration" | str | Path | None = None,
                      measurements: Measurements | str | Path | None = None,
                      required: bool = True) -> Measurements | None:
    """The measurements to fit: a CSV, a calibration file, or the workload's checked-in calibration.
    None when there is none and `required` is false (the model then answers from its prior)."""
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
    return from_calibration(cal, workload)


def build_model(workload: "Workload", calibration=None, measurements=None, family: str = "auto",
                n_bootstrap: int = 40, seed: int = 0, priors: Priors = LEARNED) -> "ScalingModel":
    """Fit the scaling model of `workload` (see the module docstring); with no calibration data at
    all, the prior-only model (`calibrated` False)."""
    m = load_measurements(workload, calibration, measurements, required=False)
    return ScalingModel(workload, m, family, n_bootstrap, seed, priors)


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
    mfu: np.ndarray | None
    naive_throughput: np.ndarray
    warnings: list[str] = field(default_factory=list)

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
            })
        return out


#: The model `auto` uses: the physical topology family with learned priors (docs/model.md). Choosing
#: among families by leave-one-count-out CV was dropped: with 3-4 counts the node-unaware families
#: won on luck (the emulated cluster picked Ernest, 48% off at 8@4), and it cost 4x the solves.
DEFAULT_FAMILY = "topology"

#: Warn when a fitted coefficient sits within this factor of its physical bound (the fit leans on it).
BOUND_WARN = 1.02


class ScalingModel:
    """A fitted (or, without measurements, prior-only) scaling curve for one workload, with intervals."""

    def __init__(self, workload: "Workload", measurements: Measurements | None, family: str = "auto",
                 n_bootstrap: int = 40, seed: int = 0, priors: Priors = LEARNED):
        if family not in FAMILY_CHOICES:
            raise InputError.at("--model", "", f"unknown model family; choose from {', '.join(FAMILY_CHOICES)}", family)
        from threadpoolctl import threadpool_limits

        # Small least-squares problems: multi-threaded BLAS only adds contention, and one thread
        # makes the solver's arithmetic the same on every machine.
        with threadpool_limits(limits=1):
            self._fit(workload, measurements, family, n_bootstrap, seed, priors)

    def _fit(self, workload, measurements, family, n_draws, seed, priors) -> None:
        self.workload = workload
        self.measurements = measurements
        #: step times were measured (a file of collective probes alone leaves compute to the prior)
        self.calibrated = measurements is not None and bool(measurements.runs)
        #: memory peaks the calibration measured (advisor.topology.memory.MeasuredPeak), read with its runs
        self.peaks = list(measurements.peaks) if measurements is not None else []
        self.problem = Problem.of(workload, measurements, priors)
        self.data = self.problem.data
        self.coverage = self.problem.coverage
        self.requested_family = family
        self.family = DEFAULT_FAMILY if family == "auto" else family
        fam = FAMILIES[self.family]
        self.fitted = fit_family(fam, self.problem)
        est = self.fitted.estimator
        self.cv = {self.family: leave_one_count_out(fam, self.problem, init=(est.coef_, est.gamma_))}
        self.naive_cv_mape = self._naive_cv()
        in_sample = self._log_residuals()
        self.anchor = self._anchor(in_sample)
        self.noise = NoiseModel.from_residuals(self.cv[self.family].log_residuals, priors.widening, priors.noise,
                                               in_sample)
        if self.calibrated:  # the posterior at the data's own noise (the fit weighed them at FIT_NOISE)
            est.cov_ = est.covariance((FIT_NOISE / pooled_noise(in_sample, priors.noise)) ** 2)
        self.draws = posterior_draws(est, n_draws, seed)
        if self.calibrated:
            self.baseline_gpus = int(self.data.gpus.min())
            self.baseline_nodes = int(self.data.nodes[self.data.gpus == self.baseline_gpus].min())
            self.max_gpus_measured = int(self.data.gpus.max())
            self.max_nodes_measured = int(self.data.nodes.max())
        else:
            self.baseline_gpus = self.baseline_nodes = 1
            self.max_gpus_measured = self.max_nodes_measured = 0
        self.fit_warnings = self._fit_warnings()

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

    def for_workload(self, workload: "Workload") -> "ScalingModel":
        """This fitted model predicting for another layout of the same job (`workload` differs only in
        [parallelism], e.g. advisor.topology.layouts.with_layout): the coefficients are factors on compute and on
        each link's declared speed, so they carry over; the design follows the new layout's traffic."""
        import copy
        from dataclasses import replace

        other = copy.copy(self)
        other.workload = workload
        other.problem = replace(self.problem, workload=workload)
        other.fitted = replace(self.fitted, problem=other.problem)
        return other

    def distance(self, gpus, nodes) -> np.ndarray:
        """How far past the data each placement is: max(N / largest count, nodes / largest node count), >= 1."""
        if not self.calibrated:
            return np.ones_like(np.asarray(gpus, float))
        return np.maximum(np.maximum(gpus / self.max_gpus_measured, nodes / self.max_nodes_measured), 1.0)

    def step_time(self, gpus, nodes=None, global_batch=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(median, low, high) seconds per optimizer step; low/high bound a 90% prediction interval."""
        gpus, nodes, batch = self._placements(gpus, nodes, global_batch)
        d = self.fitted.design(gpus, nodes, batch)
        median = self.fitted.estimator.predict(d.X) * self.anchoring(gpus)
        spread = sigma_spread(d.X, self.fitted.estimator)
        low, high = interval(median, spread, self.noise, self.distance(gpus, nodes))
        if self.workload.peak_flops:  # neither anchoring nor the band lifts achieved FLOP/s above the peak
            from advisor.scaling.features import compute_seconds

            floor = compute_seconds(self.workload, gpus, batch)
            median, low, high = np.maximum(median, floor), np.maximum(low, floor), np.maximum(high, floor)
        return median, low, high

    def _anchor(self, in_sample: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log2 count, median log residual) per measured count: what the fit misses where it was measured."""
        d = self.data
        if d.empty:
            return np.zeros(0), np.zeros(0)
        counts = np.unique(d.gpus)
        return np.log2(counts), np.array([float(np.median(in_sample[d.gpus == c])) for c in counts])

    def anchoring(self, gpus) -> np.ndarray:
        """Factor on the fitted step: exp of the fit's median log residual at the measured counts,
        interpolated in log2 N between them and held past the ends.

        The model predicts how the step changes from the measured counts; the level at the nearest
        measured count is what was measured there. A misfit at the largest count (per-row batches the
        model cannot reconcile, MPT-13B 8 and 16 GPUs: -10% and +8%) is the linear guess's strength:
        the guess is the measurement there. Carried forward, the prediction is the linear guess
        modulated by the model's physics, and with a good fit (residuals near 0) nothing changes."""
        x, r = self.anchor
        if x.size == 0:
            return np.ones_like(np.asarray(gpus, float))
        return np.exp(np.interp(np.log2(np.asarray(gpus, float)), x, r))

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
        mfu = flops_per_gpu(self.workload, gpus, batch) / t / peak if peak else None
        return Prediction(gpus, nodes, batch, t, lo, hi, thr, batch / hi, batch / lo, speedup,
                          speedup * self.baseline_gpus / gpus, mfu, batch / self.naive_step(gpus, batch),
                          self.fit_warnings + self.extrapolation_warnings(gpus, nodes))

    def naive_step(self, gpus, batch) -> np.ndarray:
        """The naive linear guess: per-GPU throughput of the largest measured count held (of the
        prior's one-GPU prediction before any measurement)."""
        if self.calibrated:
            return naive_step(self.data, gpus, batch)
        one = np.ones(1)
        b1 = np.asarray(batch, float) / np.asarray(gpus, float)
        t1 = self.fitted.predict(np.ones_like(b1), np.ones_like(b1), b1)
        prior_data = FitData(np.ones_like(b1), np.ones_like(b1), b1, t1, np.full_like(b1, np.nan), one)
        return naive_step(prior_data, gpus, batch)

    # ---- evidence ----------------------------------------------------------------------------

    def extrapolation_warnings(self, gpus, nodes) -> list[str]:
        if not self.calibrated:
            return []
        out = []
        far = gpus > EXTRAPOLATION_WARN * self.max_gpus_measured
        if far.any():
            out.append(f"extrapolating to {int(gpus[far].max())} GPUs, "
                       f"{gpus[far].max() / self.max_gpus_measured:.0f}x the largest measured count "
                       f"({self.max_gpus_measured}): treat as an estimate, see the interval")
        wide = nodes > self.max_nodes_measured
        if wide.any():
            out.append(f"predicting up to {plural(int(nodes[wide].max()), 'node')}, "
                       f"past the largest measured node count ({self.max_nodes_measured})")
        return out

    def _fit_warnings(self) -> list[str]:
        w = self.workload
        if not self.calibrated:
            if self.measurements is None:
                return [(f"uncalibrated: no measurement of {w.name}; every number is the prior's first estimate "
                         "from the spec (MFU, achieved bandwidth and overlap as seen across published jobs), "
                         "with wide intervals; run `advisor calibrate` or pass --calibration/--measurements")]
            measured = ", ".join(sorted(k for k, v in self.term_sources().items() if v != "prior")) or "nothing"
            return [(f"uncalibrated: no step of {w.name} measured, only "
                     f"{plural(len(self.measurements.probes), 'collective probe')}: they measure {measured}; compute "
                     "(MFU), per-step constants and overlap are the prior's, with wide intervals; add step times "
                     "(`advisor calibrate`, `advisor import torchtitan`, --measurements FILE.csv) to pin them"),
                    *self._bound_warnings(), *self._busbw_warnings()]
        out = []
        crossed = self.coverage.steps_crossed_nodes or self.coverage.probes_crossed_nodes
        if FAMILIES[self.family].has_overlap and not crossed:
            out.append(f"no measurement crossed nodes: the inter-node terms come from the declared "
                       f"inter_node_bandwidth ({w.cluster.inter_node_bandwidth / 1e9:g} GB/s per node) and "
                       f"inter_node_latency ({w.cluster.inter_node_latency * 1e6:g} us) with the prior's achieved "
                       "share, not a measurement; calibrating across >= 3 nodes is what makes extrapolation work")
        n_counts = np.unique(self.data.gpus).size
        if n_counts < 3:
            out.append(f"{plural(n_counts, 'measured GPU count')}: the prior carries what the data cannot pin; "
                       "3+ counts across 2+ nodes narrow the interval")
        if self.noise.prior_dominated:
            out.append(f"only {plural(self.noise.n_residuals, 'out-of-sample residual')}: intervals lean on an assumed "
                       f"{self.noise.prior_noise:.0%} run-to-run noise")
        out.extend(self._bound_warnings())
        out.extend(self._busbw_warnings())
        return out

    def _bound_warnings(self) -> list[str]:
        """Say when the fit leans on a physical bound: the data asked for more than physics allows."""
        est = self.fitted.estimator
        lo = dict(est.lower)
        out = []
        for j, col in enumerate(self.fitted.columns):
            if j not in lo or col.name.endswith("_latency") or est.coef_[j] > BOUND_WARN * lo[j]:
                continue
            if col.name == "compute":
                out.append("the fit leans on MFU <= 100%: measured steps are as fast as the declared peak_flops "
                           f"({self.workload.peak_flops:.3g} FLOP/s) allows; check peak_flops and the model's FLOPs")
            else:
                link = col.name.split("_")[0]
                out.append(f"the fit leans on the {link}-node link bound: it asked for a link faster than declared "
                           f"(> {1 + LINK_TOLERANCE:.2f}x); check {link}_node_bandwidth")
        return out

    def term_sources(self) -> dict[str, str]:
        """Per fitted column (and `gamma`): what pinned it, "steps", "probes", "steps+probes" or "prior".
        A column is measured when a measured step's or probe's design row reaches it (non-zero); γ
        when a step mixed compute with communication. The rest is the prior's (docs/model.md)."""
        cols = self.fitted.columns
        d = self.data
        fam = FAMILIES[self.family]
        steps = self.problem.data_design(fam, d.gpus, d.nodes, d.batch).X if not d.empty else np.zeros((0, len(cols)))
        probes = self.measurements.probes if self.measurements is not None else []
        probe_X, _ = fam.probe_design(self.workload, list(probes), self.coverage)
        if probe_X.size == 0:
            probe_X = np.zeros((0, len(cols)))
        if staged(fam, self.problem):  # a staged fit: only one-node rows and probes reach the one-node columns
            local = np.array([c.name not in INTER_COLUMNS for c in cols])
            steps, probe_X = steps.copy(), probe_X.copy()
            steps[np.ix_(d.nodes > 1, local)] = 0.0
            probe_X[np.ix_(np.array([p.nodes > 1 for p in probes], bool), local)] = 0.0
        out = {}
        for j, c in enumerate(cols):
            by = [k for k, X in (("steps", steps), ("probes", probe_X)) if X.shape[0] and np.any(X[:, j] != 0)]
            out[c.name] = "+".join(by) or "prior"
        if fam.has_overlap:
            nc = self.fitted.estimator.n_compute
            mixed = steps.shape[0] and np.any((steps[:, :nc] != 0).any(axis=1) & (steps[:, nc:] != 0).any(axis=1))
            out["gamma"] = "steps" if mixed else "prior"
        return out

    def _busbw_warnings(self) -> list[str]:
        """A probe far below its declared link (a misconfiguration) or above what its algorithm can reach
        on it (the declaration is wrong): busbw against the algorithm's ceiling (advisor.imports.algorithm;
        a 2-node tree all-reduce reports up to 2(N-1)/N x the NICs' rate, NVIDIA/nccl#946)."""
        from advisor.imports.algorithm import busbw_ceiling_factor, expected_algorithm

        out = []
        largest: dict[tuple, object] = {}
        for p in self.measurements.probes:
            key = (p.op, p.gpus, p.nodes, p.algorithm)
            if key not in largest or p.bytes > largest[key].bytes:
                largest[key] = p
        for (op, gpus, nodes, algo), p in sorted(largest.items(), key=lambda kv: str(kv[0])):
            declared = float(bus_bandwidth(self.workload, np.array([nodes]))[0]) / 1e9
            ceiling = busbw_ceiling_factor(algo, op, gpus, nodes) * declared
            link = "inter-node" if nodes > 1 else "intra-node"
            algo = algo or expected_algorithm(op, nodes)
            what = f"{op} ({algo}) on {plural(gpus, 'GPU')} over {plural(nodes, 'node')}"
            if p.busbw < BUSBW_WARN_FRACTION * ceiling:
                out.append(f"{what} reached {p.busbw:.3g} GB/s bus bandwidth, {p.busbw / ceiling:.0%} of the "
                           f"{ceiling:.3g} GB/s it reaches on the declared {link} {declared:.3g} GB/s: likely a "
                           "misconfiguration (e.g. NCCL falling back to TCP) or a wrong declared bandwidth")
            elif p.busbw > (1 + LINK_TOLERANCE) * ceiling:
                out.append(f"{what} measured {p.busbw:.3g} GB/s bus bandwidth, above the {ceiling:.3g} GB/s it "
                           f"reaches on the declared {link} {declared:.3g} GB/s: the declaration contradicts the "
                           "measurement; raise the declared bandwidth")
        return out

    def _naive_cv(self) -> float | None:
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

    def _log_residuals(self) -> np.ndarray:
        d = self.data
        if d.empty:
            return np.zeros(0)
        return np.log(d.step / np.maximum(self.fitted.predict_measured(d.gpus, d.nodes, d.batch), 1e-300))

    def residuals(self) -> list[dict]:
        """In-sample fit per measured placement: measured and fitted median step seconds."""
        d = self.data
        if d.empty:
            return []
        fitted = self.fitted.predict_measured(d.gpus, d.nodes, d.batch)
        return [{"gpus": int(g), "nodes": int(n), "global_batch": float(b), "measured": float(m), "fitted": float(f),
                 "error": float((f - m) / m)}
                for g, n, b, m, f in zip(d.gpus, d.nodes, d.batch, d.step, fitted, strict=True)]

    def describe(self) -> dict:
        """Calibrated or not, the family, coefficients with units and posterior 90% ranges, CV errors."""
        est = self.fitted.estimator
        lo, hi = (np.quantile(self.draws.coefs, [0.05, 0.95], axis=0) if len(self.draws.coefs) >= 2
                  else (est.coef_, est.coef_))
        fixed = dict(est.fixed)
        sources = self.term_sources()
        coefficients = [{"name": c.name, "value": float(est.coef_[j]), "unit": c.unit, "meaning": c.meaning,
                         "low": float(lo[j]), "high": float(hi[j]), "fixed": j in fixed, "measured_by": sources[c.name]}
                        for j, c in enumerate(self.fitted.columns)]
        m = self.measurements
        out = {
            "name": self.family,
            "calibrated": self.calibrated,
            "terms": {"measured": sorted(k for k, v in sources.items() if v != "prior"),
                      "prior": sorted(k for k, v in sources.items() if v == "prior"), "by": sources},
            "requested": self.requested_family,
            "summary": FAMILIES[self.family].summary,
            "cv_mape": self.cv[self.family].mape,
            "families": [{"name": n, "cv_mape": cv.mape, "summary": FAMILIES[n].summary} for n, cv in self.cv.items()],
            "naive_linear_cv_mape": self.naive_cv_mape,
            "coefficients": coefficients,
            "priors": self.problem.priors.as_dict(),
            "interval": {"level": 0.9, "posterior_draws": len(self.draws.coefs), "residuals": self.noise.n_residuals,
                         "widening_per_doubling": self.noise.widening},
            "measured": {"runs": len(m.runs) if m else 0, "steps": m.n_steps if m else 0,
                         "gpus": sorted({int(g) for g in self.data.gpus}), "max_nodes": self.max_nodes_measured,
                         "probes": len(m.probes) if m else 0, "source": m.source if m else None},
        }
        if FAMILIES[self.family].has_overlap:
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
    pred, lo, hi = model.step_time(test.gpus, test.nodes, test.global_batch)
    inside = (measured >= lo) & (measured <= hi)
    points = [{"gpus": int(g), "nodes": int(n), "global_batch": float(b), "measured": float(m), "predicted": float(p),
               "error": float((p - m) / m), "low": float(lo_), "high": float(hi_), "inside": bool(i)}
              for g, n, b, m, p, lo_, hi_, i in zip(test.gpus, test.nodes, test.global_batch, measured, pred, lo, hi,
                                                     inside, strict=True)]
    naive = naive_step(model.data, test.gpus, test.global_batch)
    return {
        "workload": workload.name,
        "fit_max_gpus": int(fit_max_gpus),
        "model": {"name": model.family, "calibrated": True, "cv_mape": model.cv[model.family].mape},
        "points": points,
        "mape": float(np.mean(np.abs(pred - measured) / measured) * 100),
        "coverage": float(inside.mean() * 100),
        "naive_linear_mape": float(np.mean(np.abs(naive - measured) / measured) * 100),
        "warnings": model.fit_warnings + model.extrapolation_warnings(test.gpus, test.nodes),
    }
