"""Choosing a layout per GPU count, and merging the per-layout predictions and price sweeps.

Physics below, choosing above: advisor.topology.layouts says what each candidate layout sends over
which link and how much memory it needs (`candidates`, `build`, `Layout.fits`); this module picks,
at every count, the fastest candidate that fits in memory and gives every data-parallel rank whole
samples (advisor.batch.divides), with any step-time model:

- `choose` (any step-time function) -> `LayoutChoice`: the candidates, their median step seconds,
  the one picked per count and one sentence why (what it beat and by how much).
- `predict` (a ScalingModel, for `advisor predict`): the prediction at each count's chosen layout.
- `sweep` (advisor.planning.billing's price sweep, for `advisor recommend`): every candidate priced
  with the model's `for_workload`, the sweep carrying its `LayoutChoice`.
  Both merge per count with one loop (`merged`): every per-count array of the picked candidate's record.
- `auto_workload`: the spec with strategy 'auto' (`advisor recommend --layouts auto`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

import numpy as np

from advisor.batch import divides
from advisor.errors import InputError
from advisor.planning import billing
from advisor.topology.layouts import Layout, build, candidate_workload, candidates, gpu_node_arrays, split_rule

if TYPE_CHECKING:
    from advisor.spec import Workload


@dataclass(frozen=True, kw_only=True)
class LayoutChoice:
    """The layout of each count: the candidates, their median step seconds and the one picked.

    `pick` indexes `layouts` per count: the fastest candidate that runs (fits in memory, whole samples
    per rank, and in a sweep a tier that rents it), else a fallback the caller names (`predict`: the
    fastest valid layout regardless of memory; `sweep`: the least memory, so "left out" reads right).
    `seconds` is None for the spec's own layout (nothing was chosen). `none_runs` and `alone` word
    `why` where the picked layout cannot run or beat nothing."""

    layouts: tuple[Layout, ...]
    workloads: tuple[Workload, ...]
    pick: np.ndarray
    seconds: np.ndarray | None = None  # (candidates, counts) median step seconds, inf where it cannot run
    none_runs: str = "no candidate layout fits in memory"
    alone: str = "the only candidate layout that fits"

    @classmethod
    def declared(cls, w: Workload, counts, nodes) -> LayoutChoice:
        """The spec's own layout at every count (a named strategy: nothing to choose)."""
        lay = build(w, counts, nodes)
        return cls(layouts=(lay,), workloads=(w,), pick=np.zeros(lay.gpus.shape, dtype=np.int64))

    @property
    def runs(self) -> np.ndarray:
        """Per count: the picked candidate runs there (always, for the spec's own layout)."""
        if self.seconds is None:
            return np.ones(self.pick.shape, dtype=bool)
        return np.isfinite(self.seconds[self.pick, np.arange(self.pick.size)])

    def with_fallback(self, index) -> LayoutChoice:
        """The same choice with `index` (per count) picked wherever no candidate runs."""
        return replace(self, pick=np.where(self.runs, self.pick, index))

    def label(self, c: int) -> str:
        return self.layouts[int(self.pick[c])].label(c)

    def strategy(self, c: int) -> str:
        return self.layouts[int(self.pick[c])].name

    def runner_up(self, c: int) -> tuple[str, str, float] | None:
        """(strategy, layout, how many times slower) of the fastest other candidate that runs at count c."""
        if self.seconds is None or not self.runs[c]:
            return None
        k = int(self.pick[c])
        col = self.seconds[:, c].copy()
        col[k] = np.inf
        j = int(np.argmin(col))
        if not np.isfinite(col[j]):
            return None
        return self.layouts[j].name, self.layouts[j].label(c), float(col[j] / self.seconds[k, c])

    def why(self, c: int) -> str | None:
        """One sentence: which layout, what it beat and by how much (None for the spec's own layout)."""
        if self.seconds is None:
            return None
        lay = self.layouts[int(self.pick[c])]
        named = f"{lay.name} ({lay.label(c)})"
        if not self.runs[c]:
            return self.none_runs.format(named=named)
        other = self.runner_up(c)
        if other is None:
            return f"{named}: {self.alone}"
        return f"{named}: {other[2]:.2f}x faster per step than {other[0]} ({other[1]}), the next best"


