"""The "why" of a recommendation: short sentences computed from a finished `Recommendation`.

This module only reads what advisor.planning.recommend decided (it imports nothing from it at run
time). Each sentence states a number the table also shows, so a reader can check it: the headline,
where the worth-the-cost walk stopped and why, what one more doubling would buy, the knee beyond
which each doubling adds little speed, what preemptions cost on each preemptible tier (and when
Λ·(τ + restart) is not small), where such a tier stops paying off, idle hours a reserved commitment
would bill, the odds when they are poor, a budget that cannot tell plans apart, the batch the plan
trains with, the gradient-noise-scale effect when used, the frontier, and what was left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.planning.limits import LIKELY, MAX_DEADLINE_HOURS, Objective
from advisor.planning.runnable import LAYOUT, RANKS, UNEVEN
from advisor.text import above, count, interval, number, plural, span, times
from advisor.text import gigabytes as fmt_bytes
from advisor.text import hours as fmt_hours
from advisor.text import percent as fmt_pct
from advisor.text import usd as fmt_usd

if TYPE_CHECKING:
    from advisor.planning.recommend import Recommendation, SpotPayoff

#: "each doubling adds less than this much speed" marks the knee.
SMALL_GAIN = 0.15

HEADLINES = {
    Objective.WORTH_THE_COST: "Worth its cost",
    Objective.SPEEDUP_PER_DOLLAR: "Best speedup per dollar",
    Objective.FASTEST_WITHIN_BUDGET: "Fastest plan {limits}",
    Objective.CHEAPEST_WITHIN_DEADLINE: "Cheapest plan that finishes {limits}",
    Objective.CHEAPEST_WITHIN_BOTH: "Cheapest plan {limits}",
}


def describe(rec: "Recommendation", t: int, c: int) -> str:
    sw = rec.sweep
    return (
        f"{plural(int(sw.gpus[c]), 'GPU')} ({plural(int(sw.nodes[c]), 'node')}) on {sw.tiers[t].name}: "
        f"{fmt_hours(sw.wall_hours[0, t, c])}, {fmt_usd(sw.cost_usd[0, t, c])}"
    )


def spot_sentence(s: "SpotPayoff") -> str:
    if s.compared_with is None:
        return f"{s.tier}: no tier without preemptions to compare with."
    if s.never_pays_off:
        return (f"{s.tier} never pays off here: at every count its expected cost (preemptions included) is at or above "
                f"{s.compared_with}'s.")
    if s.cheaper_everywhere:
        return f"{s.tier} stays cheaper than {s.compared_with} at every count considered, preemptions included."
    if s.stops_at_gpus is None:
        return (
            f"{s.tier} is still cheaper than {s.compared_with} at the largest count considered, preemptions included."
        )
    return (
        f"{s.tier} stops paying off at {plural(s.stops_at_gpus, 'GPU')} ({plural(s.nodes, 'node')}): from there on its "
        f"expected cost per job, preemptions included, is at or above {s.compared_with}'s."
    )


def _limits_text(rec: "Recommendation") -> str:
    parts = []
    if rec.limits.budget is not None:
        parts.append(f"within {fmt_usd(rec.limits.budget)}")
    if rec.limits.deadline is not None:
        parts.append(f"within {fmt_hours(rec.limits.deadline)}")
    return " and ".join(parts)


def _odds(rec: "Recommendation", t: int, c: int) -> str:
    p = rec.probabilities["both"]
    return "" if p is None else f" (P(meet) {fmt_pct(p[t, c])})"


def explain(rec: "Recommendation") -> tuple[str, list[str]]:
    """(message, why sentences) for a recommendation."""
    sw = rec.sweep
    if not sw.available.any():
        return "No plan: no GPU count is possible on the tiers considered.", _left_out(rec)
    if rec.chosen is None:
        t, c = rec.closest[0]
        message = f"No plan qualifies {_limits_text(rec)}; closest: {describe(rec, t, c)}{_odds(rec, t, c)}."
        sentences = (_knife_edge(rec), *[spot_sentence(payoff) for payoff in rec.spot], *_left_out(rec))
        return message, [s for s in sentences if s]
    t, c = rec.chosen
    headline = HEADLINES[rec.objective].format(limits=_limits_text(rec))
    message = (
        f"{headline}: {describe(rec, t, c)}, {number(sw.speedup[t, c])}x the baseline "
        f"({plural(sw.baseline_gpus, 'GPU')}) at {fmt_pct(sw.efficiency[t, c])} efficiency"
        f"{_odds(rec, t, c)}."
    )
    why = [
        s
        for s in (
            _layout(rec, c),
            _stop(rec),
            _doubling(rec, t, c),
            _knee(rec, t),
            *_preemption(rec, c),
            *_reserved(rec, c),
            _likelier(rec, t, c),
            _knife_edge(rec),
            _batch(rec, c),
            _noise(rec, c),
            _frontier(rec),
            *_left_out(rec),
        )
        if s
    ]
    return message, why


def _layout(rec: "Recommendation", c: int) -> str:
    """Under strategy auto: the chosen count's layout, what it beat and by how much (advisor.planning.layout_choice)."""
    lay = rec.sweep.layouts
    why = None if lay is None else lay.why(c)
    return f"Layout at {plural(int(rec.sweep.gpus[c]), 'GPU')}: {why}." if why else ""


