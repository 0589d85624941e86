"""The batch a plan trains with at N GPUs: global batch, per-GPU batch, micro-batch, and which counts
can run the spec's recipe at all.

- fixed-global (strong scaling): the global batch B is the recipe. A count N that does not divide B
  would give some GPUs one more sample than others (every step waits for them) or change B; neither
  is the declared job, so such counts are left out (`divides`), and so are counts with N > B.
- fixed-per-gpu (weak scaling): B(N) = per_gpu · N. With `batch.max_global_samples` M, once
  per_gpu · N > M the per-GPU batch shrinks to floor(M / N) (strong scaling from there on), so the
  global batch N · floor(M / N) never exceeds M and always divides evenly; a count with
  floor(M / N) = 0 has under one sample per GPU and is left out.
- micro-batch: `batch.micro_samples` where the per-GPU batch holds it, else the whole per-GPU batch
  (no accumulation): what one forward/backward holds in activation memory (advisor.topology.memory).

Everything broadcasts over numpy arrays of GPU counts. Under tensor, pipeline or context parallelism
"per GPU" means per data-parallel rank (N / (tp·pp·cp) ranks, torchtitan's local batch): the GPUs
of one model-parallel group share their samples, and N must be a multiple of tp·pp·cp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from advisor.spec import Workload


def per_gpu_batch(w: "Workload", gpus) -> "np.ndarray":
    """Samples per optimizer step on one GPU (float; fractional under fixed-global when N does not divide B)."""
    import numpy as np

    ranks = np.asarray(gpus, dtype=float) / w.model_parallel_size()
    b = w.batch
    if b.policy == "fixed-global":
        return b.global_samples / ranks
    share = np.full(ranks.shape, float(b.per_gpu_samples))
    if b.max_global_samples is not None:
        share = np.minimum(share, np.floor(b.max_global_samples / ranks))
    return share


def global_batch(w: "Workload", gpus) -> "np.ndarray":
    """Samples per optimizer step across all GPUs at each count (float array)."""
    import numpy as np

    gpus = np.asarray(gpus, dtype=float)
    if w.batch.policy == "fixed-global":
        return np.full(gpus.shape, float(w.batch.global_samples))
    return per_gpu_batch(w, gpus) * gpus / w.model_parallel_size()


def divides(w: "Workload", gpus) -> "np.ndarray":
    """At least one whole sample per GPU and, under fixed-global, N divides the global batch."""
    import numpy as np

    gpus = np.asarray(gpus, dtype=np.int64)
    mp = w.model_parallel_size()
    whole = gpus % mp == 0
    ranks = np.maximum(gpus // mp, 1)
    if w.batch.policy == "fixed-global":
        return whole & (ranks <= w.batch.global_samples) & (w.batch.global_samples % ranks == 0)
    return whole & (per_gpu_batch(w, gpus) >= 1)


def micro_batch(w: "Workload", gpus) -> "np.ndarray":
    """Samples in one micro-batch on one GPU (at least 1; the last micro-batch may be smaller)."""
    import numpy as np

    share = np.maximum(np.ceil(per_gpu_batch(w, gpus)), 1.0)
    if w.batch.micro_samples is None:
        return share
    return np.minimum(share, float(w.batch.micro_samples))