def choose(w: Workload, gpus, nodes, step_seconds, peaks=()) -> LayoutChoice:
    """Try every candidate layout (`candidates`) at every count and keep the fastest that fits in
    memory and gives every data-parallel rank whole samples (advisor.batch.divides).
    `step_seconds(workload, gpus, nodes)` is the step-time model (median seconds), called
    once per candidate with that candidate's concrete workload (`with_layout`). Where none runs the
    first candidate is picked (`LayoutChoice.with_fallback` names another)."""
    layouts = candidates(w, gpus, nodes)
    works = [candidate_workload(w, lay) for lay in layouts]
    seconds = np.full((len(layouts), len(layouts[0].gpus)), np.inf)
    for k, (lay, cw) in enumerate(zip(layouts, works, strict=True)):
        ok = lay.fits(cw, peaks, measured=w) & divides(cw, lay.gpus)  # memory, and whole samples per rank
        if ok.any():
            t = np.asarray(step_seconds(cw, lay.gpus, lay.nodes), float)
            seconds[k] = np.where(ok, t, np.inf)
    pick = np.where(np.isfinite(seconds).any(axis=0), np.argmin(seconds, axis=0), 0)
    return LayoutChoice(layouts=tuple(layouts), workloads=tuple(works), pick=pick, seconds=seconds)


def merged(records: list, pick: np.ndarray) -> dict:
    """THE merge of per-candidate records (predictions, sweeps): per count, every array field whose
    last axis is the counts, taken from the record that count picked."""
    cols = np.arange(pick.size)
    out = {}
    for f in fields(records[0]):
        value = getattr(records[0], f.name)
        if isinstance(value, np.ndarray) and value.shape and value.shape[-1] == pick.size:
            out[f.name] = np.moveaxis(np.stack([getattr(r, f.name) for r in records])[pick, ..., cols], 0, -1)
    return out


def _median_step(model):
    """The step-time function `choose` asks: the model's median for each candidate's workload."""
    return lambda cw, gg, nn: model.for_workload(cw).step_time(gg, nn)[0]


def predict(model, gpus, nodes=None, peaks=()):
    """`model.predict` (an advisor.scaling.model.ScalingModel) at the workload's own layout, or under
    strategy 'auto' at each count's fastest candidate layout that fits in memory (`choose`, with the
    model's median step time). Returns (prediction, layout label per count, why per count or None).
    A count the declared degrees cannot split is refused (InputError naming --gpus)."""
    w = model.workload
    g, n = gpu_node_arrays(gpus, nodes, w)
    if w.parallelism.strategy != "auto":
        lay = build(w, g, n)
        if not lay.valid.all():
            raise InputError.at("--gpus", "", f"the layout cannot split this count: {split_rule(w)}",
                                int(g[~lay.valid][0]))
        return model.predict(g, n), lay.labels(), None
    choice = choose(w, g, n, _median_step(model), peaks)
    preds = [model.for_workload(cw).predict(g, n) for cw in choice.workloads]
    valid = np.stack([lay.valid for lay in choice.layouts])
    choice = choice.with_fallback(np.argmin(np.where(valid, np.stack([p.step_seconds for p in preds]), np.inf), axis=0))
    out = merged(preds, choice.pick)
    cols = np.arange(g.size)
    out["breakdown"] = {k: np.stack([p.breakdown[k] for p in preds])[choice.pick, cols] for k in preds[0].breakdown}
    # one baseline for every layout: the layout chosen at the baseline count
    b, bn = np.array([model.baseline_gpus]), np.array([model.baseline_nodes])
    at_base = choose(w, b, bn, _median_step(model), peaks)
    base = float(model.for_workload(at_base.workloads[int(at_base.pick[0])]).predict(b, bn).throughput[0])
    out["speedup"] = out["throughput"] / base
    out["efficiency"] = out["speedup"] * model.baseline_gpus / g
    warnings = list(preds[0].warnings)
    if not choice.runs.all():
        warnings.append(
            f"no candidate layout fits in GPU memory at {', '.join(str(int(x)) for x in g[~choice.runs])} "
            "GPUs: predicted with the fastest layout regardless of memory"
        )
    whys = [choice.why(i) for i in range(len(g))]
    return replace(preds[0], **out, warnings=warnings), [choice.label(i) for i in range(len(g))], whys


