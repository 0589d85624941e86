"""The calibration worker's Rank run in-process under torch's elastic launcher, with counters on it:
the dtype the first Linear computes in, parameters with a gradient at the optimizer step, gradient elements
reduced across ranks, forward calls of the first block, unsharded gradients left behind. What the
real worker does, counted instead of timed (timings depend on the machine's load; counts do not).
"""

from __future__ import annotations

import argparse
import os
import uuid

import torch
from torch import nn


def first_linear(model: nn.Module) -> nn.Module:
    return next(m for m in model.modules() if isinstance(m, nn.Linear))


class Counters:
    """Hooks and wrappers counting what one step does on this rank."""

    def __init__(self, rank):
        self.rank = rank
        self.dtypes: list[str] = []
        self.with_grad: list[int] = []
        self.forwards = 0
        self.reduced = 0  # gradient elements sent through reduce_scatter / all_reduce
        first_linear(rank.modules[0]).register_forward_hook(self._dtype)
        block = getattr(rank.modules[0], "module", rank.modules[0]).blocks[0]  # DDP wraps it in .module
        # the block inside a checkpoint wrapper runs again in the backward when it is recomputed
        getattr(block, "_checkpoint_wrapped_module", block).register_forward_pre_hook(self._forward)
        rank.optimizer.register_step_pre_hook(self._grads)
        self._originals: dict = {}
        self._wrap_collectives()

    def _dtype(self, module, args, output):
        # the output's dtype is the one the matmul ran in: under autocast the input is still fp32
        # and the cast happens inside the op; under FSDP2's policy the parameters are cast before
        self.dtypes.append(str(output.dtype).removeprefix("torch."))

    def _forward(self, module, args):
        self.forwards += 1

    def _grads(self, optimizer, args, kwargs):
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self.with_grad.append(sum(p.grad is not None for p in params))

    def _wrap_collectives(self):
        import torch.distributed as dist

        for name in ("reduce_scatter_single", "reduce_scatter_tensor", "all_reduce"):
            original = getattr(dist, name, None)
            if original is None:
                continue

            def counted(*args, _original=original, _name=name, **kwargs):
                tensor = kwargs.get("input", args[1] if _name != "all_reduce" and len(args) > 1 else
                                    (args[0] if args else kwargs.get("tensor")))
                group = kwargs.get("group")
                alone = group is not None and dist.get_world_size(group) == 1  # moves nothing
                if self.counting and not alone and tensor is not None and tensor.is_floating_point():
                    self.reduced += tensor.numel()
                return _original(*args, **kwargs)

            self._originals[name] = original
            setattr(dist, name, counted)
        self.counting = False

    def restore(self):
        import torch.distributed as dist

        for name, original in self._originals.items():
            setattr(dist, name, original)

    def step(self, sync: bool) -> dict:
        """One step of the worker's own kind, counted; returns this step's counts."""
        from advisor.calibrate.parallelize import leftover_gradients

        self.dtypes.clear()
        self.with_grad.clear()
        self.forwards, self.reduced, self.counting = 0, 0, True
        self.rank.step(sync)
        self.counting = False
        return {"dtypes": sorted(set(self.dtypes)), "with_grad": list(self.with_grad), "forwards": self.forwards,
                "reduced": self.reduced, "leftover": leftover_gradients(self.rank.modules),
                "params": sum(1 for m in self.rank.modules for _ in m.parameters())}


def _one_case(workload: str, precision: str, local_world: int, device: str = "cpu") -> dict:
    from advisor.calibrate.worker import Rank

    os.environ["LOCAL_WORLD_SIZE"] = str(local_world)  # ranks per node: what the layout reads
    args = argparse.Namespace(workload=workload, results="/nonexistent", device=device, steps=1, warmup=0,
                              precision=precision, collective_timeout=120.0)
    rank = Rank(args)
    rank.build()
    counters = Counters(rank)
    out = {"full": counters.step(True), "compute": counters.step(False), "after": counters.step(True),
           "layout": rank.lay.label(), "checkpointed": rank.checkpointed}
    counters.restore()
    return out


def _rank_main(cases: list[tuple[str, str, int]]) -> list[dict]:
    """Every case on this rank in one process group (one torch import and rendezvous for all)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    import torch.distributed as dist

    import advisor.calibrate.rendezvous as rendezvous

    dist.init_process_group("gloo")
    rendezvous.init_process_group = lambda *args, **kwargs: None  # the Rank joins the group above
    try:
        return [_one_case(*case) for case in cases]
    finally:
        dist.destroy_process_group()


def run_ranks(cases, ranks: int) -> dict[int, list[dict]]:
    """{rank: [counts per case]} of one full, one compute-only and one more full step of each case
    (workload path, precision, ranks per node) at `ranks` gloo ranks."""
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=ranks, run_id=uuid.uuid4().hex,
                          rdzv_backend="c10d", rdzv_endpoint="127.0.0.1:0", max_restarts=0,
                          monitor_interval=0.1, start_method="spawn")
    return elastic_launch(config, _rank_main)([(str(w), p, n) for w, p, n in cases])


def fake_world_case(workload, world: int, precision: str = "auto", device: str = "cpu") -> dict:
    """One case as rank 0 of `world` ranks on torch's fake backend (torch.testing._internal.distributed
    .fake_pg: every collective returns at once, nothing moves): what one process can check of a
    multi-rank layout (its meshes, sharding, dtypes, gradient counts), not its timing."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import advisor.calibrate.rendezvous as rendezvous

    os.environ.update({"RANK": "0", "WORLD_SIZE": str(world), "LOCAL_RANK": "0"})
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    original, rendezvous.init_process_group = rendezvous.init_process_group, lambda *a, **k: None
    try:
        return _one_case(str(workload), precision, world, device)
    finally:
        rendezvous.init_process_group = original
        dist.destroy_process_group()


def single_case(workload, precision: str = "auto", device: str = "cpu") -> dict:
    """One case at world 1 in this process (nccl on CUDA, gloo on CPU): the device check's precision
    and gradient assertions on a real GPU (scripts/device_check.sh)."""
    import socket

    import torch.distributed as dist

    import advisor.calibrate.rendezvous as rendezvous

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port)})
    cuda = device == "cuda"
    if cuda:
        torch.cuda.set_device(0)
    dist.init_process_group("nccl" if cuda else "gloo", device_id=torch.device("cuda", 0) if cuda else None)
    original, rendezvous.init_process_group = rendezvous.init_process_group, lambda *a, **k: None
    try:
        return _one_case(str(workload), precision, 1, device)
    finally:
        rendezvous.init_process_group = original
        dist.destroy_process_group()
