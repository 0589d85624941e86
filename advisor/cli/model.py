"""Commands of the scaling model: fit, predict, backtest (the model: docs/model.md).

Thin: each parses options, calls `advisor.scaling.model`, prints a table (stdout) or one JSON document
(`--json`); warnings go to stderr (and into the JSON). numpy, scikit-learn and matplotlib are
imported inside the commands, so `advisor validate` does not pay for them.
"""

from __future__ import annotations

from typing import Annotated

import typer

from advisor.cli.app import app
from advisor.cli.options import (
    BacktestCalibrationOpt,
    CalibrationOpt,
    GpusOpt,
    HtmlOpt,
    JsonOpt,
    MeasurementsOpt,
    ModelOpt,
    PlotOpt,
    WideOpt,
    WorkloadArg,
)
from advisor.cli.output import console as _console
from advisor.cli.output import current
from advisor.cli.output import warn as _warn
from advisor.cli.tables import Column, build, plain, say, show
from advisor.text import count, interval, number, plural


def _model(workload, calibration, measurements, family):
    from advisor.scaling.families import family_named
    from advisor.scaling.model import build_model
    from advisor.spec import load_workload

    family_named(family)  # an unknown --model fails before the spec is read
    w = load_workload(workload)
    return build_model(w, calibration=calibration, measurements=measurements, family=family)


def _uncal(m) -> str:
    """The mark every uncalibrated table title carries."""
    return "" if m.calibrated else "UNCALIBRATED (prior only, no measurement): "


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


@app.command()
def fit(workload: WorkloadArg, calibration: CalibrationOpt = None, measurements: MeasurementsOpt = None,
        model: ModelOpt = "auto", as_json: JsonOpt = False) -> None:
    """Fit the scaling model: families compared by CV, chosen coefficients with units, residuals."""
    m = _model(workload, calibration, measurements, model)
    desc = m.describe()
    if as_json:
        current().result({"workload": m.workload.name, "baseline_gpus": m.baseline_gpus, "model": desc,
                          "residuals": m.residuals(), "warnings": m.warnings()})
        _warn(m.warnings())
        return
    from rich.table import Table

    con = _console()
    meas = desc["measured"]
    if m.calibrated:
        con.print(plain(f"{m.workload.name}: {plural(meas['runs'], 'run')} ({plural(meas['steps'], 'step')}) "
                        f"at GPUs {meas['gpus']}, up to {plural(meas['max_nodes'], 'node')}, "
                        f"{plural(meas['probes'], 'collective probe')}, from {meas['source']}"))
    else:
        con.print(f"{m.workload.name}: no measurement; the prior alone (docs/model.md, \"The prior\")")
    t = Table(title=_uncal(m) + "leave-one-count-out CV (mean abs. % error on held-out counts)")
    for col in ("family", "CV error", "form"):
        t.add_column(col)
    for f in desc["families"]:
        t.add_row(("✔ " if f["name"] == m.family else "  ") + f["name"], _pct(f["cv_mape"]), f["summary"])
    t.add_row("  naive linear", _pct(desc["naive_linear_cv_mape"]), "per-GPU throughput of the largest count, held")
    con.print(t)
    c = Table(title=f"{_uncal(m)}coefficients of '{m.family}' (90% posterior range)")
    for col in ("term", "value", "90% range", "unit"):
        c.add_column(col, no_wrap=col != "unit")
    for k in desc["coefficients"]:
        rng = "fixed" if k["fixed"] else "-" if k["low"] == k["high"] else interval(k['low'], k['high'])
        c.add_row(k["name"], number(k["value"], 4), rng, k["unit"])
    if "overlap_gamma" in desc:
        c.add_row("overlap γ", f"{desc['overlap_gamma']:.3g}", "", "1 none … 10 full")
    con.print(c)
    iv = desc["interval"]
    con.print(f"90% intervals: the posterior of the coefficients ({iv['posterior_draws']} draws "
              f"for the ranges above), {plural(iv['residuals'], 'out-of-sample residual')}, "
              f"noise growing {iv['widening_per_doubling']:.0%} per doubling past the data "
              "(set on the published corpus)")
    cells = [[f"{row['gpus']:,}", f"{row['nodes']:,}", count(row["global_batch"]), number(row["measured"], 4),
              number(row["fitted"], 4), f"{row['error'] * 100:+.1f}%"] for row in m.residuals()[:60]]
    if m.calibrated:
        show(con, build("residuals (in-sample, median step per placement)",
                        [Column(c) for c in ("GPUs", "nodes", "batch", "measured s", "fitted s", "error")], cells))
    if len(m.residuals()) > 60:
        con.print(f"... {len(m.residuals()) - 60} more runs (--json lists all)")
    _warn(m.warnings())


