"""`advisor recommend`: how many GPUs, on which tier, for how much, finishing when, and why.

With a workload: one recommendation from its calibration (checked-in, or --calibration /
--measurements). Without: one per workload in workloads/; a workload without calibration data is
recommended from the scaling model's prior (marked uncalibrated in the table title, a warning and
the JSON's "model": {"calibrated": false}).
Table and why on stdout; --json one document; --plot a PNG of cost against time; the model's
warnings on stderr (and in the JSON).

Exit status: 0, a plan chosen for every workload; 3, for some workload no plan meets the limits
(or none is possible): the table or JSON is still printed; 2, bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor.cli.app import app
from advisor.cli.options import CalibrationOpt, JsonOpt, MeasurementsOpt, OptionalWorkloadArg, PlotOpt
from advisor.cli.output import console, current, warn
from advisor.errors import InputError
from advisor.planning.limits import Limits, free_objective

LayoutsOpt = Annotated[
    str | None,
    typer.Option(
        "--layouts",
        help="auto: try DDP, FSDP, HSDP (and tensor parallelism) at every count and keep the fastest that fits in "
        'memory, as [parallelism] strategy = "auto"; spec (default): the spec\'s layout.',
        show_default=False,
    ),
]
BudgetOpt = Annotated[
    float | None, typer.Option("--budget", help="USD: the fastest plan that costs at most this.", show_default=False)
]
DeadlineOpt = Annotated[
    float | None,
    typer.Option("--deadline", help="Hours: the cheapest plan that finishes in time.", show_default=False),
]
TierOpt = Annotated[str | None, typer.Option("--tier", help="Consider only this billing tier.", show_default=False)]
ConfidenceOpt = Annotated[
    float | None,
    typer.Option(
        "--confidence",
        help="Require this probability (0-1) of meeting --budget/--deadline (default: the median plan meets them).",
        show_default=False,
    ),
]
ObjectiveOpt = Annotated[
    str | None,
    typer.Option(
        "--objective",
        help="Without limits: worth-the-cost (default: add GPUs while the time saved outweighs the "
        "cost added) or speedup-per-dollar (the literal ratio).",
        show_default=False,
    ),
]

#: Shown rows: powers of two, plus the chosen and closest plans; --json lists every candidate.
ROW_NOTE = "powers of two and the chosen/closest plans shown; --json lists every candidate"

#: Exit status when, for some workload, no plan meets the limits.
EXIT_NONE_QUALIFIES = 3


@app.command()
def recommend(
    workload: OptionalWorkloadArg = None,
    budget: BudgetOpt = None,
    deadline: DeadlineOpt = None,
    tier: TierOpt = None,
    confidence: ConfidenceOpt = None,
    objective: ObjectiveOpt = None,
    calibration: CalibrationOpt = None,
    measurements: MeasurementsOpt = None,
    as_json: JsonOpt = False,
    plot: PlotOpt = None,
    layouts: LayoutsOpt = None,
) -> None:
    """Recommend a GPU count and billing tier: the count past which more GPUs stop being worth their cost, or
    the fastest plan within --budget, or the cheapest within --deadline, or the cheapest meeting both."""
    from advisor.planning.recommend import recommend as recommend_plan
    from advisor.planning.recommend import select_tiers

    limits = Limits(budget, deadline, confidence)
    free = free_objective(objective)
    limits.objective(free)  # a bad or conflicting --objective fails before any fitting
    if workload is None and (calibration is not None or measurements is not None):
        raise InputError.at("--calibration" if calibration else "--measurements", "", "needs a WORKLOAD argument")
    recs, measured = [], {}
    if layouts not in (None, "auto", "spec"):
        raise InputError.at("--layouts", "", "choose auto (try every layout that fits) or spec (the spec's own)",
                            layouts)
    for w in _workloads(workload):
        if layouts == "auto":
            from advisor.planning.layout_choice import auto_workload

            w = auto_workload(w)
        select_tiers(w, tier)  # an unknown --tier fails before any fitting
        model = build_step_time_model(w, calibration, measurements)
        recs.append(recommend_plan(w, model, tier=tier, limits=limits, objective=free))
        measured[w.name] = model.describe()["measured"]["gpus"] if plot is not None else []  # drawn on top
    _plot(recs, plot, measured)
    if as_json:
        current().result(_document(recs))
    else:
        _print(recs)
    warn([f"{rec.workload}: {line}" for rec in recs for line in rec.warnings])
    unmet = [rec.workload for rec in recs if rec.chosen is None]
    if unmet:
        current().note(f"no plan meets the limits for {', '.join(unmet)} (exit status {EXIT_NONE_QUALIFIES})")
        raise SystemExit(EXIT_NONE_QUALIFIES)


def _plot(recs, plot, measured) -> None:
    if plot is not None:
        from advisor.planning.plot import plot_frontier

        plot_frontier(recs, plot, measured)
        current().note(f"wrote {plot}")


def _workloads(workload: Path | None):
    """The Workload of the given spec, or of every spec in workloads/."""
    from advisor.spec import load_workload

    if workload is not None:
        return [load_workload(workload)]
    folder = Path("workloads")
    paths = sorted(folder.glob("*.toml")) if folder.is_dir() else []
    if not paths:
        raise InputError.at(folder, "", "no workload specs here; give a WORKLOAD.toml or run from the project folder")
    return [load_workload(p) for p in paths]


def build_step_time_model(w, calibration, measurements):
    """The fitted scaling model (advisor.scaling.model) from the checked-in calibration or the given files,
    or, with neither, its prior (calibrated False); a test replaces it with a stand-in."""
    from advisor.scaling.model import build_model

    return build_model(w, calibration=calibration, measurements=measurements)


def _document(recs) -> dict:
    recommendations, candidates, workloads = [], [], []
    for rec in recs:
        if rec.chosen is not None:
            recommendations.append(rec.plan(*rec.chosen))
        candidates.extend(rec.plans(rec.candidates()))
        workloads.append(rec.summary())
    return {"recommendations": recommendations, "candidates": candidates, "workloads": workloads}


def _print(recs) -> None:
    out = console()
    for rec in recs:
        out.print(_table(rec))
        out.print(rec.message, markup=False, highlight=False, soft_wrap=True)
        for line in rec.why:
            out.print(f"  - {line}", markup=False, highlight=False, soft_wrap=True)
        out.print()


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
    from advisor.text import number

    sw = rec.sweep
    p = rec.probabilities["both"]
    rows = _shown(rec)
    title = f"{rec.workload}: {rec.objective}" + (
        "" if rec.calibrated else " (UNCALIBRATED: prior only, no measurements)"
    )
    table = Table(
        title=title, caption=f"{len(rows)} of {len(rec.candidates())} plans ({ROW_NOTE}); • on the cost-time frontier"
    )
    auto = sw.layouts is not None and sw.layouts.seconds is not None  # strategy auto: the layout differs per count
    for col in (
        "GPUs",
        "nodes",
        "tier",
        "batch",
        "step s",
        "hours",
        "$",
        "speedup",
        "efficiency",
        "P(meet)",
        "frontier",
        "chosen",
        *(("layout",) if auto else ()),
    ):
        table.add_column(col, justify="left" if col in ("tier", "layout") else "right")
    for t, c in rows:
        table.add_row(
            f"{int(sw.gpus[c]):,}",
            f"{int(sw.nodes[c]):,}",
            sw.tiers[t].name,
            f"{sw.global_batch[c]:,.0f}",
            f"{sw.step_seconds[0, c]:.3g}",
            fmt_hours(sw.wall_hours[0, t, c]),
            fmt_usd(sw.cost_usd[0, t, c]),
            f"{number(sw.speedup[t, c])}x",
            fmt_pct(sw.efficiency[t, c]),
            "-" if p is None else fmt_pct(p[t, c]),
            "•" if (t, c) in rec.frontier_set else "",
            "✔" if rec.chosen == (t, c) else "",
            *((f"{sw.layouts.strategy(c)}: {sw.layouts.label(c)}",) if auto else ()),
            style="bold" if rec.chosen == (t, c) else None,
        )
    return table
