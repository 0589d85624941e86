"""Which calibration runs to pay for: node-aware experiment design (`advisor plan-calibration`).

Ernest (Venkataraman et al., NSDI'16, §4.2) picks the training configurations to measure by
optimal experiment design: among candidate runs, choose those that minimise the variance of the
fitted model's prediction at the target scale, subject to a budget. We do the same with the
scaling model's own physical design (advisor.scaling.families, `topology`), made node-aware:

- Candidates: powers of two inside one node, and every whole number of nodes from 2 to
  `max_nodes` (multi-node rentals come in whole nodes); unless the spec calibrates a proxy
  (`calibration.proxy_layers`), counts whose GPUs cannot hold the training state are left out
  (advisor.topology.layouts.Layout.fits, the spec's layout).
- Identifiability: a plan must span at least 3 distinct node counts (1, 2 and one more). From one
  node count the inter-node terms are not identifiable at all; from two, there is one multi-node
  point, so how the inter-node cost grows with the node count (tree hops ~ log M, ring ~ 2(M-1))
  is assumed, not measured; a third node count tests it. The plan is refused, with the cheapest
  such plan's cost, when the budget cannot pay for that.
- Criterion (c-optimal design at the target x*): with run-to-run noise of relative size sigma
  (advisor.scaling.priors.LEARNED.noise, the run-to-run noise learned from the corpus) each run i
  contributes its compute part and its exposed communication (advisor calibrate times each step
  also without gradient sync; the fit matches both), x x^T / (sigma T_i)^2 for each, to the
  information matrix, and so does each collective probe the run makes (advisor calibrate probes
  all_reduce, reduce_scatter and all_gather at several sizes at every N > 1; they pin the
  bandwidth and latency columns of their link, `Family.probe_design`); a weak prior (sd 100% of
  each nominal coefficient, 100% of the target step for the seconds-valued ones) keeps it
  invertible. Var T(x*) = x*^T (sum + prior)^-1 x*; the reported interval is the 90% half-width
  Z90 sqrt(Var) / T(x*) (advisor.step_model.Z90 = 1.645), before (checked-in measurements only)
  and after the plan. This is the design-time part of the model's uncertainty (the fitted model
  adds out-of-sample residuals and extrapolation widening, docs/model.md).
- Greedy, like Ernest's rounding of its convex relaxation: the mandatory identifying runs first
  (on the smallest node count its smallest and largest placement, e.g. 2 GPUs and a full node; the
  next node count; then the third node count that buys the most variance reduction per dollar),
  then the run with the largest reduction per dollar while the budget lasts and a run still
  narrows the interval by at least MIN_GAIN.

Cost: each run is rented on its own (a SkyPilot task per placement; in one Slurm allocation the
start-ups are shared, so this is an upper bound): billed GPUs are N inside one node and whole
nodes beyond, for start-up + (warm-up + timed steps) x 2 step times (advisor calibrate pairs every
step with one without gradient synchronisation; the compute-only one is priced as a full step, an
upper bound), at the tier's usd_per_gpu_hour, billed at least the tier's min_hours. The step priced
is the one calibrate runs (`_StepModel.calibration_steps`): the batch of calibrate.plan.batch_plan,
the same function the worker splits its batch with (its rounding and its cap on accumulated
micro-batches), on the proxy calibrate builds (calibrate.plan.proxy_workload: `proxy_layers` of the
layers, with the embedding and head the proxy keeps). Its seconds are predict's median for the
declared model at that placement and batch (the workload's fitted model when it has calibration
data, else its prior: the first estimate `advisor predict` prints, uncalibrated) times the proxy's
share of that step in the model's own terms: the fitted estimator on the proxy's design (its
compute, its FSDP and tensor-parallel traffic, the same per-step constants) over the estimator on the
declared model's, at the same placement and batch. Without a proxy the share is 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from advisor.errors import InputError
from advisor.step_model import Z90
from advisor.text import plural

if TYPE_CHECKING:
    from advisor.spec import Tier, Workload

#: Seconds from asking for nodes to the first timed step when nothing says otherwise: booting
#: cloud nodes, pulling an image, torch start-up, NCCL init and the collective probes. An
#: assumption (SkyPilot and cloud consoles report minutes to provision GPU nodes); --startup sets it.
DEFAULT_STARTUP_SECONDS = 600.0

#: Stop adding runs once one narrows the target interval by less than this fraction.
MIN_GAIN = 0.02

#: Default largest node count to consider.
DEFAULT_MAX_NODES = 8


@dataclass(frozen=True)
class PlannedRun:
    gpus: int
    nodes: int
    billed_gpus: int
    step_seconds: float
    hours: float
    usd: float
    #: samples per step the run really trains (calibrate.plan.batch_plan) and micro-batches per rank
    global_batch: int = 0
    micro_batches: int = 0

    @property
    def gpu_hours(self) -> float:
        return self.billed_gpus * self.hours

    @property
    def placement(self) -> str:
        return f"{self.gpus}@{self.nodes}"


@dataclass
class CalibrationPlan:
    workload: "Workload"
    tier: "Tier"
    budget: float | None
    target: tuple[int, int]
    runs: list[PlannedRun]
    interval_now: float
    interval_after: float
    step_source: str
    startup_seconds: float
    #: the model's 90% band at the target now and with the planned runs (advisor.calibrate.promise)
    band_now: object = None
    band_after: object = None
    #: candidate placements left out because their timed steps alone would exceed MAX_RUN_SECONDS
    skipped: tuple = ()

    @property
    def usd(self) -> float:
        return float(sum(r.usd for r in self.runs))

    @property
    def node_counts(self) -> list[int]:
        return sorted({r.nodes for r in self.runs})


def dollars(x: float) -> str:
    """Dollars as a reader compares calibration runs: cents under $10 ("0.49"), whole dollars above
    ("1,234"); the plan's table, total and refusal all print money so."""
    return f"{x:,.2f}" if abs(x) < 10 else f"{x:,.0f}"