def _default_counts(m, base: int) -> list[tuple[int, int]]:
    """Doublings from the baseline count up to max_gpus, keeping the counts that run (advisor.planning.runnable);
    when none does, the ones the layout splits, so the table says why each cannot run."""
    from advisor.errors import InputError
    from advisor.planning import runnable
    from advisor.topology.memory import memory_evidence

    top = m.workload.cluster.max_gpus
    counts = []
    n = base
    while n < top:
        counts.append(n)
        n *= 2
    counts.append(top)
    run = runnable.of(m.workload, counts, None, memory_evidence(m))
    # none runs: the counts the layout splits, each marked with why it cannot run
    keep = run.ok if run.ok.any() else run.splits
    if not keep.any():
        raise InputError.at(m.workload.source or "", "cluster.max_gpus",
                            f"no count from {base} to {top} GPUs runs this layout: {run.reason(len(counts) - 1)}", top)
    return [(g, int(m.workload.nodes(g))) for g, fine in zip(counts, keep, strict=True) if fine]


#: Fields of a prediction row null in --json at a count that cannot run: relative to a baseline that does,
#: they would read as super-linear (101% efficiency at 1 GPU). The step time stays: what it would take if it ran.
RELATIVE = ("speedup", "efficiency")


def _rows(p, run, layouts, whys) -> list[dict]:
    """JSON rows: the prediction, the layout, and whether the count runs (why not, when it does not)."""
    out = []
    for i, r in enumerate(p.rows()):
        runs = bool(run.ok[i])
        row = {**r, **({} if runs else dict.fromkeys(RELATIVE)), "layout": layouts[i],
               **({"layout_why": whys[i]} if whys else {})}
        row.update({"runs": runs, "fits_memory": bool(run.fits[i]), "splits_batch": bool(run.whole[i] & run.even[i]),
                    "memory_bytes": float(run.memory_bytes[i]), "left_out": run.reason(i)})
        out.append(row)
    return out


PREDICT_COLUMNS = (
    Column("GPUs"), Column("nodes"), Column("step s"), Column("step 90%"), Column("samples/s", wide=True),
    Column("samples/s 90%", wide=True), Column("speedup"), Column("efficiency"), Column("MFU"),
    Column("naive samples/s", wide=True), Column("layout", wide=True, left=True),
)


def _predict_cells(m, rows: list[dict], base: int) -> tuple[str, list[list[str]]]:
    """(title, cells) of the rows that run, every column (build keeps the compact ones)."""
    from advisor.text import number, percent, times

    desc = m.describe()
    title = (f"{_uncal(m)}{m.workload.name}: model '{m.family}' (CV error {_pct(desc['cv_mape'])}), "
             f"speedup vs {plural(base, 'GPU')}, 90% intervals")
    cells = [[f"{r['gpus']:,}", f"{r['nodes']:,}", number(r["step_seconds"], 4),
              interval(r["step_seconds_low"], r["step_seconds_high"]), number(r["throughput"], 4),
              interval(r["throughput_low"], r["throughput_high"]), times(r["speedup"]), percent(r["efficiency"]),
              "-" if r["mfu"] is None else percent(r["mfu"], 1), number(r["naive_throughput"], 4),
              (r["layout_why"].split(" (")[0] + ": " if "layout_why" in r else "") + r["layout"]]
             for r in rows if r["runs"]]
    return title, cells


