"""Choosing a layout per GPU count, and merging the per-layout predictions and price sweeps.

Physics below, choosing above: advisor.topology.layouts says what each candidate layout sends over
which link and how much memory it needs (`candidates`, `build`, `Layout.fits`); this module picks,
at every count, the fastest candidate that fits in memory and gives every data-parallel rank whole
samples (advisor.batch.divides), with any step-time model:

- `choose` (any step-time function) -> `Choice`: the candidates' seconds and the best per count.
- `predict` (a ScalingModel, for `advisor predict`): the prediction at each count's chosen layout.
- `sweep` (advisor.planning.billing's price sweep, for `advisor recommend`): every candidate priced
  with the model's `for_workload` and merged per count (`SweepLayouts` records the pick and why).
- `auto_workload`: the spec with strategy 'auto' (`advisor recommend --layouts auto`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from advisor.topology.layouts import Layout, build, candidate_workload, candidates, gpu_node_arrays

if TYPE_CHECKING:
    from advisor.spec import Workload


@dataclass(frozen=True)
class Choice:
    """Candidate layouts at each GPU count, their predicted step seconds and the fastest that fits."""

    layouts: list[Layout]
    workloads: list[Workload]
    seconds: np.ndarray  # (candidates, counts): median step seconds, inf where invalid or out of memory
    best: np.ndarray  # index into layouts per count, -1 where none fits

    def label(self, i: int) -> str | None:
        b = int(self.best[i])
        return None if b < 0 else self.layouts[b].label(i)

    def strategy(self, i: int) -> str | None:
        b = int(self.best[i])
        return None if b < 0 else self.layouts[b].name

    def runner_up(self, i: int) -> tuple[str, str, float] | None:
        """(strategy, layout, how many times slower) of the fastest other layout at count i."""
        b = int(self.best[i])
        if b < 0:
            return None
        col = self.seconds[:, i].copy()
        col[b] = np.inf
        j = int(np.argmin(col))
        if not np.isfinite(col[j]):
            return None
        return self.layouts[j].name, self.layouts[j].label(i), float(col[j] / self.seconds[b, i])

    def why(self, i: int) -> str:
        """One sentence: which layout, what it beat and by how much."""
        b = int(self.best[i])
        if b < 0:
            return "no candidate layout fits in memory"
        other = self.runner_up(i)
        mine = f"{self.layouts[b].name} ({self.layouts[b].label(i)})"
        if other is None:
            return f"{mine}: the only candidate layout that fits"
        return f"{mine}: {other[2]:.2f}x faster per step than {other[0]} ({other[1]}), the next best"


def choose(w: Workload, gpus, nodes, step_seconds, peaks=()) -> Choice:
    """Try every candidate layout (`candidates`) at every count and keep the fastest that fits in
    memory and gives every data-parallel rank whole samples (advisor.batch.divides).
    `step_seconds(workload, gpus, nodes)` is the step-time model (median seconds), called
    once per candidate with that candidate's concrete workload (`with_layout`)."""
    layouts = candidates(w, gpus, nodes)
    works = [candidate_workload(w, lay) for lay in layouts]
    seconds = np.full((len(layouts), len(layouts[0].gpus)), np.inf)
    for k, (lay, cw) in enumerate(zip(layouts, works, strict=False)):
        from advisor.batch import divides

        ok = lay.fits(cw, peaks, measured=w) & divides(cw, lay.gpus)  # memory, and whole samples per rank
        if ok.any():
            t = np.asarray(step_seconds(cw, lay.gpus, lay.nodes), float)
            seconds[k] = np.where(ok, t, np.inf)
    best = np.where(np.isfinite(seconds).any(axis=0), np.argmin(seconds, axis=0), -1)
    return Choice(layouts, works, seconds, best)