def default_tier(w: "Workload", name: str | None) -> "Tier":
    """--tier NAME, else the first tier without a minimum billing period or preemptions."""
    if name is not None:
        return w.tier_named(name)
    plain = [t for t in w.tiers if t.min_hours == 0 and t.preemptions_per_node_hour == 0]
    return (plain or list(w.tiers))[0]


def candidates(w: "Workload", max_nodes: int, max_gpus: int | None = None) -> list[tuple[int, int]]:
    """Placements worth measuring: powers of two in one node, then whole nodes (module docstring), up to
    `max_gpus` (default cluster.max_gpus; a tier's cap) and only where the layout splits the count and
    the batch divides over its data-parallel ranks (advisor.batch.divides). With a proxy
    (calibration.proxy_layers, sized to fit) memory is not asked; without one the full model must fit."""
    from advisor.batch import divides
    from advisor.topology.layouts import build

    g = w.cluster.gpus_per_node
    cap = w.cluster.max_gpus if max_gpus is None else max_gpus
    inside = [1 << i for i in range(g.bit_length()) if (1 << i) <= g]
    places = [(n, 1) for n in inside] + [(m * g, m) for m in range(2, max_nodes + 1)]
    places = [(n, m) for n, m in places if n <= cap]
    if not places:
        return []
    lay = build(w, [n for n, _ in places], [m for _, m in places])
    ok = (lay.valid if w.calibration.proxy_layers is not None else lay.fits(w)) & divides(w, [n for n, _ in places])
    return [p for p, fit in zip(places, ok.tolist(), strict=True) if fit]