def _stop(rec: "Recommendation") -> str:
    """Where the worth-the-cost walk stopped, and the step it declined."""
    stop = rec.stop
    if stop is None:
        return ""
    cheapest_first = rec.frontier[::-1]
    walked = _walked(stop.steps)
    if stop.next is None:
        t, c = cheapest_first[stop.at]
        return (
            f"It stops at the fastest plan considered, not at a step that was not worth it: {walked}. "
            f"{plural(int(rec.sweep.gpus[c]), 'GPU')} is the largest count available on {rec.sweep.tiers[t].name} "
            f"here (max_gpus, whole instances, the batch or memory rule out larger ones); more might still pay."
        )
    nt, nc = cheapest_first[stop.next]
    return (
        f"It stops here: {walked}; the next faster plan, {describe(rec, nt, nc)}, would save "
        f"{fmt_pct(stop.time_saved)} of the time for {_more_cost(stop.cost_added)}, and no faster plan saves "
        f"a larger share of the time than it adds to the cost."
    )


def _more_cost(added: float) -> str:
    """A cost increase in words: "76% more cost", from double on a multiplier ("21,000x the cost"):
    a free tier next to a priced one read "2099900% more cost"."""
    return f"{fmt_pct(added)} more cost" if added < 1 else f"{times(1 + added)} the cost"


def _walked(steps: int) -> str:
    """The worth-the-cost walk in words: no step, one step, or several (each saving ...)."""
    if steps == 0:
        return "from the cheapest plan it took no step along the cost-time frontier"
    saving = "saving" if steps == 1 else "each saving"
    return (f"from the cheapest plan it took {plural(steps, 'step')} along the cost-time frontier, {saving} at "
            f"least as large a share of the time as it added to the cost")


def _doubling(rec: "Recommendation", t: int, c: int) -> str:
    """What twice the GPUs on the same tier would buy (or the most there is, when 2N is not a plan)."""
    import numpy as np

    sw = rec.sweep
    larger = np.flatnonzero(sw.available[t] & (sw.gpus > sw.gpus[c]))
    if larger.size == 0:
        return f"{plural(int(sw.gpus[c]), 'GPU')} is the most considered on {sw.tiers[t].name}."
    double = larger[sw.gpus[larger] == 2 * sw.gpus[c]]
    k = int(double[0]) if double.size else int(larger[-1])
    faster = sw.wall_hours[0, t, c] / sw.wall_hours[0, t, k]
    dearer = sw.cost_usd[0, t, k] / sw.cost_usd[0, t, c]
    speed = f"finish {times(faster, 2)} sooner" if faster > 1 else f"not finish sooner ({times(faster, 2)} the speed)"
    going = (
        f"Doubling to {int(sw.gpus[k])} GPUs"
        if double.size
        else f"Going to {int(sw.gpus[k])} GPUs (the most on this tier)"
    )
    return f"{going} on {sw.tiers[t].name} would {speed} for {times(dearer, 2)} the cost."


def _knee(rec: "Recommendation", t: int) -> str:
    """'beyond N GPUs each doubling adds < 15% speed for ~2x the cost' on the chosen tier."""
    import numpy as np

    sw = rec.sweep
    doubled = np.searchsorted(sw.gpus, 2 * sw.gpus)
    has = doubled < sw.gpus.size
    doubled = np.minimum(doubled, sw.gpus.size - 1)
    has &= (sw.gpus[doubled] == 2 * sw.gpus) & sw.available[t] & sw.available[t, doubled]
    idx = np.flatnonzero(has)
    if idx.size == 0:
        return ""
    gain = sw.wall_hours[0, t, idx] / sw.wall_hours[0, t, doubled[idx]] - 1
    tail = np.logical_and.accumulate((gain < SMALL_GAIN)[::-1])[::-1]
    if not tail.any():
        return ""
    first = int(np.argmax(tail))
    cost_ratio = sw.cost_usd[0, t, doubled[idx[first:]]] / sw.cost_usd[0, t, idx[first:]]
    return (
        f"On {sw.tiers[t].name}, beyond {plural(int(sw.gpus[idx[first]]), 'GPU')} each doubling adds under "
        f"{fmt_pct(SMALL_GAIN)} speed for {interval(cost_ratio.min(), cost_ratio.max(), 2, 'x')} the cost."
    )