def _model_for(model, workload: Workload):
    """The fitted step-time model predicting for another layout of the job (ScalingModel.for_workload)."""
    if not hasattr(model, "for_workload"):
        from advisor.errors import InputError

        raise InputError.at(
            "parallelism.strategy",
            "",
            "choosing a layout needs a scaling model that predicts other "
            "layouts (ScalingModel.for_workload); name a strategy instead of 'auto'",
            "auto",
        )
    return model.for_workload(workload)


def predict(model, gpus, nodes=None, peaks=()):
    """`model.predict` (an advisor.scaling.model.ScalingModel) at the workload's own layout, or under
    strategy 'auto' at each count's fastest candidate layout that fits in memory (`choose`, with the
    model's median step time). Returns (prediction, layout label per count, why per count or None).
    A count the declared degrees cannot split is refused (InputError naming --gpus)."""
    from dataclasses import fields, replace

    from advisor.errors import InputError

    w = model.workload
    g, n = gpu_node_arrays(gpus, nodes, w)
    if w.parallelism.strategy != "auto":
        lay = build(w, g, n)
        if not lay.valid.all():
            bad = int(g[~lay.valid][0])
            raise InputError.at(
                "--gpus",
                "",
                f"the layout cannot split this count: tensor x pipeline x context parallel "
                f"degrees ({w.model_parallel_size()}) and the data-parallel degrees must multiply to it",
                bad,
            )
        return model.predict(g, n), lay.labels(), None
    choice = choose(w, g, n, lambda cw, gg, nn: _model_for(model, cw).step_time(gg, nn)[0], peaks)
    preds = [_model_for(model, cw).predict(g, n) for cw in choice.workloads]
    pick = np.where(
        choice.best >= 0,
        choice.best,
        np.argmin(
            np.where(
                np.stack([lay.valid for lay in choice.layouts]), np.stack([p.step_seconds for p in preds]), np.inf
            ),
            axis=0,
        ),
    )
    cols = np.arange(len(g))
    out = {}
    for f in fields(preds[0]):
        value = getattr(preds[0], f.name)
        if isinstance(value, np.ndarray) and value.shape == g.shape:
            out[f.name] = np.stack([getattr(p, f.name) for p in preds])[pick, cols]
    # one baseline for every layout: the layout chosen at the baseline count
    b, bn = np.array([model.baseline_gpus]), np.array([model.baseline_nodes])
    at_base = choose(w, b, bn, lambda cw, gg, nn: _model_for(model, cw).step_time(gg, nn)[0], peaks)
    k = max(int(at_base.best[0]), 0)
    base = float(_model_for(model, at_base.workloads[k]).predict(b, bn).throughput[0])
    out["speedup"] = out["throughput"] / base
    out["efficiency"] = out["speedup"] * model.baseline_gpus / g
    warnings = list(preds[0].warnings)
    if (choice.best < 0).any():
        warnings.append(
            f"no candidate layout fits in GPU memory at {', '.join(str(int(x)) for x in g[choice.best < 0])} "
            "GPUs: predicted with the fastest layout regardless of memory"
        )
    labels = [choice.layouts[int(k)].label(i) for i, k in enumerate(pick)]
    whys = [choice.why(i) for i in range(len(g))]
    return replace(preds[0], **out, warnings=warnings), labels, whys


@dataclass(frozen=True)
class SweepLayouts:
    """The layout behind each count of a recommendation sweep (advisor.planning.billing.Sweep), and,
    under strategy 'auto', the candidates it was chosen from: labels are made on demand (a sweep may
    hold 100k+ counts)."""

    layouts: tuple  # candidate Layout objects over the sweep's counts
    pick: np.ndarray  # index into layouts per count
    seconds: np.ndarray | None = None  # (candidates, counts) median step seconds, inf where unavailable

    @classmethod
    def declared(cls, w: Workload, counts, nodes) -> SweepLayouts:
        lay = build(w, counts, nodes)
        return cls((lay,), np.zeros(lay.gpus.shape, dtype=np.int64))

    def label(self, c: int) -> str:
        return self.layouts[int(self.pick[c])].label(c)

    def strategy(self, c: int) -> str:
        return self.layouts[int(self.pick[c])].name

    def why(self, c: int) -> str | None:
        """What the count's layout beat and by how much (None without alternatives)."""
        if self.seconds is None:
            return None
        k = int(self.pick[c])
        col = self.seconds[:, c].copy()
        mine = col[k]
        col[k] = np.inf
        j = int(np.argmin(col))
        lay = self.layouts[k]
        if not (np.isfinite(mine) and np.isfinite(col[j])):
            return f"{lay.name} ({lay.label(c)}): the only layout that runs here (memory, batch, degrees)"
        other = self.layouts[j]
        return (
            f"{lay.name} ({lay.label(c)}): {col[j] / mine:.2f}x faster per step than {other.name} "
            f"({other.label(c)}), the next best"
        )


