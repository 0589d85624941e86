"""The host's share of a step: every kernel of it is launched (on CPU ranks, dispatched) by the host.

A training step launches its kernels one by one from the host, and each launch costs the host a
few microseconds whatever the kernel does; launches are asynchronous, so the GPU's work and the
host's launches overlap and the step is at least the longer of the two (docs/model.md, "Limits"):

    T >= H = K · t_launch,   K = m · (L / p) · (k_fwd + k_bwd + k_redo) + k_opt + collective calls

K the kernels one GPU launches per step (`kernels_per_step`, counted from the layout: m
micro-batches through the L/p layers of its pipeline stage, forward and backward and what
activation recomputation repeats, the optimizer's, and one launch per collective call of the
layout's traffic, `Layout.traffic`), t_launch the host's time per launch (`LAUNCH_SECONDS`,
`CPU_DISPATCH_SECONDS`). A real model's step is far above H (llm7b: tens of milliseconds of launches
in a step of seconds); a toy model's GPU work is nanoseconds, and H is its step.

`host_seconds` is H's (median, low, high); `bound` lifts a device step's (median, low, high) to it.
The host and the device are two lower bounds on one step: its median is the larger median, its
band's ends the larger ends. The counts are lower bounds (eager PyTorch launches more: bias adds,
dropout, reshapes, a softmax outside a fused kernel); a CUDA-graphed step (Megatron's full-iteration
graph, torch.compile's reduce-overhead) pays one host launch per graph and is not what this prices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from advisor.topology.layouts import build_at

if TYPE_CHECKING:
    from advisor.spec import Workload

#: Kernels one transformer layer launches in the forward of one micro-batch, the fewest an eager
#: step runs: 2 norms, the 4 weight GEMMs (QKV, attention output, the MLP's two: Megatron-LM,
#: Shoeybi et al. 2019 §3, Fig. 2), the attention core as one fused kernel (FlashAttention, SDPA),
#: the activation and the 2 residual adds. A model without a layer count counts one layer.
FORWARD_KERNELS_PER_LAYER = 10
#: Its backward: each weight GEMM's two (input and weight gradients, the backward's 2x FLOPs: PaLM,
#: Chowdhery et al. 2022, App. B), one each for the attention core, the 2 norms and the activation,
#: and the 2 gradient sums where the residual branches join: 8 + 4 + 2.
BACKWARD_KERNELS_PER_LAYER = 14
#: The optimizer step's fewest: one, a fused multi-tensor AdamW (torch.optim.AdamW(fused=True),
#: Apex FusedAdam); the default foreach implementation launches one per elementwise op and tensor chunk.
OPTIMIZER_KERNELS = 1
#: Host time per CUDA kernel launch, (low, high) seconds: "Usually, the launch time on the CPU side is
#: between 5-20 microseconds" (Meta's Holistic Trace Analysis docs, "CUDA Kernel Launch Statistics":
#: the cudaLaunchKernel runtime event of PyTorch training traces, PyTorch's own dispatch not counted).
LAUNCH_SECONDS = (5e-6, 20e-6)
#: Host time per eager op on CPU ranks (gloo: the op runs on the host, no launch), (low, high)
#: seconds: pytorch/pytorch issue #41383, a one-element `2*x` at ~7 us with requires_grad (5 us
#: without); ngimel there: `x*x` without grad ~2 us, about half of it Python. There the op runs on the
#: host after its dispatch, so the two add: the larger of them (`bound`) is still a lower bound.
CPU_DISPATCH_SECONDS = (2e-6, 7e-6)


def kernels_per_step(workload: "Workload", gpus, nodes=None) -> np.ndarray:
    """K: kernels one GPU launches per optimizer step at each (GPU, node) count (module docstring)."""
    m, p = workload.model, workload.parallelism
    lay = build_at(workload, gpus, nodes)
    micro, _ = lay.micro_batches(workload)
    redo = {"full": FORWARD_KERNELS_PER_LAYER, "selective": 1}.get(p.activation_checkpoint, 0)
    per_layer = FORWARD_KERNELS_PER_LAYER + BACKWARD_KERNELS_PER_LAYER + redo
    layers = (m.layers or 1) / lay.pp
    collectives = sum((np.where(t.group > 1, t.latency_calls, 0.0) for t in lay.traffic(workload)),
                      np.zeros(lay.gpus.shape))
    return micro * layers * per_layer + OPTIMIZER_KERNELS + collectives


def launch_seconds(workload: "Workload") -> tuple[float, float]:
    """(low, high) host seconds per kernel: a CPU rank's eager op dispatch (`cluster.gpu` names a CPU,
    as "cpu-gloo" does) or a CUDA launch."""
    return CPU_DISPATCH_SECONDS if workload.cluster.gpu.strip().lower().startswith("cpu") else LAUNCH_SECONDS


def host_seconds(workload: "Workload", gpus, nodes=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """H's (median, low, high) seconds per step: K x the launch time's geometric middle and its ends."""
    k = kernels_per_step(workload, gpus, nodes)
    lo, hi = launch_seconds(workload)
    return k * np.sqrt(lo * hi), k * lo, k * hi


def bound(workload: "Workload", gpus, nodes, median, low, high) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A device step's (median, low, high) at least the host's launches': each the larger of the two."""
    h_med, h_low, h_high = host_seconds(workload, gpus, nodes)
    median = np.maximum(median, h_med)
    return median, np.maximum(low, h_low), np.maximum(np.maximum(high, h_high), median)