def _preemption(rec: "Recommendation", c: int) -> list[str]:
    from advisor.planning.billing import SMALL_EXPOSURE

    sw, pre = rec.sweep, rec.sweep.preemption
    out = []
    for t, tier in enumerate(sw.tiers):
        if tier.preemptions_per_node_hour == 0 or not sw.available[t, c]:
            continue
        n, rate = int(sw.nodes[c]), float(pre.rate[t, c])
        tau = float(pre.interval_hours[t, c])
        every = f", checkpointing every {fmt_hours(tau)} of compute" if tier.checkpoint > 0 else ""
        out.append(
            f"{tier.name} loses {fmt_pct(1 - 1 / sw.factor[t, c])} of its wall time to preemptions at "
            f"{plural(int(sw.gpus[c]), 'GPU')} ({plural(n, 'node')}: {number(rate, 2)} preemptions/h{every}; wall time "
            f"±{fmt_pct(sw.wall_cv[t, c])} (one standard deviation) from their randomness)."
        )
        if pre.exposure[t, c] > SMALL_EXPOSURE:
            out.append(
                f"On {tier.name} Λ·(τ + restart) = {number(pre.exposure[t, c], 2)} at {plural(n, 'node')}: "
                "not small, so "
                f"first-order Young/Daly ({times(pre.first_order_factor[t, c], 2)} the compute time) would understate "
                f"it; the exponential model (Daly 2006, failures during restarts too) gives "
                f"{times(sw.factor[t, c], 2)}."
            )
    out += [spot_sentence(payoff) for payoff in rec.spot]
    return out


def _reserved(rec: "Recommendation", c: int) -> list[str]:
    sw = rec.sweep
    out = []
    for t, tier in enumerate(sw.tiers):
        hours = sw.wall_hours[0, t, c]
        if tier.min_hours > hours and sw.available[t, c]:
            out.append(
                f"{tier.name} bills at least {fmt_hours(tier.min_hours)}: at {plural(int(sw.gpus[c]), 'GPU')} the "
                f"job takes {fmt_hours(hours)}, so {fmt_pct(1 - hours / tier.min_hours)} of what it bills would be "
                "idle."
            )
    return out


def _likelier(rec: "Recommendation", t: int, c: int) -> str:
    """When the chosen plan's odds are poor, name the plan the same objective picks at 90%."""
    p = rec.probabilities["both"]
    if p is None or p[t, c] >= LIKELY:
        return ""
    if rec.safer is None:
        return f"Only {fmt_pct(p[t, c])} likely to meet {_limits_text(rec)}; no plan meets it with 90% probability."
    return (
        f"Only {fmt_pct(p[t, c])} likely to meet {_limits_text(rec)}; with 90% odds: "
        f"{describe(rec, *rec.safer)}{_odds(rec, *rec.safer)}."
    )


def _knife_edge(rec: "Recommendation") -> str:
    edge = rec.knife_edge
    if edge is None:
        return ""
    sw, p = rec.sweep, rec.probabilities["budget"]
    costs = [sw.cost_usd[0][x] for x in edge.plans]
    odds = [p[x] for x in edge.plans]
    counts = sorted({int(sw.gpus[c]) for _, c in edge.plans})
    median = float(sw.cost_usd[0][edge.fastest])
    pct = lambda x: f"{'+' if x >= 0 else ''}{fmt_pct(x)}"  # noqa: E731
    return (
        f"The budget does not discriminate: {len(edge.plans)} plans on the frontier "
        f"({span(count(counts[0]), count(counts[-1]))} GPUs) "
        f"cost {span(fmt_usd(min(costs)), fmt_usd(max(costs)))}, each with the budget inside its 90% cost interval "
        f"(P(within budget) {span(fmt_pct(min(odds)), fmt_pct(max(odds)))}): the model cannot say which of them "
        f"stays within "
        f"it. A little more buys the fastest, {describe(rec, *edge.fastest)}: {fmt_usd(median)} "
        f"({pct(median / rec.limits.budget - 1)}) on its median, {fmt_usd(edge.budget_for_fastest)} "
        f"({pct(edge.budget_for_fastest / rec.limits.budget - 1)}) with 90% odds."
    )


