"""`advisor recommend`: how many GPUs, on which tier, for how much, finishing when, and why.

With a workload: one recommendation from its calibration (checked-in, or --calibration /
--measurements). Without: one per workload in workloads/ that has calibration data, and a line
for each that has none (no guessing). Table and why on stdout; --json one document (DESIGN.md §4);
--plot a PNG of cost against time; the model's warnings on stderr (and in the JSON).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor.cli.app import app
from advisor.cli.options import CalibrationOpt, JsonOpt, MeasurementsOpt, OptionalWorkloadArg, PlotOpt
from advisor.cli.output import console, current, warn
from advisor.errors import InputError

BudgetOpt = Annotated[Optional[float], typer.Option("--budget", help="USD: the fastest plan that costs at most this.", show_default=False)]
DeadlineOpt = Annotated[Optional[float], typer.Option("--deadline", help="Hours: the cheapest plan that finishes in time.", show_default=False)]
TierOpt = Annotated[Optional[str], typer.Option("--tier", help="Consider only this billing tier.", show_default=False)]
ConfidenceOpt = Annotated[
    Optional[float],
    typer.Option("--confidence", help="Require this probability (0-1) of meeting --budget/--deadline (default: the median plan meets them).", show_default=False),
]

#: Shown rows: powers of two, plus the chosen and closest plans; --json lists every candidate.
ROW_NOTE = "powers of two and the chosen/closest plans shown; --json lists every candidate"


@app.command()
def recommend(
    workload: OptionalWorkloadArg = None,
    budget: BudgetOpt = None,
    deadline: DeadlineOpt = None,
    tier: TierOpt = None,
    confidence: ConfidenceOpt = None,
    calibration: CalibrationOpt = None,
    measurements: MeasurementsOpt = None,
    as_json: JsonOpt = False,
    plot: PlotOpt = None,
) -> None:
    """Recommend a GPU count and billing tier: best speedup per dollar, or the fastest plan within
    --budget, or the cheapest within --deadline, or the cheapest meeting both."""
    from advisor.calibration_data import find_calibrations
    from advisor.planning.recommend import check_limits, recommend as recommend_plan, select_tiers

    check_limits(budget, deadline, confidence)
    if workload is None and (calibration is not None or measurements is not None):
        raise InputError.at("--calibration" if calibration else "--measurements", "", "needs a WORKLOAD argument")
    recs, missing, measured = [], [], {}
    for path, w in _workloads(workload):
        select_tiers(w, tier)  # an unknown --tier fails before any fitting
        if workload is None and not find_calibrations(w.name, path):
            missing.append((path, w))
            continue
        model = build_step_time_model(w, path, calibration, measurements)
        recs.append(recommend_plan(w, model, budget=budget, deadline=deadline, tier=tier, confidence=confidence))
        measured[w.name] = model.describe()["measured"]["gpus"] if plot is not None else []  # drawn on top
    if plot is not None and recs:
        from advisor.planning.plot import plot_frontier

        plot_frontier(recs, plot, measured)
        current().note(f"wrote {plot}")
    elif plot is not None:
        current().note("no plot written: no workload has calibration data")
    if as_json:
        current().result(_document(recs, missing))
    else:
        _print(recs, missing)
    warn([f"{rec.workload}: {line}" for rec in recs for line in rec.warnings])


def _workloads(workload: Optional[Path]):
    """(path, Workload) for the given spec, or for every spec in workloads/."""
    from advisor.spec import load_workload

    if workload is not None:
        return [(workload, load_workload(workload))]
    folder = Path("workloads")
    paths = sorted(folder.glob("*.toml")) if folder.is_dir() else []
    if not paths:
        raise InputError.at(folder, "", "no workload specs here; give a WORKLOAD.toml or run from the project folder")
    return [(p, load_workload(p)) for p in paths]


def build_step_time_model(w, path, calibration, measurements):
    """The fitted scaling model (advisor.scaling.model) from the checked-in calibration or the given file."""
    try:
        from advisor.scaling.model import build_model
    except ImportError:  # the scaling model is not part of this build
        raise InputError.at(path, "", "no scaling model in this advisor build (advisor.scaling.model missing)") from None
    return build_model(w, calibration=calibration, measurements=measurements)


def _document(recs, missing) -> dict:
    recommendations, candidates, workloads = [], [], []
    for rec in recs:
        if rec.chosen is not None:
            recommendations.append(rec.plan(*rec.chosen))
        candidates.extend(rec.plans(rec.candidates()))
        workloads.append(rec.summary())
    for path, w in missing:
        workloads.append({"workload": w.name, "status": "no-calibration", "message": _no_data(path, w)})
    return {"recommendations": recommendations, "candidates": candidates, "workloads": workloads}


def _no_data(path, w) -> str:
    return f"{path}: no calibration data for {w.name} (calibrations/{w.name}*.toml); run `advisor calibrate {path}` first"


def _print(recs, missing) -> None:
    out = console()
    for rec in recs:
        out.print(_table(rec))
        out.print(rec.message, markup=False, highlight=False, soft_wrap=True)
        for line in rec.why:
            out.print(f"  - {line}", markup=False, highlight=False, soft_wrap=True)
        out.print()
    for path, w in missing:
        print(_no_data(path, w))


def _shown(rec) -> list[tuple[int, int]]:
    import numpy as np

    sw = rec.sweep
    counts = sw.gpus
    power_of_two = (counts & (counts - 1)) == 0
    keep = set(np.flatnonzero(power_of_two).tolist())
    keep.add(int(counts.size - 1))
    marked = ([rec.chosen] if rec.chosen else []) + rec.closest
    keep.update(c for _, c in marked)
    return [(t, c) for t, c in rec.candidates() if c in keep]


def _table(rec):
    from rich.table import Table

    from advisor.planning.explain import fmt_hours, fmt_pct, fmt_usd

    sw = rec.sweep
    p = rec.probabilities["both"]
    rows = _shown(rec)
    table = Table(title=f"{rec.workload}: {rec.objective}",
                  caption=f"{len(rows)} of {len(rec.candidates())} plans ({ROW_NOTE}); • on the cost-time frontier")
    for col in ("GPUs", "nodes", "tier", "step s", "hours", "$", "speedup", "efficiency", "P(meet)", "frontier", "chosen"):
        table.add_column(col, justify="left" if col == "tier" else "right")
    for t, c in rows:
        table.add_row(
            f"{int(sw.gpus[c]):,}", f"{int(sw.nodes[c]):,}", sw.tiers[t].name, f"{sw.step_seconds[0, c]:.3g}",
            fmt_hours(sw.wall_hours[0, t, c]), fmt_usd(sw.cost_usd[0, t, c]), f"{sw.speedup[t, c]:.3g}x",
            fmt_pct(sw.efficiency[t, c]), "-" if p is None else fmt_pct(p[t, c]),
            "•" if (t, c) in rec.frontier_set else "", "✔" if rec.chosen == (t, c) else "",
            style="bold" if rec.chosen == (t, c) else None,
        )
    return table