def sweep(w: Workload, model, tiers=None, baseline_gpus=None, gpus=None, peaks=()):
    """advisor.planning.billing.sweep with the layout chosen per count: the spec's own, or under
    strategy 'auto' every candidate (`candidates`) priced with the model's `for_workload` and merged per
    count: the fastest median step among the candidates the count can run (batch, memory, tier)."""
    from dataclasses import fields

    from advisor.planning.billing import gpu_counts
    from advisor.planning.billing import sweep as priced

    if w.parallelism.strategy != "auto":
        return priced(w, model, tiers, baseline_gpus, gpus, peaks)
    counts = (
        gpu_counts(w.cluster.gpus_per_node, w.cluster.max_gpus) if gpus is None else np.asarray(gpus, dtype=np.int64)
    )
    nodes = np.asarray(w.nodes(counts), dtype=np.int64)
    layouts = candidates(w, counts, nodes)
    sweeps = []
    for lay in layouts:
        cw = candidate_workload(w, lay)
        sw = priced(cw, _model_for(model, cw), tiers, baseline_gpus, counts, peaks)
        fits = lay.fits(cw, peaks, measured=w)  # peaks were measured in the spec's own layout
        memory = lay.memory_bytes(cw, peaks, measured=w)
        available = sw.offered & sw.fits_batch[None, :] & fits[None, :]
        sweeps.append(replace(sw, fits_memory=fits, memory_bytes=memory, available=available))
    seconds = np.stack([np.where(s.available.any(axis=0), s.step_seconds[0], np.inf) for s in sweeps])
    # where no candidate runs, show the one closest to fitting (the least memory), so "left out" reads right
    least_memory = np.argmin(np.stack([s.memory_bytes for s in sweeps]), axis=0)
    pick = np.where(np.isfinite(seconds).any(axis=0), np.argmin(seconds, axis=0), least_memory)
    cols = np.arange(counts.size)
    merged = {}
    for f in fields(sweeps[0]):
        value = getattr(sweeps[0], f.name)
        if isinstance(value, np.ndarray) and value.shape and value.shape[-1] == counts.size:
            merged[f.name] = (
                np.stack([getattr(s, f.name) for s in sweeps])[(pick, ..., cols)]
                if value.ndim == 1
                else np.moveaxis(np.stack([getattr(s, f.name) for s in sweeps])[pick, ..., cols], 0, -1)
            )
    base = (
        sweeps[int(pick[np.searchsorted(counts, sweeps[0].baseline_gpus)])]
        if sweeps[0].baseline_gpus in counts
        else min(sweeps, key=lambda s: s.baseline_hours)
    )
    merged["baseline_hours"] = base.baseline_hours
    return replace(sweeps[0], **merged, layouts=SweepLayouts(tuple(layouts), pick, seconds))


def auto_workload(w: Workload) -> Workload:
    """The workload with strategy 'auto' (`advisor recommend --layouts auto`): the data-parallel degrees
    are left to the choice; tensor, pipeline and context degrees the spec fixes stay fixed."""
    par = w.parallelism.model_copy(
        update={"strategy": "auto", "data_parallel_shard_degree": None, "data_parallel_replicate_degree": None}
    )
    return w.model_copy(update={"parallelism": par})