class _StepModel:
    """Step seconds and physical design rows at placements (module docstring: where they come from)."""

    def __init__(self, w: "Workload"):
        from advisor.scaling.families import FAMILIES, Coverage

        self.w = w
        self.family = FAMILIES["topology"]
        self.coverage = Coverage(steps_crossed_nodes=True, probes_crossed_nodes=True)
        from advisor.scaling import build_model
        from advisor.scaling.priors import LEARNED

        # predict's model, fitted or the prior alone: the plan's step times are predict's medians
        self.model = build_model(w, n_bootstrap=5)
        self.source = ("the workload's fitted model" if self.model.calibrated
                       else "the prior (uncalibrated: predict's first estimate)")
        #: the prior's compute coefficient (1/MFU at the catalog peak, advisor.scaling.priors), the
        #: scale of the weak prior on it in the information matrix
        self.inverse_mfu = math.exp(LEARNED.for_workload(w).log_inv_mfu)

    def design(self, gpus, nodes, batch=None) -> np.ndarray:
        g = np.asarray(gpus, float)
        batch = self.w.global_batch(g) if batch is None else batch
        return self.family.design(self.w, g, np.asarray(nodes, float), batch, self.coverage)

    def nominal(self, d) -> np.ndarray:
        from advisor.scaling.estimator import tie

        beta = np.zeros(d.X.shape[1])
        for j, col in enumerate(d.columns):
            if col.name == "compute":
                beta[j] = self.inverse_mfu
            elif col.unit == "x declared":
                beta[j] = 1.0
        return tie(beta, d.tied)  # the bubble and the exposed traffic at their sources' values

    def step_seconds(self, gpus, nodes, batch=None) -> np.ndarray:
        return np.asarray(self.model.step_time(np.asarray(gpus, float), np.asarray(nodes, float), batch)[0], float)

    def run_batch(self, gpus) -> np.ndarray:
        """Samples per step each calibration run trains at these counts: calibrate.plan.batch_plan, the
        worker's own split (rounding and capped accumulation), not the policy's declared batch."""
        from advisor.calibrate.plan import batch_plan

        return np.array([float(batch_plan(self.w, int(g)).global_batch) for g in np.atleast_1d(gpus)])

    def calibration_steps(self, gpus, nodes) -> np.ndarray:
        """Seconds of one step of the run `advisor calibrate` makes at each placement (module
        docstring, Cost): predict's median for the declared model at the run's batch, times the proxy's
        share of it as the fitted estimator prices the proxy's design against the declared one's."""
        from advisor.calibrate.plan import proxy_workload

        g, n = np.asarray(gpus, float), np.asarray(nodes, float)
        batch = self.run_batch(g)
        full = self.step_seconds(g, n, batch)
        proxy = proxy_workload(self.w)
        if proxy is self.w:
            return full
        share = (self.model.for_workload(proxy).record.fitted.predict(g, n, batch)
                 / self.model.record.fitted.predict(g, n, batch))
        return full * share


def _cost(w: "Workload", tier: "Tier", gpus: int, nodes: int, step: float, startup: float) -> PlannedRun:
    from advisor.calibrate.plan import batch_plan

    billed = gpus if nodes == 1 else nodes * w.cluster.gpus_per_node
    steps = w.calibration.warmup_steps + w.calibration.steps
    hours = max((startup + 2 * steps * step) / 3600.0, tier.min_hours)
    split = batch_plan(w, gpus)
    return PlannedRun(gpus, nodes, billed, step, hours, billed * hours * tier.usd_per_gpu_hour,
                      split.global_batch, len(split.micro_batches))


