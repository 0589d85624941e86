"""How the worker applies a layout to the proxy (imports torch: only the worker imports this module).

The order is torchtitan's (`torchtitan/models/llama3/infra/parallelize.py`, `parallelize_llama`):
tensor parallelism, then activation checkpointing (`apply_ac`), then FSDP2 (`apply_fsdp`), on a
model built on the `meta` device and materialised only after sharding (torchtitan's
`train.py`: `model.to_empty(device=...)` then `init_weights`), so no rank ever holds the whole
model unsharded.

Precision has one path at every count: every layout but plain DDP goes through FSDP2's
`MixedPrecisionPolicy`, on the layout's data-parallel mesh, or on its size-1 `dp_shard` dimension
when the layout has no data parallelism (FSDP/HSDP at N=1, TP-only, PP-only, TP x PP), so a
bf16 spec computes in bf16 at N=1 as at N=64. Plain DDP uses autocast (torchtitan's
`maybe_enable_amp`, `torchtitan/distributed/utils.py`) with gradients communicated in the compute
dtype (`bf16_compress_hook`).

`local_gradient_reduction` is the compute-only step: the same FSDP2 work with the gradient
communication replaced by its local part (see its docstring).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule

#: Activation-checkpointing modes of spec.ParallelismSpec.activation_checkpoint.
AC_MODES = ("none", "selective", "full")

#: Ops whose outputs selective checkpointing keeps instead of recomputing (torchtitan's
#: `_op_sac_save_list`, `torchtitan/distributed/activation_checkpoint.py`), less every second matrix
#: multiply, which is recomputed (torchtitan's policy); `addmm` is nn.Linear with a bias.
SAC_SAVE = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
            torch.ops.aten._scaled_dot_product_efficient_attention.default,
            torch.ops.aten._scaled_dot_product_flash_attention.default,
            torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
            torch.ops.aten._scaled_dot_product_cudnn_attention.default}
MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}


def _selective_context():
    """torchtitan's op-level selective policy: save SAC_SAVE outputs, recompute every other matmul."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    counts: dict[str, int] = defaultdict(int)

    def policy(ctx, op, *args, **kwargs):
        key = "recompute" if ctx.is_recompute else "forward"
        if op in MATMULS:
            counts[key] += 1
        keep = op in SAC_SAVE and not (op in MATMULS and counts[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def apply_ac(model: nn.Module, mode: str) -> int:
    """Wrap the proxy's blocks for activation checkpointing, as torchtitan's `apply_ac`: `full`
    recomputes every block in the backward, `selective` keeps the outputs of the ops in SAC_SAVE
    (every other matmul recomputed); `none` leaves the model alone. Returns the blocks wrapped.
    Wrappers from torch.distributed.algorithms._checkpoint.checkpoint_wrapper (non-reentrant
    torch.utils.checkpoint)."""
    if mode not in AC_MODES:
        raise ValueError(f"parallelism.activation_checkpoint: {mode!r} is not one of {', '.join(AC_MODES)}")
    if mode == "none":
        return 0
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    extra = {"context_fn": _selective_context} if mode == "selective" else {}
    for i, block in enumerate(model.blocks):
        model.blocks[i] = checkpoint_wrapper(block, preserve_rng_state=False, **extra)
    return len(model.blocks)


def shard(model: nn.Module, mesh, dtype: torch.dtype) -> nn.Module:
    """FSDP2 (`fully_shard`) per block and at the root on `mesh` (size 1 when the layout has no data
    parallelism: then it only applies the MixedPrecisionPolicy), parameters and gradient reduction
    in `dtype` when it is lower than fp32 (torchtitan's `apply_fsdp`: param_dtype, reduce_dtype)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    low = dtype != torch.float32
    policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=dtype) if low else MixedPrecisionPolicy()
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


@torch.no_grad()
def materialise(model: nn.Module, device: torch.device) -> nn.Module:
    """Allocate a `meta`-built (and sharded) model on `device` and initialise every parameter
    (each module's own `reset_parameters`; on DTensors each rank initialises its shard)."""
    model.to_empty(device=device)
    for module in model.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    return model


class LocalReduceScatter:
    """An FSDP2 reduce-scatter that communicates nothing: each rank keeps its own slice of its own
    gradient (the shape and dtype the real one produces, FSDP2's `ReduceScatter` interface in
    torch/distributed/fsdp/_fully_shard/_fsdp_api.py)."""

    def allocate(self, size, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(self, output_tensor, input_tensor, group, op, async_op: bool = False):
        output_tensor.copy_(input_tensor.view(group.size(), -1)[group.rank()])
        return None


def fsdp_param_groups(modules: list[nn.Module]) -> list:
    """Every FSDP2 parameter group of `modules` (FSDPModule._get_fsdp_state, torch's own accessor)."""
    groups = []
    for root in modules:
        for module in root.modules():
            if isinstance(module, FSDPModule):
                groups.extend(module._get_fsdp_state()._fsdp_param_groups)
    return groups


@contextlib.contextmanager
def local_gradient_reduction(modules: list[nn.Module], solo_group) -> Iterator[None]:
    """Inside: FSDP2 does all its gradient work (copy-in, divide, dtype casts, the sharded gradients
    the optimizer steps on) but moves no gradient between ranks: the reduce-scatter is
    LocalReduceScatter, and HSDP's replicate all-reduce runs on `solo_group` (this rank alone).
    A step inside is the compute part of the same step outside, optimizer included, and leaves no
    unsharded gradient behind, unlike `set_requires_gradient_sync(False)` (which keeps the
    unsharded gradient for accumulation, torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
    `post_backward`) and which the pipeline schedule would undo anyway (`perform_reduce_grad` in
    torch/distributed/pipelining/stage.py sets it back to True before reducing)."""
    groups = fsdp_param_groups(modules)
    saved = [(g, g._reduce_scatter_comm, getattr(g.mesh_info, "replicate_process_group", None)) for g in groups]
    local = LocalReduceScatter()
    try:
        for group, _, replicate in saved:
            group._reduce_scatter_comm = local
            if replicate is not None:
                group.mesh_info.replicate_process_group = solo_group
        yield
    finally:
        for group, comm, replicate in saved:
            group._reduce_scatter_comm = comm
            if replicate is not None:
                group.mesh_info.replicate_process_group = replicate


def _holds_unsharded_gradient(param) -> bool:
    if getattr(param, "unsharded_accumulated_grad", None) is not None:
        return True
    return hasattr(param, "_unsharded_param") and param._unsharded_param.grad is not None


def leftover_gradients(modules: list[nn.Module]) -> int:
    """Unsharded gradients FSDP2 still holds (accumulated, not yet reduced): 0 after a whole step."""
    return sum(_holds_unsharded_gradient(p) for g in fsdp_param_groups(modules) for p in g.fsdp_params)