def _batch(rec: "Recommendation", c: int) -> str:
    """The global batch the chosen plan trains with, beside the measured one, when it differs."""
    sw = rec.sweep
    batch = float(sw.global_batch[c])
    per_gpu = batch / float(sw.gpus[c])
    if rec.measured_batch is None or abs(batch - rec.measured_batch) < 0.5:
        return ""
    return (
        f"It trains with a global batch of {count(batch)} samples ({number(per_gpu)} per GPU; "
        f"{'largest measured' if rec.calibrated else 'at the baseline count'}: "
        f"{count(rec.measured_batch)})."
    )


def _noise(rec: "Recommendation", c: int) -> str:
    sw = rec.sweep
    if not sw.statistical_efficiency:
        return ""
    import numpy as np

    b = int(np.searchsorted(sw.gpus, sw.baseline_gpus))
    at_base = (
        f"{int(sw.steps[b]):,} at {plural(sw.baseline_gpus, 'GPU')}, "
        if b < sw.gpus.size and sw.gpus[b] == sw.baseline_gpus
        else ""
    )
    return (
        f"Statistical efficiency used: steps follow the gradient noise scale ({rec.gradient_noise_scale:g} samples; "
        f"McCandlish et al. 2018): {at_base}{int(sw.steps[c]):,} at {plural(int(sw.gpus[c]), 'GPU')}."
    )


def _frontier(rec: "Recommendation") -> str:
    if not rec.frontier:
        return ""
    (t0, c0), (t1, c1) = rec.frontier[0], rec.frontier[-1]
    if len(rec.frontier) == 1:
        return f"Cost-time frontier: one plan, {describe(rec, t0, c0)}, both the fastest and the cheapest."
    return (
        f"Cost-time frontier: {len(rec.frontier)} plans, from the fastest, {describe(rec, t0, c0)}, "
        f"to the cheapest, {describe(rec, t1, c1)}."
    )


def _left_out(rec: "Recommendation") -> list[str]:
    """Counts ruled out before pricing, each sentence naming its own cause: GPU memory, the layout's
    degrees, the batch (under one sample per rank, or a fixed global batch that does not divide)."""
    sw = rec.sweep
    over = _over_memory(sw)
    out = [_memory_sentence(rec, over)] if over.any() else []
    run = rec.runnable
    if run is not None:
        # each count under its first cause (Runnable.cause): a count the expert degree cannot split
        # passes batch.divides and was left out without a word (1, 2 and 4 GPUs under EP 8)
        out += [_batch_sentence(rec, cause, run.first_cause(cause)) for cause in (LAYOUT, RANKS, UNEVEN)]
    elif not sw.fits_batch.all():
        out.append(f"Left out {_counts(sw.gpus[~sw.fits_batch])}: under one sample per GPU, or not dividing the "
                   f"fixed global batch evenly (the remainder would change the recipe).")
    if (long := _outlasting_counts(sw)).any():
        hours, gpus = min(zip(sw.compute_hours[0][long].tolist(), sw.gpus[long].tolist(), strict=True))
        out.append(f"Left out {_counts(sw.gpus[long])}: the job alone computes for more than "
                   f"{fmt_hours(MAX_DEADLINE_HOURS)} there, {fmt_hours(hours)} even at {count(gpus)} GPUs: "
                   "past the longest deadline advisor plans for, so no tier prices them.")
    for t, tier in enumerate(sw.tiers):
        capped = sw.gpus > (tier.max_gpus or sw.gpus.max())
        if run is not None and (capped & run.ok).any():  # counts that run, but not on this tier: said, or
            # a tier capped below every count that runs read "no GPU count is possible" with no reason
            out.append(f"{tier.name} offers at most {plural(tier.max_gpus, 'GPU')} (its max_gpus): "
                       f"{_counts(sw.gpus[capped & run.ok])} that run are not priced there.")
        if (never := _stalled_counts(sw, t)).any():
            out.append(f"{tier.name} leaves out {_counts(sw.gpus[never])}: its preemptions "
                       f"({number(tier.preemptions_per_node_hour)} per node-hour against a restart of "
                       f"{number(tier.restart / 60)} min) put the expected wall time above "
                       f"{fmt_hours(MAX_DEADLINE_HOURS)}: the job would never finish.")
        if tier.instance_gpus and tier.instance_gpus > 1 and not sw.offered[t].all():
            out.append(
                f"{tier.name} rents whole {tier.instance_gpus}-GPU instances: only multiples of {tier.instance_gpus} "
                f"are priced there."
            )
    return [line for line in out if line]


