"""`advisor plan-calibration`: which calibration runs to rent, what they cost, and the commands.

Thin skin over advisor.calibrate.design. Table (or `--json`) on stdout; exit 2 when no plan that
identifies the inter-node terms fits the budget (the message gives the cheapest one's cost).
"""

from __future__ import annotations

from typing import Annotated

import typer

from advisor.calibrate.design import dollars as usd  # the one money format of a plan (cents under $10)
from advisor.cli.app import app
from advisor.cli.options import JsonOpt, WorkloadArg, quantity
from advisor.cli.output import console as _console
from advisor.cli.output import current
from advisor.cli.tables import plain
from advisor.text import number, plural

#: Longest start-up per rented run (provisioning, image, init): a week is past any provider's.
MAX_STARTUP_SECONDS = 7 * 86400


def _band(b) -> str:
    return f"{b.low / b.median - 1:+.0%}/{b.high / b.median - 1:+.0%}"


@app.command(name="plan-calibration")
def plan_calibration_command(
    workload: WorkloadArg,
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            help="Most USD to spend on calibration runs (300, 1.5k, '$1,500'; default: only the runs needed to "
            "identify every term).",
        ),
    ] = None,
    max_nodes: Annotated[
        int | None,
        typer.Option("--max-nodes", min=1, help="Largest node count to rent (default 8, capped by cluster.max_gpus)."),
    ] = None,
    tier: Annotated[
        str | None,
        typer.Option(
            "--tier",
            help="Billing tier to price the runs at (default: the first without minimum hours or preemptions).",
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            "--target", help="Placement whose prediction the plan should pin, N or N@M (default: cluster.max_gpus)."
        ),
    ] = None,
    startup: Annotated[
        str,
        typer.Option(
            "--startup", help="Start-up per rented run before the first step (provisioning, image, init, probes)."
        ),
    ] = "10 min",
    as_json: JsonOpt = False,
) -> None:
    """Plan calibration runs (N@M) that identify intra- and inter-node terms within a budget."""
    from advisor.calibrate.design import commands, plan_calibration, plan_dict
    from advisor.errors import InputError
    from advisor.placement import check_layout_splits, parse_placements
    from advisor.planning.limits import MAX_BUDGET_USD, MIN_BUDGET_USD, limit_value
    from advisor.spec import load_workload
    from advisor.units import parse_duration, parse_money

    w = load_workload(workload)
    place = None
    if target is not None:
        places = parse_placements(target, w.cluster.gpus_per_node, "--target")
        if len(places) != 1:
            raise InputError.at("--target", "", "give one placement", target)
        place = places[0]
        if place[0] > w.cluster.max_gpus:  # the plan would pin a prediction recommend never makes
            raise InputError.at("--target", "", f"{place[0]}@{place[1]} exceeds cluster.max_gpus "
                                f"({w.cluster.max_gpus}) of {w.source or 'the spec'}: pin a count the job may rent",
                                target)
        check_layout_splits(w, [place], "--target", target)  # predict refuses it: no interval to narrow
    try:
        startup_s = float(parse_duration(startup))
    except (ValueError, TypeError) as exc:
        raise InputError.at("--startup", "", f"expected a duration such as '10 min' ({exc})", startup) from None
    if not 0 <= startup_s <= MAX_STARTUP_SECONDS:  # a negative start-up priced runs at $0
        raise InputError.at("--startup", "", "must be between 0 and 7 days per run", startup)
    usd = quantity("--budget", budget, parse_money)
    limit_value("--budget", usd, (MIN_BUDGET_USD, MAX_BUDGET_USD), "USD")
    plan = plan_calibration(w, usd, max_nodes, tier, place, startup_s)
    if as_json:
        current().result(plan_dict(plan))
        return
    _print_plan(w, plan)
    for line in commands(plan):
        _console().print(line, highlight=False, markup=False, soft_wrap=True)


def _print_plan(w, plan) -> None:
    """The runs as a table, the total and the interval at the target, the skipped counts."""
    from rich.table import Table

    t = Table(
        title=plain(f"{w.name}: calibration runs on '{plan.tier.name}' at ${plan.tier.usd_per_gpu_hour:g}/GPU-h "
                    f"(step times from {plan.step_source})")
    )
    for col in ("GPUs", "nodes", "billed GPUs", "batch", "step s", "hours", "GPU-hours", "$"):
        t.add_column(col, justify="right")
    for r in plan.runs:
        t.add_row(
            str(r.gpus),
            str(r.nodes),
            str(r.billed_gpus),
            f"{r.global_batch:,}",
            number(r.step_seconds),
            f"{r.hours:.2f}",
            f"{r.gpu_hours:.1f}",
            usd(r.usd),
        )
    con = _console()
    con.print(t)
    budget_text = f" of ${usd(plan.budget)}" if plan.budget is not None else ""
    now, after = plan.band_now, plan.band_after
    con.print(
        f"total ${usd(plan.usd)}{budget_text} over node counts {plan.node_counts}; 90% interval of the step at "
        f"{plural(plan.target[0], 'GPU')} ({plural(plan.target[1], 'node')}), as predict gives it: {_band(now)} now "
        f"-> {_band(after)} "
        "with these runs (simulated at today's prediction)",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    con.print(_priced_line(w), highlight=False, markup=False, soft_wrap=True)
    for g, n in plan.skipped:
        con.print(f"left out {g}@{n}: its timed steps alone would run over an hour", highlight=False, markup=False)


def _priced_line(w) -> str:
    """What each run's price is of: the work `advisor calibrate` does at that count (advisor.calibrate.design)."""
    from advisor.calibrate.plan import MAX_CALIBRATION_MICRO_BATCHES, proxy_shape

    shape = proxy_shape(w)
    c = w.calibration
    model = (f"its {shape.layers}-layer proxy of {shape.full_layers}" if shape.layers < shape.full_layers
             else "the model")
    cap = (f", at most {MAX_CALIBRATION_MICRO_BATCHES} micro-batches per data-parallel rank"
           if w.batch.policy == "fixed-global" else "")
    return (f"each run priced as advisor calibrate runs it: {model}, {c.warmup_steps} warm-up + {c.steps} timed "
            f"steps, each also without gradient sync; batch = samples per step{cap}")