class _Information:
    """Prediction variance at the target as runs are added (module docstring: criterion)."""

    def __init__(self, sm: _StepModel, target: tuple[int, int], measured: list[tuple[int, int]]):
        from advisor.scaling.priors import LEARNED

        self.sm, self.sigma = sm, LEARNED.noise
        d = sm.design([target[0]], [target[1]])
        self.x_star = d.X[0]
        self.t_star = float(sm.step_seconds([target[0]], [target[1]])[0])
        nominal = sm.nominal(d)
        sd = np.where(nominal > 0, nominal, self.t_star)
        self.base = np.diag(1.0 / sd**2)
        for p in measured:
            self.base = self.base + self.row(p)

    def row(self, p: tuple[int, int]) -> np.ndarray:
        """Information of one calibration run: its compute part and exposed communication (advisor
        calibrate pairs each step with one without gradient sync), and at N > 1 its probes; at the
        batch the run trains (calibrate.plan.batch_plan), which its result records for the fit."""
        batch = self.sm.run_batch([p[0]])
        d = self.sm.design([p[0]], [p[1]], batch)
        t = float(self.sm.step_seconds([p[0]], [p[1]], batch)[0])
        compute, comm = d.X[0].copy(), d.X[0].copy()
        compute[d.n_compute :] = 0.0
        comm[: d.n_compute] = 0.0
        info = (np.outer(compute, compute) + np.outer(comm, comm)) / (self.sigma * t) ** 2
        X = probe_rows(self.sm, p)
        if len(X):
            t_probe = X @ self.sm.nominal(self.sm.design([p[0]], [p[1]]))
            info = info + (X / (self.sigma * t_probe)[:, None]).T @ (X / (self.sigma * t_probe)[:, None])
        return info

    def half_width(self, info: np.ndarray) -> float:
        var = float(self.x_star @ np.linalg.solve(info, self.x_star))
        return Z90 * math.sqrt(max(var, 0.0)) / self.t_star


def probe_rows(sm: _StepModel, p: tuple[int, int]) -> np.ndarray:
    """Design rows of the collective probes `advisor calibrate` runs at placement p (worker step 4:
    all_reduce, reduce_scatter, all_gather at calibrate.plan.probe_sizes), as the fit sees them."""
    from types import SimpleNamespace

    from advisor.calibrate.plan import probe_sizes

    gpus, nodes = p
    if gpus < 2:
        return np.zeros((0, sm.design([1], [1]).X.shape[1]))
    probes = [
        SimpleNamespace(op=op, gpus=gpus, nodes=nodes, bytes=b, seconds=1.0)
        for op in ("all_reduce", "reduce_scatter", "all_gather")
        for b in probe_sizes(sm.w.model.gradient_bytes, "cuda", gpus)
    ]
    X, _ = sm.family.probe_design(sm.w, probes, sm.coverage)
    return X


def _measured_placements(w: "Workload") -> list[tuple[int, int]]:
    from advisor.calibration_data import load_workload_calibration

    try:
        cal = load_workload_calibration(w.name, w.source)
    except InputError:
        return []
    return [] if cal is None else [(r.gpus, r.nodes) for r in cal.runs]


def _check_target_runs(w: "Workload", model, target: tuple[int, int]) -> None:
    """Refuse a --target the job cannot run (memory, batch; advisor.planning.runnable, with the calibration's
    memory evidence): predict leaves it out, so the plan would pin an interval at a plan that does not fit
    (--target 1 under llm7b: 8B parameters' training state on one 96 GB GPU)."""
    from advisor.planning import runnable
    from advisor.topology.memory import memory_evidence

    run = runnable.of(w, [target[0]], [target[1]], memory_evidence(model))
    if not run.ok[0]:
        raise InputError.at("--target", "", f"{target[0]}@{target[1]} cannot run: {run.reason(0)}; predict leaves "
                            "it out, so there is no interval to narrow: pin a count the job can run",
                            f"{target[0]}@{target[1]}")