def _predict_table(m, rows: list[dict], base: int, wide: bool):
    title, cells = _predict_cells(m, rows, base)
    note = None if wide else "--wide adds samples/s with its interval, naive samples/s, layout"
    return build(title, PREDICT_COLUMNS, cells, wide=wide), note


def _only(p, keep: list[bool]):
    """The prediction at the kept counts (all of it when none is kept: the figure needs a point)."""
    from dataclasses import fields, replace

    import numpy as np

    mask = np.asarray(keep, dtype=bool)
    if not mask.any():
        return p
    arrays = {f.name: getattr(p, f.name) for f in fields(p)}
    kept = {k: v[mask] for k, v in arrays.items() if isinstance(v, np.ndarray) and v.shape == mask.shape}
    kept["breakdown"] = {k: np.asarray(v)[mask] for k, v in p.breakdown.items()}  # seconds per part, per count
    return replace(p, **kept)


def _left_out(rows: list[dict]) -> list[str]:
    return [f"Left out {plural(r['gpus'], 'GPU')} ({plural(r['nodes'], 'node')}): {r['left_out']}."
            for r in rows if not r["runs"]]


def _predict_html(path, m, p, rows, base, spec, calibration, measurements) -> None:
    """The report to share (advisor.report): the table, the left-out counts, the scaling curve with its
    band, the step breakdown where the model gives one, spec and calibration provenance."""
    from advisor.cli.app import package_version
    from advisor.cli.output import command_line
    from advisor.planning.runnable import runs
    from advisor.report import Report, Table, breakdown_table, calibration_files, write
    from advisor.scaling.plot import scaling_png
    from advisor.topology.memory import memory_evidence

    title, cells = _predict_cells(m, rows, base[0])
    report = Report(f"advisor predict: {m.workload.name}", sentences=_left_out(rows),
                    tables=[Table(title, [c.name for c in PREDICT_COLUMNS], cells)],
                    figures=[(f"{m.workload.name}: predicted throughput with its 90% band, and efficiency",
                              scaling_png(m, p, base, runs(m.workload, memory_evidence(m))))],
                    breakdown=breakdown_table(rows), warnings=list(p.warnings), specs=[spec],
                    calibrations=calibration_files(m.workload.name, spec, calibration, measurements),
                    command=command_line() or "", version=package_version())
    write(path, report)
    current().note(f"wrote {path}")


ExplainOpt = Annotated[bool, typer.Option(
    "--explain", help="Also print where each step goes: compute, recompute, exposed intra-/inter-node "
                      "communication, pipeline bubble, overhead (seconds; --json always carries it as 'breakdown').")]


@app.command()
def predict(workload: WorkloadArg, calibration: CalibrationOpt = None, measurements: MeasurementsOpt = None,
            gpus: GpusOpt = None, model: ModelOpt = "auto", as_json: JsonOpt = False, plot: PlotOpt = None,
            wide: WideOpt = False, html: HtmlOpt = None, explain: ExplainOpt = False) -> None:
    """Predict step time, throughput, speedup, efficiency and MFU with 90% intervals; counts that cannot
    run (memory, batch) are marked with the reason, and speedup is against the smallest count that runs."""
    from advisor.placement import parse_placements
    from advisor.planning import runnable
    from advisor.planning.layout_choice import predict as predict_layouts
    from advisor.topology.memory import memory_evidence

    m = _model(workload, calibration, measurements, model)
    peaks = memory_evidence(m)  # measured peaks, and the runs that fit without one
    base = runnable.baseline(m.workload, m, peaks)
    placements = (parse_placements(gpus, m.workload.cluster.gpus_per_node) if gpus is not None
                  else _default_counts(m, base[0]))
    g, n = [g for g, _ in placements], [n for _, n in placements]
    p, layouts, whys = predict_layouts(m, g, n, peaks)
    p = runnable.rebase(m, p, base, peaks)
    rows = _rows(p, runnable.of(m.workload, g, n, peaks), layouts, whys)
    drawn = _only(p, [r["runs"] for r in rows])  # the figure marks only counts that run
    if plot is not None:
        from advisor.scaling.plot import plot_scaling

        plot_scaling(m, drawn, plot, base, runnable.runs(m.workload, peaks))
    if html is not None:
        _predict_html(html, m, drawn, rows, base, workload, calibration, measurements)
    if as_json:
        current().result({"workload": m.workload.name, "baseline_gpus": base[0], "baseline_nodes": base[1],
                          "model": m.describe(), "predictions": rows, "warnings": p.warnings})
        _warn(p.warnings)
        return
    con = _console()
    show(con, *_predict_table(m, rows, base[0], wide))
    for line in _left_out(rows):
        say(con, line)
    if explain:
        running = [r for r in rows if r["runs"]]
        if running:
            _print_breakdown(m, running)
        else:  # an empty table read as a broken one
            say(con, "No step is broken down: none of these counts runs (see why above).")
    if plot is not None:
        current().note(f"wrote {plot}")
    _warn(p.warnings)


