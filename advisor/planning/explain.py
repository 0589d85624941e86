"""The "why" of a recommendation: short sentences computed from the priced sweep.

Each sentence states a number the table also shows, so a reader can check it: the headline
(what was chosen and how it meets the objective), what one more doubling would buy, the knee
beyond which each doubling adds little speed, what preemptions cost on each preemptible tier
and where such a tier stops paying off, idle hours a reserved commitment would bill, the odds
when they are poor, the gradient-noise-scale effect when used, and the cost-time frontier.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.planning.recommend import choose
from advisor.text import interval, plural

if TYPE_CHECKING:
    from advisor.planning.recommend import Recommendation

#: "each doubling adds less than this much speed" marks the knee.
SMALL_GAIN = 0.15

#: Below this probability of meeting the limits, name the plan that meets them with 90% odds.
LIKELY = 0.8


def fmt_usd(x: float) -> str:
    return f"${x:,.0f}" if x >= 100 else f"${x:,.2f}"


def fmt_hours(h: float) -> str:
    if h >= 72:
        return f"{h:,.0f} h ({h / 24:.1f} days)"
    return f"{h:.3g} h" if h >= 0.1 else f"{h * 60:.2g} min"


def fmt_pct(p: float) -> str:
    return f"{100 * p:.0f}%"


def describe(rec: "Recommendation", t: int, c: int) -> str:
    sw = rec.sweep
    return (f"{plural(int(sw.gpus[c]), 'GPU')} ({plural(int(sw.nodes[c]), 'node')}) on {sw.tiers[t].name}: "
            f"{fmt_hours(sw.wall_hours[0, t, c])}, {fmt_usd(sw.cost_usd[0, t, c])}")


def _limits_text(rec: "Recommendation") -> str:
    parts = []
    if rec.budget_usd is not None:
        parts.append(f"within {fmt_usd(rec.budget_usd)}")
    if rec.deadline_hours is not None:
        parts.append(f"within {fmt_hours(rec.deadline_hours)}")
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
        return message, [s.sentence() for s in rec.spot] + _left_out(rec)
    t, c = rec.chosen
    headline = {
        "speedup-per-dollar": "Best speedup per dollar",
        "fastest-within-budget": f"Fastest plan {_limits_text(rec)}",
        "cheapest-within-deadline": f"Cheapest plan that finishes {_limits_text(rec)}",
        "cheapest-within-budget-and-deadline": f"Cheapest plan {_limits_text(rec)}",
    }[rec.objective]
    message = (f"{headline}: {describe(rec, t, c)}, {sw.speedup[t, c]:.3g}x the baseline "
               f"({plural(sw.baseline_gpus, 'GPU')}) at {fmt_pct(sw.efficiency[t, c])} efficiency"
               f"{_odds(rec, t, c)}.")
    why = [s for s in (_doubling(rec, t, c), _knee(rec, t), *_preemption(rec, c), *_reserved(rec, c),
                       _likelier(rec, t, c), _noise(rec, c), _frontier(rec), *_left_out(rec)) if s]
    return message, why


def _doubling(rec, t: int, c: int) -> str:
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
    speed = f"finish {faster:.2f}x sooner" if faster > 1 else f"not finish sooner ({faster:.2f}x the speed)"
    going = f"Doubling to {int(sw.gpus[k])} GPUs" if double.size else f"Going to {int(sw.gpus[k])} GPUs (the most on this tier)"
    return f"{going} on {sw.tiers[t].name} would {speed} for {dearer:.2f}x the cost."


def _knee(rec, t: int) -> str:
    """'beyond N GPUs each doubling adds < 15% speed for ~2x the cost' on the chosen tier."""
    import numpy as np

    sw = rec.sweep
    doubled = np.searchsorted(sw.gpus, 2 * sw.gpus)
    has = (doubled < sw.gpus.size)
    doubled = np.minimum(doubled, sw.gpus.size - 1)
    has &= (sw.gpus[doubled] == 2 * sw.gpus) & sw.available[t] & sw.available[t, doubled]
    idx = np.flatnonzero(has)
    if idx.size == 0:
        return ""
    gain = sw.wall_hours[0, t, idx] / sw.wall_hours[0, t, doubled[idx]] - 1
    small = gain < SMALL_GAIN
    tail = np.logical_and.accumulate(small[::-1])[::-1]
    if not tail.any():
        return ""
    first = int(np.argmax(tail))
    cost_ratio = sw.cost_usd[0, t, doubled[idx[first:]]] / sw.cost_usd[0, t, idx[first:]]
    return (f"On {sw.tiers[t].name}, beyond {plural(int(sw.gpus[idx[first]]), 'GPU')} each doubling adds under "
            f"{fmt_pct(SMALL_GAIN)} speed for {interval(cost_ratio.min(), cost_ratio.max(), 2)}x the cost.")


def _preemption(rec, c: int) -> list[str]:
    from advisor.planning.billing import checkpoint_interval_hours

    sw = rec.sweep
    out = []
    for t, tier in enumerate(sw.tiers):
        if tier.preemptions_per_node_hour == 0 or not sw.available[t, c]:
            continue
        n = int(sw.nodes[c])
        rate = tier.preemptions_per_node_hour * n
        loss = 1 - 1 / sw.factor[t, c]
        tau = float(checkpoint_interval_hours(tier.preemptions_per_node_hour, n, tier.checkpoint))
        every = f", checkpointing every {fmt_hours(tau)}" if tier.checkpoint > 0 else ""
        out.append(f"{tier.name} loses {fmt_pct(loss)} of its wall time to preemptions at {plural(int(sw.gpus[c]), 'GPU')} "
                   f"({plural(n, 'node')}: {rate:.2g} preemptions/h{every}).")
    out += [s.sentence() for s in rec.spot]
    return out


def _reserved(rec, c: int) -> list[str]:
    sw = rec.sweep
    out = []
    for t, tier in enumerate(sw.tiers):
        hours = sw.wall_hours[0, t, c]
        if tier.min_hours > hours and sw.available[t, c]:
            out.append(f"{tier.name} bills at least {tier.min_hours:g} h: at {plural(int(sw.gpus[c]), 'GPU')} the job takes "
                       f"{fmt_hours(hours)}, so {fmt_pct(1 - hours / tier.min_hours)} of what it bills would be idle.")
    return out


def _likelier(rec, t: int, c: int) -> str:
    """When the chosen plan's odds are poor, name the plan the same objective picks at 90%."""
    p = rec.probabilities["both"]
    if p is None or p[t, c] >= LIKELY:
        return ""
    safer, _ = choose(rec.sweep, rec.objective, rec.budget_usd, rec.deadline_hours, 0.9, rec.probabilities)
    if safer is None:
        return f"Only {fmt_pct(p[t, c])} likely to meet {_limits_text(rec)}; no plan meets it with 90% probability."
    return (f"Only {fmt_pct(p[t, c])} likely to meet {_limits_text(rec)}; with 90% odds: "
            f"{describe(rec, *safer)}{_odds(rec, *safer)}.")