def plan_calibration(
    w: "Workload",
    budget: float | None = None,
    max_nodes: int | None = None,
    tier_name: str | None = None,
    target: tuple[int, int] | None = None,
    startup_seconds: float = DEFAULT_STARTUP_SECONDS,
) -> CalibrationPlan:
    """The runs to measure (module docstring). InputError when no node-aware plan fits the budget."""
    tier = default_tier(w, tier_name)
    g = w.cluster.gpus_per_node
    capped = tier.max_gpus is not None and tier.max_gpus < w.cluster.max_gpus
    cap = tier.max_gpus if capped else w.cluster.max_gpus
    limit = max(1, cap // g)
    max_nodes = min(max_nodes if max_nodes is not None else DEFAULT_MAX_NODES, limit)
    if max_nodes < 3:
        allows = f"tier {tier.name}'s max_gpus ({cap})" if capped else "cluster.max_gpus"
        raise InputError.at(
            "--max-nodes",
            "",
            "the inter-node terms need runs on at least 3 distinct node counts "
            f"(1, 2 and 3+); {allows} allows {plural(limit, 'node')}",
            max_nodes,
        )
    from advisor.calibrate import promise

    model = promise.current_model(w)
    if target is not None:  # refused before any run is priced
        _check_target_runs(w, model, target)
    target = target or (w.cluster.max_gpus, int(w.nodes(w.cluster.max_gpus)))
    sm = _StepModel(w)
    places = candidates(w, max_nodes, cap)
    steps = sm.calibration_steps([p[0] for p in places], [p[1] for p in places])
    runs = {p: _cost(w, tier, p[0], p[1], float(s), startup_seconds) for p, s in zip(places, steps, strict=True)}
    runs, skipped = _drop_long_runs(w, runs)
    info = _Information(sm, target, _measured_placements(w))
    chosen = _choose(runs, info, budget)
    chosen.sort(key=lambda r: (r.nodes, r.gpus))
    now, later = promise.band(model, target), promise.after(model, [(r.gpus, r.nodes) for r in chosen], target)
    return CalibrationPlan(w, tier, budget, target, chosen, now.half_width, later.half_width, sm.source,
                           startup_seconds, now, later, tuple(skipped))


#: Longest a planned run's timed steps (warm-up and timed, each twice) may take: a calibration
#: measures scaling, and a count whose steps alone run for hours buys nothing a shorter one does
#: not; such counts are left out. Capped accumulation (calibrate.plan.batch_plan) already keeps a
#: small count of a fixed-global job short (a 13B job's 1,024-sample batch on one GPU was priced at
#: 7.2 h before it); what is left here is a single micro-batch that is itself that slow.
MAX_RUN_SECONDS = 3600.0


def _drop_long_runs(w: "Workload", runs: dict) -> tuple[dict, list[tuple[int, int]]]:
    """`runs` without the placements whose timed steps exceed MAX_RUN_SECONDS, unless that leaves
    fewer than 3 node counts (then all are kept: the plan must identify the inter-node terms)."""
    steps = w.calibration.warmup_steps + w.calibration.steps
    keep = {p: r for p, r in runs.items() if 2 * steps * r.step_seconds <= MAX_RUN_SECONDS}
    if len({p[1] for p in keep}) < 3:
        return runs, []
    return keep, sorted(set(runs) - set(keep))


def _choose(runs: dict, info: _Information, budget: float | None) -> list[PlannedRun]:
    """The mandatory identifying runs, the best third node count, then greedy extras (module docstring)."""
    counts = sorted({p[1] for p in runs})
    if len(counts) < 3:
        raise InputError.at("plan-calibration", "", "fewer than 3 node counts have placements that fit in memory and "
                            "cluster.max_gpus; raise --max-nodes or set calibration.proxy_layers", counts)
    first = sorted(p for p in runs if p[1] == counts[0])
    mandatory = list(dict.fromkeys([first[0], first[-1], min(p for p in runs if p[1] == counts[1])]))
    more = [p for p in runs if p[1] > counts[1]]
    spent = sum(runs[p].usd for p in mandatory)
    affordable = [p for p in more if budget is None or spent + runs[p].usd <= budget]
    if not affordable:
        cheapest = min(more, key=lambda p: runs[p].usd)
        plan = ", ".join(f"{n}@{m}" for n, m in [*mandatory, cheapest])
        raise InputError.at("--budget", "", f"the cheapest plan over 3 node counts ({plan}) costs "
                            f"${dollars(spent + runs[cheapest].usd)}", budget)
    base = info.base + sum(info.row(p) for p in mandatory)
    third = max(affordable, key=lambda p: _gain_per_usd(info, base, runs, p)) if budget is not None else min(more)
    chosen = [*mandatory, third]
    if budget is not None:
        chosen = _greedy(runs, info, base + info.row(third), chosen, budget - spent - runs[third].usd)
    return [runs[p] for p in chosen]


def _gain_per_usd(info: _Information, now: np.ndarray, runs: dict, p: tuple[int, int]) -> float:
    return (info.half_width(now) - info.half_width(now + info.row(p))) / max(runs[p].usd, 1e-9)


def _greedy(runs: dict, info: _Information, now: np.ndarray, chosen: list, left: float) -> list:
    """Add the run with the most narrowing per dollar while it fits and narrows by >= MIN_GAIN."""
    while True:
        rest = [p for p in runs if p not in chosen and runs[p].usd <= left]
        if not rest:
            return chosen
        best = max(rest, key=lambda p: _gain_per_usd(info, now, runs, p))
        if info.half_width(now) - info.half_width(now + info.row(best)) < MIN_GAIN * info.half_width(now):
            return chosen
        chosen = [*chosen, best]
        now = now + info.row(best)
        left -= runs[best].usd


def commands(plan: CalibrationPlan) -> list[str]:
    """Shell commands that run the plan: local counts with `advisor calibrate --gpus`, the rest emitted."""
    from advisor.calibrate.launchers.quoting import relative_path, shell_quote

    src = plan.workload.source
    spec = shell_quote(relative_path(src)) if src is not None else "WORKLOAD.toml"
    local = ",".join(str(r.gpus) for r in plan.runs if r.nodes == 1)
    multi = ",".join(r.placement for r in plan.runs if r.nodes > 1)
    out = []
    if local:
        out.append(f"advisor calibrate {spec} --gpus {local}")
    if multi:
        out.append(
            f"advisor calibrate {spec} --gpus {multi} --emit slurm > calibrate.sbatch && sbatch calibrate.sbatch"
        )
        out.append(
            f"advisor calibrate {spec} --gpus {multi} --emit skypilot --out-dir calibrate-sky && "
            "bash calibrate-sky/launch.sh  # one SkyPilot task per placement; launch.sh also collects"
        )
        out.append(f"advisor calibrate {spec} --collect {shell_quote('advisor-results/' + plan.workload.name)}")
    return out


def plan_dict(plan: CalibrationPlan) -> dict:
    """The --json document of `advisor plan-calibration`."""
    from advisor.calibrate.plan import proxy_shape

    return {
        "workload": plan.workload.name,
        "tier": plan.tier.name,
        "usd_per_gpu_hour": plan.tier.usd_per_gpu_hour,
        "budget": plan.budget,
        "target": {"gpus": plan.target[0], "nodes": plan.target[1]},
        "runs": [
            {
                "gpus": r.gpus,
                "nodes": r.nodes,
                "billed_gpus": r.billed_gpus,
                "step_seconds": r.step_seconds,
                "hours": r.hours,
                "gpu_hours": r.gpu_hours,
                "usd": r.usd,
                "global_batch": r.global_batch,
                "micro_batches": r.micro_batches,
            }
            for r in plan.runs
        ],
        "proxy_layers": proxy_shape(plan.workload).layers,
        "model_layers": proxy_shape(plan.workload).full_layers,
        "total": {"gpu_hours": float(sum(r.gpu_hours for r in plan.runs)), "usd": plan.usd},
        "node_counts": plan.node_counts,
        "interval_90": {"now": plan.interval_now, "after": plan.interval_after,
                        "now_band": plan.band_now.as_dict() if plan.band_now else None,
                        "after_band": plan.band_after.as_dict() if plan.band_after else None},
        "skipped": [{"gpus": g, "nodes": n, "why": f"timed steps alone over {MAX_RUN_SECONDS / 3600:g} h"}
                    for g, n in plan.skipped],
        "step_times_from": plan.step_source,
        "startup_seconds": plan.startup_seconds,
        "commands": commands(plan),
    }