def _print_breakdown(m, rows: list[dict]) -> None:
    """Where each median step goes (advisor.scaling.breakdown), seconds and share of the step."""
    from advisor.scaling.breakdown import PARTS
    from advisor.text import percent

    columns = [Column(c) for c in ("GPUs", "nodes", "step s", *(p.replace("_", " ") for p in PARTS))]
    cells = [[f"{r['gpus']:,}", f"{r['nodes']:,}", number(r["step_seconds"], 4),
              *(f"{number(r['breakdown'][p])} ({percent(r['breakdown'][p] / r['step_seconds'])})"
                if r["step_seconds"] > 0 else "-" for p in PARTS)] for r in rows]
    show(_console(), build(f"{_uncal(m)}where the median step goes (seconds, share of the step; communication "
                           "is what compute does not hide)", columns, cells))


FitMaxOpt = Annotated[
    int, typer.Option("--fit-max-gpus", help="Fit on runs with at most this many GPUs; predict the rest.", min=1)
]


@app.command()
def backtest(workload: WorkloadArg, fit_max_gpus: FitMaxOpt, calibration: BacktestCalibrationOpt = None,
             measurements: MeasurementsOpt = None, model: ModelOpt = "auto", as_json: JsonOpt = False) -> None:
    """Fit on small counts, predict the larger measured ones: per-point error, MAPE, interval coverage."""
    from advisor.errors import InputError
    from advisor.scaling.families import family_named
    from advisor.scaling.model import backtest as run_backtest
    from advisor.scaling.model import load_measurements
    from advisor.spec import load_workload

    if calibration is None and measurements is None:
        raise InputError.at("backtest", "", "needs --calibration FILE.toml or --measurements FILE.csv")
    family_named(model)
    w = load_workload(workload)
    result = run_backtest(w, load_measurements(w, calibration, measurements), fit_max_gpus, model)
    if as_json:
        current().result(result)
        _warn(result["warnings"])
        return
    cells = [[f"{r['gpus']:,}", f"{r['nodes']:,}", count(r["global_batch"]), number(r["measured"], 4),
              number(r["predicted"], 4), f"{r['error'] * 100:+.1f}%", interval(r["low"], r["high"]),
              "yes" if r["inside"] else "NO"] for r in result["points"]]
    columns = [Column(c) for c in ("GPUs", "nodes", "batch", "measured s", "predicted s", "error", "90% interval",
                                   "inside")]
    con = _console()
    show(con, build(f"{w.name}: fit on <= {fit_max_gpus} GPUs with '{result['model']['name']}', predict the rest",
                    columns, cells))
    con.print(f"MAPE {result['mape']:.1f}% (naive linear {result['naive_linear_mape']:.1f}%), "
              f"90% interval coverage {result['coverage']:.0f}% over {plural(len(result['points']), 'point')}")
    _warn(result["warnings"])