def _noise(rec, c: int) -> str:
    sw = rec.sweep
    if not sw.statistical_efficiency:
        return ""
    import numpy as np

    b = int(np.searchsorted(sw.gpus, sw.baseline_gpus))
    at_base = f"{int(sw.steps[b]):,} at {plural(sw.baseline_gpus, 'GPU')}, " if b < sw.gpus.size and sw.gpus[b] == sw.baseline_gpus else ""
    return (f"Statistical efficiency used: steps follow the gradient noise scale ({rec.gradient_noise_scale:g} samples; "
            f"McCandlish et al. 2018): {at_base}{int(sw.steps[c]):,} at {plural(int(sw.gpus[c]), 'GPU')}.")


def _frontier(rec) -> str:
    if not rec.frontier:
        return ""
    (t0, c0), (t1, c1) = rec.frontier[0], rec.frontier[-1]
    return (f"Cost-time frontier: {len(rec.frontier)} plans, from the fastest, {describe(rec, t0, c0)}, "
            f"to the cheapest, {describe(rec, t1, c1)}.")


def _left_out(rec) -> list[str]:
    """Counts ruled out before pricing: memory for the model states, or under one sample per GPU."""
    from advisor.planning.billing import STATE_BYTES_PER_PARAM

    sw = rec.sweep
    out = []
    if not sw.fits_memory.all():
        smallest = int(sw.gpus[sw.fits_memory][0]) if sw.fits_memory.any() else None
        states = STATE_BYTES_PER_PARAM * rec.params / 1e9
        where = f"below {plural(smallest, 'GPU')}" if smallest else "at every count"
        out.append(f"Left out {where}: the model states ({STATE_BYTES_PER_PARAM} bytes per parameter, {states:,.0f} GB) "
                   f"do not fit in GPU memory.")
    if not sw.fits_batch.all():
        largest = int(sw.gpus[sw.fits_batch][-1]) if sw.fits_batch.any() else None
        out.append(f"Left out above {plural(largest, 'GPU')}: fewer than one sample per GPU at the fixed global batch.")
    return out