def _stalled_counts(sw, t: int):
    """Counts tier t prices but its preemptions keep from finishing (advisor.planning.billing.finishes)."""
    from advisor.planning.billing import finishes

    never = ~finishes(sw.wall_hours, sw.cost_usd)[t]
    return (never & (sw.preemption.factor[t] > 1) & sw.offered[t] & sw.fits_batch & sw.fits_memory
            & ~_outlasting_counts(sw))


def _outlasting_counts(sw):
    """Counts left out on every tier because the job's compute alone never finishes
    (advisor.planning.billing.outlasts), preemptions or not."""
    from advisor.planning.billing import outlasts

    return outlasts(sw.compute_hours[0]) & sw.fits_batch & sw.fits_memory


def _counts(gpus) -> str:
    """"3 counts (1, 2, 4)", "505 counts (1, 2, 4, ...)", "1 count (24)"."""
    shown = ", ".join(count(int(g)) for g in gpus[:3]) + (", ..." if len(gpus) > 3 else "")
    return f"{plural(len(gpus), 'count')} ({shown})"


def _batch_sentence(rec: "Recommendation", cause: str, mask) -> str:
    """One left-out cause of the layout or the batch over the counts it rules out (`mask`), or ""."""
    if not mask.any():
        return ""
    run, gpus = rec.runnable, rec.sweep.gpus[mask]
    if cause == LAYOUT:
        why = f"the layout cannot split them ({run.split_rule})"
    elif cause == RANKS:
        why = "under one sample per data-parallel rank"
    else:
        why = (f"the fixed global batch of {count(float(run.global_batch[0]))} samples does not divide evenly "
               f"over their data-parallel ranks (the remainder would change the recipe)")
    return f"Left out {_counts(gpus)}: {why}."


def _over_memory(sw):
    """Counts whose footprint per GPU is above the GPU's memory (none when it is unknown)."""
    import numpy as np

    if sw.gpu_memory is None:
        return np.zeros(sw.gpus.shape, dtype=bool)
    return np.asarray(sw.memory_bytes, dtype=float) > sw.gpu_memory


def _memory_where(sw, over) -> str:
    """Which counts memory rules out: "below 8 GPUs" when they are exactly the smaller ones, "at every
    count", else how many and which."""
    if over.all():
        return "at every count"
    first = int((~over).argmax())
    if over[:first].all() and not over[first:].any():
        return f"below {plural(int(sw.gpus[first]), 'GPU')}"
    return _counts(sw.gpus[over])


def _memory_sentence(rec: "Recommendation", over) -> str:
    from advisor.topology.memory import STATE_BYTES_PER_PARAM

    sw = rec.sweep
    c = int(over.nonzero()[0][-1])  # the largest count over memory: the nearest to fitting, above it by construction
    from advisor.topology.memory import split_evidence

    peaks, fits = split_evidence(rec.peaks)
    measured = ", moved to the calibration's measured peak" if peaks else ""
    if fits:
        ran = ", ".join(str(g) for g in sorted({f.gpus for f in fits}))
        measured += f"; the runs measured at {ran} GPUs fit, and so does each count the estimate says holds no more"
    hints = [f'with activation_checkpoint = "{mode}" the smallest count that fits would be {plural(n, "GPU")}'
             if n else f'activation_checkpoint = "{mode}" would not fit at any count either'
             for mode, n in rec.recompute.items()]
    joined = "; ".join(hints)
    hint = f" {joined[:1].upper()}{joined[1:]}." if hints else ""
    if hints and not any(rec.recompute.values()):
        hint = hint[:-1] + " (tensor or pipeline parallelism would be needed)."
    used, capacity = above(sw.memory_bytes[c], sw.gpu_memory)
    return (
        f"Left out {_memory_where(sw, over)}: the footprint per GPU exceeds the {capacity} of GPU "
        f"memory; at {plural(int(sw.gpus[c]), 'GPU')} it is {used} (model state "
        f"{STATE_BYTES_PER_PARAM} bytes per parameter, {fmt_bytes(STATE_BYTES_PER_PARAM * rec.params)} for the whole "
        f"model, split where the layout shards it, plus activations{measured}; advisor.topology.memory).{hint}"
    )