#: How `why` words a sweep's count: the picked layout runs alone or, where nothing runs, is shown anyway.
_SWEEP_WORDS = {"none_runs": "{named}: the only layout that runs here (memory, batch, degrees)",
                "alone": "the only layout that runs here (memory, batch, degrees)"}


def sweep(w: Workload, model, tiers=None, baseline_gpus=None, gpus=None, peaks=()) -> billing.Sweep:
    """advisor.planning.billing.sweep with the layout chosen per count: the spec's own, or under
    strategy 'auto' every candidate (`candidates`) priced with the model's `for_workload` and merged per
    count: the fastest median step among the candidates the count can run (batch, memory, tier)."""
    if w.parallelism.strategy != "auto":
        sw = billing.sweep(w, model, tiers, baseline_gpus, gpus, peaks)
        return replace(sw, layouts=LayoutChoice.declared(w, sw.gpus, sw.nodes))
    counts = (
        billing.gpu_counts(w.cluster.gpus_per_node, w.cluster.max_gpus)
        if gpus is None
        else np.asarray(gpus, dtype=np.int64)
    )
    layouts = candidates(w, counts, np.asarray(w.nodes(counts), dtype=np.int64))
    works = [candidate_workload(w, lay) for lay in layouts]
    sweeps = [
        _candidate_sweep(w, lay, cw, model, tiers, baseline_gpus, peaks) for lay, cw in zip(layouts, works, strict=True)
    ]
    seconds = np.stack([np.where(s.available.any(axis=0), s.step_seconds[0], np.inf) for s in sweeps])
    # where nothing runs, show the layout closest to fitting among those the count can run, so "left
    # out" names a footprint above the memory (it named 76.5 GB < 96 GB of a layout 4 GPUs cannot run)
    least_memory = np.argmin(np.stack([np.where(lay.valid, s.memory_bytes, np.inf)
                                       for lay, s in zip(layouts, sweeps, strict=True)]), axis=0)
    choice = LayoutChoice(layouts=tuple(layouts), workloads=tuple(works), seconds=seconds, **_SWEEP_WORDS,
                          pick=np.argmin(seconds, axis=0)).with_fallback(least_memory)
    base = (
        sweeps[int(choice.pick[np.searchsorted(counts, sweeps[0].baseline_gpus)])]
        if sweeps[0].baseline_gpus in counts
        else min(sweeps, key=lambda s: s.baseline_hours)
    )
    return replace(sweeps[0], **merged(sweeps, choice.pick), baseline_hours=base.baseline_hours, layouts=choice)


def _candidate_sweep(w: Workload, lay: Layout, cw: Workload, model, tiers, baseline_gpus, peaks) -> billing.Sweep:
    """One candidate layout priced over the counts, its memory against the peaks measured in the spec's
    own layout (`w`)."""
    return billing.sweep(cw, model.for_workload(cw), tiers, baseline_gpus, lay.gpus, peaks, layout=lay, measured=w)


def auto_workload(w: Workload) -> Workload:
    """The workload with strategy 'auto' (`advisor recommend --layouts auto`): the data-parallel degrees
    are left to the choice; tensor, pipeline and context degrees the spec fixes stay fixed."""
    par = w.parallelism.model_copy(
        update={"strategy": "auto", "data_parallel_shard_degree": None, "data_parallel_replicate_degree": None}
    )
    return w.model_copy(update={"parallelism": par})
