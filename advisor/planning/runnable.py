"""Which GPU counts can run the job at all, why the others cannot, and the baseline count.

`advisor predict` and `advisor recommend` answer the same question with this module: a count runs
when the layout splits it (tensor x pipeline x context degrees and the data-parallel degrees
multiply to it), every data-parallel rank gets whole samples (a fixed global batch divides evenly,
at least one sample per rank: advisor.batch.divides) and the footprint per GPU fits in GPU
memory (advisor.topology.layouts.Layout.memory_bytes, the calibration's measured peaks included,
as the recommend sweep prices it; `peaks` is advisor.topology.memory.memory_evidence, so a count a
measured run shows fit, in its layout and micro-batch, is never left out for memory). Under
strategy "auto" a count runs when some candidate layout does (advisor.topology.layouts.candidates).

The speedup and efficiency baseline is the model's (the smallest measured count) when it runs, else
the smallest count of the sweep (advisor.planning.billing.gpu_counts) that runs: a 70B model's
speedups are never quoted against one GPU that cannot hold it. When no count runs, the smallest
count the layout splits (every count then shows why it cannot run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from advisor.text import above, count, number, plural

if TYPE_CHECKING:
    from advisor.spec import Workload

#: Why a count cannot run, in the order a reader fixes them (`Runnable.cause`).
LAYOUT, RANKS, UNEVEN, MEMORY = "layout", "under one sample", "uneven batch", "memory"


@dataclass(frozen=True)
class Runnable:
    """Per GPU count: does the layout split it, the batch divide over its ranks, the footprint fit."""

    gpus: np.ndarray
    splits: np.ndarray  # the layout's degrees multiply to the count
    whole: np.ndarray  # at least one sample per data-parallel rank
    even: np.ndarray  # a fixed global batch divides evenly over the ranks (True under fixed-per-gpu)
    fits: np.ndarray  # the footprint per GPU fits in GPU memory (True where the memory is unknown)
    memory_bytes: np.ndarray  # footprint per GPU (the least among candidate layouts under auto)
    capacity: float | None  # GPU memory, bytes
    ranks: np.ndarray  # data-parallel ranks
    global_batch: np.ndarray
    model_parallel: int
    split_rule: str  # what the layout's degrees ask of a count (advisor.topology.layouts.split_rule)

    @property
    def ok(self) -> np.ndarray:
        return self.splits & self.whole & self.even & self.fits

    def first_cause(self, cause: str) -> np.ndarray:
        """The counts whose first reason not to run (`cause`'s order) is `cause`: one reason per count."""
        before = np.ones(self.gpus.shape, dtype=bool)
        for name, ok in ((LAYOUT, self.splits), (RANKS, self.whole), (UNEVEN, self.even), (MEMORY, self.fits)):
            if name == cause:
                return before & ~ok
            before = before & ok
        raise ValueError(cause)

    def cause(self, i: int) -> str | None:
        """The first reason count `i` cannot run (LAYOUT, RANKS, UNEVEN, MEMORY), None when it runs."""
        for name, ok in ((LAYOUT, self.splits), (RANKS, self.whole), (UNEVEN, self.even), (MEMORY, self.fits)):
            if not ok[i]:
                return name
        return None

    def reason(self, i: int) -> str | None:
        """Why count `i` cannot run, in one clause with its numbers; None when it runs."""
        cause, g = self.cause(i), int(self.gpus[i])
        if cause == LAYOUT:
            return f"the layout cannot split {plural(g, 'GPU')} ({self.split_rule})"
        batch, ranks = float(self.global_batch[i]), int(self.ranks[i])
        if cause == RANKS:
            return f"under one sample per data-parallel rank ({count(batch)} samples over {count(ranks)} ranks)"
        if cause == UNEVEN:
            return (f"the fixed global batch of {count(batch)} samples does not divide over {count(ranks)} "
                    f"data-parallel ranks ({number(batch / ranks)} each)")
        if cause == MEMORY:
            used, capacity = above(float(self.memory_bytes[i]), self.capacity)
            return f"the footprint per GPU, {used}, exceeds the {capacity} of GPU memory"
        return None


def of(w: "Workload", gpus, nodes=None, peaks: Sequence = ()) -> Runnable:
    """Whether each of `gpus` (over `nodes`, default the fewest) can run `w`'s layout and batch."""
    from advisor.batch import global_batch
    from advisor.topology.layouts import build, split_rule
    from advisor.topology.memory import gpu_memory_bytes

    g = np.atleast_1d(np.asarray(gpus, dtype=np.int64))
    mp = w.model_parallel_size()
    capacity = gpu_memory_bytes(w)
    if w.parallelism.strategy == "auto":
        splits, memory = _auto(w, g, nodes, peaks)
    else:
        layout = build(w, g, nodes)
        splits, memory = layout.valid, np.asarray(layout.memory_bytes(w, peaks), dtype=float)
    ranks = np.maximum(g // mp, 1)
    batch = np.asarray(global_batch(w, g), dtype=float)
    fixed = w.batch.policy == "fixed-global"
    whole = batch / ranks >= 1 if fixed else _per_rank(w, g) >= 1
    even = (batch % ranks == 0) if fixed else np.ones(g.shape, dtype=bool)
    fits = np.ones(g.shape, dtype=bool) if capacity is None else memory <= capacity
    return Runnable(g, splits, whole, even, fits, memory, capacity, ranks, batch, mp, split_rule(w))


def _per_rank(w: "Workload", g: np.ndarray) -> np.ndarray:
    from advisor.batch import per_gpu_batch

    return np.asarray(per_gpu_batch(w, g), dtype=float)


def _auto(w: "Workload", g: np.ndarray, nodes, peaks) -> tuple[np.ndarray, np.ndarray]:
    """Under strategy auto: (some candidate layout splits the count, the least footprint among the
    candidates that split it, else among all)."""
    from advisor.topology.layouts import candidate_workload, candidates

    layouts = candidates(w, g, nodes)
    valid = np.stack([lay.valid for lay in layouts])
    memory = np.stack([lay.memory_bytes(candidate_workload(w, lay), peaks, measured=w) for lay in layouts])
    least = np.where(valid, memory, np.inf).min(axis=0)
    return valid.any(axis=0), np.where(np.isfinite(least), least, memory.min(axis=0))


def runs(w: "Workload", peaks: Sequence = ()):
    """`gpus -> bool array`: which counts run `w` (over the fewest nodes); for a plotted curve."""
    return lambda gpus: of(w, gpus, None, peaks).ok


def baseline(w: "Workload", model, peaks: Sequence = ()) -> tuple[int, int]:
    """(GPUs, nodes) of the speedup baseline: the model's baseline count when it runs, else the
    smallest count of the sweep that runs (the model's when none does)."""
    from advisor.planning.billing import gpu_counts

    gpus = int(model.baseline_gpus or min(w.calibration.gpus))
    own = (gpus, int(model.baseline_nodes or w.nodes(gpus)))  # a stand-in model may name no nodes
    if of(w, [own[0]], [own[1]], peaks).ok[0]:
        return own
    counts = gpu_counts(w.cluster.gpus_per_node, w.cluster.max_gpus)
    run = of(w, counts, None, peaks)
    # none runs (a layout whose footprint no count holds): the smallest count the layout splits, so
    # the table can still say why each count cannot run rather than refuse a count it never asked for
    pick = run.ok if run.ok.any() else run.splits
    if not pick.any():
        return own
    first = int(counts[pick][0])
    return first, int(w.nodes(first))


def rebase(model, prediction, base: tuple[int, int], peaks: Sequence = ()):
    """`prediction` (advisor.planning.layout_choice.predict's) with speedup and efficiency against `base`, the
    (GPUs, nodes) of `baseline`: speedup = throughput / the baseline's, efficiency = speedup x base / N."""
    from dataclasses import replace

    from advisor.planning.layout_choice import predict

    at_base = predict(model, [base[0]], [base[1]], peaks)[0]
    speedup = prediction.throughput / float(at_base.throughput[0])
    return replace(prediction, speedup=speedup, efficiency=speedup * base[0] / prediction.gpus)
