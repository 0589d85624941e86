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
from advisor.cli.options import (
    CalibrationOpt,
    HtmlOpt,
    JsonOpt,
    MeasurementsOpt,
    OptionalWorkloadArg,
    PlotOpt,
    WideOpt,
    complete_tier,
    quantity,
)
from advisor.cli.output import command_line, console, current, warn
from advisor.cli.tables import Column, build, say, show
from advisor.errors import InputError
from advisor.planning.limits import Limits, free_objective
from advisor.units import parse_fraction, parse_hours, parse_money

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
    str | None,
    typer.Option("--budget", help="USD (20000, 20k, '$20,000'): the fastest plan that costs at most this.",
                 show_default=False),
]
DeadlineOpt = Annotated[
    str | None,
    typer.Option("--deadline", help="Hours, or a duration with its unit ('3 days', '36 h'): the cheapest plan "
                 "that finishes in time.", show_default=False),
]
TierOpt = Annotated[
    str | None,
    typer.Option("--tier", help="Consider only this billing tier.", show_default=False, autocompletion=complete_tier),
]
ConfidenceOpt = Annotated[
    str | None,
    typer.Option(
        "--confidence",
        help="Require this probability (0-1, or 90%) of meeting --budget/--deadline (default: the median plan "
        "meets them).",
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
    wide: WideOpt = False,
    html: HtmlOpt = None,
) -> None:
    """Recommend a GPU count and billing tier: the count past which more GPUs stop being worth their cost, or
    the fastest plan within --budget, or the cheapest within --deadline, or the cheapest meeting both."""
    from advisor.planning.recommend import recommend as recommend_plan
    from advisor.planning.recommend import select_tiers

    limits = Limits(quantity("--budget", budget, parse_money), quantity("--deadline", deadline, parse_hours),
                    quantity("--confidence", confidence, parse_fraction))
    free = free_objective(objective)
    limits.objective(free)  # a bad or conflicting --objective fails before any fitting
    if workload is None and (calibration is not None or measurements is not None):
        raise InputError.at("--calibration" if calibration else "--measurements", "", "needs a WORKLOAD argument")
    recs, measured, fitted = [], {}, []
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
        fitted.append((w.source, w, model))
        measured[w.name] = model.describe()["measured"]["gpus"] if plot or html else []  # drawn on top
    _plot(recs, plot, measured)
    if html is not None and recs:
        _html(html, recs, fitted, calibration, measurements, measured)
    if as_json:
        current().result(_document(recs))
    else:
        _print(recs, wide)
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
    out, seen = [], {}
    for p in paths:  # a name picks the checked-in calibrations/NAME*.toml and labels every row and JSON entry
        w = load_workload(p)
        if w.name in seen:
            raise InputError.at(p, "name", f"also the name of {seen[w.name]}: two specs of one name would share its "
                                "calibrations and print alike; give each its own name", w.name)
        seen[w.name] = p
        out.append(w)
    return out


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


def _print(recs, wide: bool = False) -> None:
    out = console()
    for rec in recs:
        show(out, *_table(rec, wide))
        say(out, rec.message)
        for line in rec.why:
            say(out, line, indent="  - ")
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


#: Columns of the recommend table: the compact set fits 80 columns, the rest needs --wide.
COLUMNS = (
    Column("GPUs"), Column("nodes"), Column("tier", left=True), Column("batch", wide=True),
    Column("step s", wide=True), Column("hours"), Column("$"), Column("speedup", wide=True),
    Column("efficiency"), Column("P(meet)"), Column("", left=True),
)
LAYOUT = Column("layout", wide=True, left=True)


def _cells(rec):
    """(title, columns, cells, bold) of a recommendation's rows, every column (build keeps the compact ones)."""
    from advisor.text import count, hours, number, percent, times, usd

    sw = rec.sweep
    p = rec.probabilities["both"]
    rows = _shown(rec)
    title = f"{rec.workload}: {rec.objective}" + (
        "" if rec.calibrated else " (UNCALIBRATED: prior only, no measurements)"
    )
    auto = sw.layouts is not None and sw.layouts.seconds is not None  # strategy auto: the layout differs per count
    cells = []
    for t, c in rows:
        mark = "✔" if rec.chosen == (t, c) else "•" if (t, c) in rec.frontier_set else ""
        cells.append([
            count(int(sw.gpus[c])), count(int(sw.nodes[c])), sw.tiers[t].name, count(float(sw.global_batch[c])),
            number(sw.step_seconds[0, c]), hours(sw.wall_hours[0, t, c], days=False), usd(sw.cost_usd[0, t, c]),
            times(sw.speedup[t, c]), percent(sw.efficiency[t, c]), "-" if p is None else percent(p[t, c]), mark,
            *((f"{sw.layouts.strategy(c)}: {sw.layouts.label(c)}",) if auto else ()),
        ])
    return title, COLUMNS + ((LAYOUT,) if auto else ()), cells, [rec.chosen == row for row in rows]


def _table(rec, wide: bool = False):
    title, columns, cells, bold = _cells(rec)
    note = (f"{len(cells)} of {len(rec.candidates())} plans ({ROW_NOTE}); ✔ chosen, • on the cost-time frontier"
            + ("" if wide else "; --wide adds batch, step s, speedup" + (", layout" if LAYOUT in columns else "")))
    return build(title, columns, cells, wide=wide, bold=bold), note


def _html(path, recs, fitted, calibration, measurements, measured) -> None:
    """The report to share (advisor.report): per workload its table, sentences and scaling curve with its
    band, the cost-time frontier of all of them with the chosen plans, spec and calibration provenance."""
    from advisor.cli.app import package_version
    from advisor.planning.plot import frontier_png
    from advisor.planning.runnable import runs
    from advisor.report import Report, Table, breakdown_table, calibration_files, write
    from advisor.scaling.plot import scaling_png
    from advisor.topology.memory import memory_evidence

    report = Report(f"advisor recommend: {', '.join(rec.workload for rec in recs)}", command=command_line() or "",
                    version=package_version())
    report.figures.append(("Cost against time for every plan; the cost-time frontier and the chosen plan marked",
                           frontier_png(recs, measured)))
    for rec, (spec, w, model) in zip(recs, fitted, strict=True):
        title, columns, cells, bold = _cells(rec)
        report.tables.append(Table(title, [col.name for col in columns], cells, bold))
        report.sentences += [*([rec.message] if len(recs) > 1 else []), *rec.why]  # one workload: the headline
        curve = _curve(model, rec)
        base = (rec.sweep.baseline_gpus, int(w.nodes(rec.sweep.baseline_gpus)))
        report.figures.append((f"{w.name}: predicted throughput with its 90% band, and efficiency",
                               scaling_png(model, curve, base, runs(w, memory_evidence(model)))))
        report.breakdown = report.breakdown or breakdown_table(curve.rows())
        report.warnings += [f"{rec.workload}: {line}" for line in rec.warnings]
        report.specs.append(spec)
        report.calibrations += calibration_files(w.name, spec, calibration, measurements)
    report.headline = recs[0].message if len(recs) == 1 else ""
    write(path, report)
    current().note(f"wrote {path}")


def _curve(model, rec):
    """The model's prediction at the counts the table shows (the layout each count runs)."""
    from advisor.planning.layout_choice import predict
    from advisor.topology.memory import memory_evidence

    counts = sorted({int(rec.sweep.gpus[c]) for _, c in _shown(rec)})
    if not counts:  # no count runs, so no plan is shown (--html crashed on the empty curve): the counts
        # the layout splits, up to the baseline's doublings, as predict shows them, each marked as not running
        sw, split = rec.sweep, rec.runnable.splits if rec.runnable is not None else rec.sweep.gpus > 0
        counts = [int(g) for g in sw.gpus[split & ((sw.gpus & (sw.gpus - 1)) == 0)]] or [int(sw.baseline_gpus)]
    return predict(model, counts, None, memory_evidence(model))[0]
