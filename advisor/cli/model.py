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
    JsonOpt,
    MeasurementsOpt,
    ModelOpt,
    PlotOpt,
    WorkloadArg,
)
from advisor.cli.output import console as _console
from advisor.cli.output import current
from advisor.cli.output import warn as _warn
from advisor.text import interval, plural


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
        con.print(f"{m.workload.name}: {plural(meas['runs'], 'run')} ({plural(meas['steps'], 'step')}) "
                  f"at GPUs {meas['gpus']}, up to {plural(meas['max_nodes'], 'node')}, "
                  f"{plural(meas['probes'], 'collective probe')}, from {meas['source']}")
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
        c.add_row(k["name"], f"{k['value']:.4g}", rng, k["unit"])
    if "overlap_gamma" in desc:
        c.add_row("overlap γ", f"{desc['overlap_gamma']:.3g}", "", "1 none … 10 full")
    con.print(c)
    iv = desc["interval"]
    con.print(f"90% intervals: the posterior of the coefficients ({iv['posterior_draws']} draws "
              f"for the ranges above), {plural(iv['residuals'], 'out-of-sample residual')}, "
              f"noise growing {iv['widening_per_doubling']:.0%} per doubling past the data "
              "(set on the published corpus)")
    r = Table(title="residuals (in-sample, median step per placement)")
    for col in ("GPUs", "nodes", "batch", "measured s", "fitted s", "error"):
        r.add_column(col, justify="right")
    for row in m.residuals()[:60]:
        r.add_row(str(row["gpus"]), str(row["nodes"]), f"{row['global_batch']:g}", f"{row['measured']:.4g}",
                  f"{row['fitted']:.4g}", f"{row['error'] * 100:+.1f}%")
    if m.calibrated:
        con.print(r)
    if len(m.residuals()) > 60:
        con.print(f"... {len(m.residuals()) - 60} more runs (--json lists all)")
    _warn(m.warnings())


def _default_counts(m) -> list[tuple[int, int]]:
    top = m.workload.cluster.max_gpus
    counts = []
    n = m.baseline_gpus
    while n < top:
        counts.append(n)
        n *= 2
    counts.append(top)
    from advisor.topology.layouts import build

    valid = build(m.workload, counts).valid  # counts the parallel layout can split (tp x pp x cp divides them)
    return [(g, int(m.workload.nodes(g))) for g, ok in zip(counts, valid, strict=True) if ok]


ExplainOpt = Annotated[bool, typer.Option(
    "--explain", help="Also print where each step goes: compute, recompute, exposed intra-/inter-node "
                      "communication, pipeline bubble, overhead (seconds; --json always carries it as 'breakdown').")]


@app.command()
def predict(workload: WorkloadArg, calibration: CalibrationOpt = None, measurements: MeasurementsOpt = None,
            gpus: GpusOpt = None, model: ModelOpt = "auto", as_json: JsonOpt = False, plot: PlotOpt = None,
            explain: ExplainOpt = False) -> None:
    """Predict step time, throughput, speedup, efficiency and MFU with 90% intervals."""
    from advisor.placement import parse_placements

    m = _model(workload, calibration, measurements, model)
    placements = parse_placements(gpus, m.workload.cluster.gpus_per_node) if gpus is not None else _default_counts(m)
    from advisor.planning.layout_choice import predict as predict_layouts

    p, layouts, whys = predict_layouts(m, [g for g, _ in placements], [n for _, n in placements], m.peaks)
    if plot is not None:
        from advisor.scaling.plot import plot_scaling

        plot_scaling(m, p, plot)
    if as_json:
        current().result({"workload": m.workload.name, "baseline_gpus": m.baseline_gpus, "model": m.describe(),
                          "predictions": [{**r, "layout": layouts[i], **({"layout_why": whys[i]} if whys else {})}
                                          for i, r in enumerate(p.rows())], "warnings": p.warnings})
        _warn(p.warnings)
        return
    from rich.table import Table

    desc = m.describe()
    t = Table(title=f"{_uncal(m)}{m.workload.name}: model '{m.family}' (CV error {_pct(desc['cv_mape'])}), "
                    f"speedup vs {plural(m.baseline_gpus, 'GPU')}, 90% intervals")
    cols = ("GPUs", "nodes", "step s", "step 90%", "samples/s", "samples/s 90%", "speedup", "efficiency", "MFU",
            "naive samples/s", "layout")
    for col in cols:
        t.add_column(col, justify="right")
    for i, r in enumerate(p.rows()):
        t.add_row(str(r["gpus"]), str(r["nodes"]), f"{r['step_seconds']:.4g}",
                  interval(r['step_seconds_low'], r['step_seconds_high']), f"{r['throughput']:.4g}",
                  interval(r['throughput_low'], r['throughput_high']), f"{r['speedup']:.3g}",
                  f"{r['efficiency'] * 100:.0f}%", "-" if r["mfu"] is None else f"{r['mfu'] * 100:.1f}%",
                  f"{r['naive_throughput']:.4g}", f"{'' if not whys else whys[i].split(' (')[0] + ': '}{layouts[i]}")
    _console().print(t)
    if explain:
        _print_breakdown(m, p.rows())
    if plot is not None:
        current().note(f"wrote {plot}")
    _warn(p.warnings)


def _print_breakdown(m, rows: list[dict]) -> None:
    """Where each median step goes (advisor.scaling.breakdown), seconds and share of the step."""
    from rich.table import Table

    from advisor.scaling.breakdown import PARTS

    t = Table(title=f"{_uncal(m)}where the median step goes (seconds, share of the step; communication "
                    "is what compute does not hide)")
    for col in ("GPUs", "nodes", "step s", *(p.replace("_", " ") for p in PARTS)):
        t.add_column(col, justify="right")
    for r in rows:
        b, step = r["breakdown"], r["step_seconds"]
        t.add_row(str(r["gpus"]), str(r["nodes"]), f"{step:.4g}",
                  *(f"{b[p]:.3g} ({b[p] / step:.0%})" if step > 0 else "-" for p in PARTS))
    _console().print(t)


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
    from rich.table import Table

    t = Table(title=f"{w.name}: fit on <= {fit_max_gpus} GPUs with '{result['model']['name']}', "
                    "predict the rest")
    for col in ("GPUs", "nodes", "batch", "measured s", "predicted s", "error", "90% interval", "inside"):
        t.add_column(col, justify="right")
    for r in result["points"]:
        t.add_row(str(r["gpus"]), str(r["nodes"]), f"{r['global_batch']:g}", f"{r['measured']:.4g}",
                  f"{r['predicted']:.4g}", f"{r['error'] * 100:+.1f}%", interval(r['low'], r['high']),
                  "yes" if r["inside"] else "NO")
    con = _console()
    con.print(t)
    con.print(f"MAPE {result['mape']:.1f}% (naive linear {result['naive_linear_mape']:.1f}%), "
              f"90% interval coverage {result['coverage']:.0f}% over {plural(len(result['points']), 'point')}")
    _warn(result["warnings"])
