"""The small-batch penalty: kernels run less efficiently on small micro-batches. Defined once here,
for the fit (the `small_batch` column of advisor.scaling.families) and for any prior MFU model.

A training step is dominated by weight GEMMs: an (M x K) activation times a (K x N) weight, M = the
tokens of one micro-batch on one GPU. The GEMM does 2·M·K·N FLOPs and must at least read the 2·K·N
bytes of bf16 weights, so its arithmetic intensity is about M FLOP per byte when M << K, N
(NVIDIA, "Matrix Multiplication Background User's Guide", Deep Learning Performance docs: a GEMM is
memory-bound below the GPU's ops:byte ratio, peak FLOP/s over memory bandwidth). With the time of
the bytes added to the time of the FLOPs (the roofline without overlap, an upper bound on the loss):

    time / time at peak = 1 + R / M,    efficiency(M) = M / (M + R),

R = ops:byte ratio x (weight bytes / 2). R is ~150-300 FLOP/byte for bf16 on data-centre GPUs
(A100 40 GB 312 TFLOP/s / 1.56 TB/s = 200; H100 SXM 989 / 3.35 = 295; H200 989 / 4.8 = 206: the
vendors' datasheets), DEFAULT_OPS_PER_BYTE below. A micro-batch of 2 x 8192 tokens loses 1%, one of
512 tokens 28% at most. Real kernels overlap part of the memory traffic, so the fit scales the
penalty by a fitted factor in [0, ...) with a prior at half of it (docs/model.md).

Functions (numpy arrays in, arrays out):
- `small_batch_penalty(tokens, ops_per_byte)`: R / M, the extra compute time per unit of time at peak;
- `small_batch_efficiency(tokens, ops_per_byte)`: 1 / (1 + R / M), the factor on achieved MFU;
- `tokens_per_micro_batch(workload, gpus, global_batch)`: M of the workload at each placement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from advisor.spec import Workload

#: Peak bf16 FLOP/s over HBM bandwidth of the A100 40 GB and H200 (datasheets: 312 TFLOP/s / 1.555
#: TB/s, 989 TFLOP/s / 4.8 TB/s), the middle of the data-centre GPUs' 150-300 FLOP/byte.
DEFAULT_OPS_PER_BYTE = 200.0


def small_batch_penalty(tokens, ops_per_byte: float = DEFAULT_OPS_PER_BYTE) -> np.ndarray:
    """R / M: compute time lost to reading the weights, per unit of compute time at peak (module
    docstring). 0 where `tokens` is not positive (no token count known: no penalty)."""
    t = np.asarray(tokens, float)
    return np.where(t > 0, float(ops_per_byte) / np.where(t > 0, t, 1.0), 0.0)


def small_batch_efficiency(tokens, ops_per_byte: float = DEFAULT_OPS_PER_BYTE) -> np.ndarray:
    """M / (M + R): the share of the large-batch MFU a micro-batch of `tokens` tokens reaches."""
    return 1.0 / (1.0 + small_batch_penalty(tokens, ops_per_byte))


def tokens_per_micro_batch(workload: "Workload", gpus, global_batch) -> np.ndarray:
    """Tokens of one micro-batch on one data-parallel rank: min(samples per rank, micro_samples) x
    the tokens a sample computes (`computed_seq_len`: its GEMMs' rows); 0 for a model without a
    sequence length (a CNN's GEMM rows are batch x pixels, many more than its samples: no penalty is
    modelled there)."""
    seq = workload.model.computed_seq_len
    g = np.asarray(gpus, float)
    if not seq:
        return np.zeros_like(g)
    dp = np.maximum(g / max(workload.model_parallel_size(), 1), 1.0)
    share = np.maximum(np.asarray(global_batch, float) / dp, 1.0)
    micro = workload.batch.micro_samples
    return (np.minimum(share, float(micro)) if micro else share) * float(seq)
