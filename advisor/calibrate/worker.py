"""One calibration rank: `python -m advisor.calibrate.worker --workload W.toml --results DIR ...`.

Runs under the local launcher (advisor.calibrate.launcher) or under torchrun on each node
(advisor.calibrate.emit); it reads its place from the standard torch.distributed variables
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (env:// rendezvous;
torchrun sets them). Gloo picks its network interface from GLOO_SOCKET_IFNAME when set (read by
torch itself; this module never overrides it), NCCL from NCCL_SOCKET_IFNAME.

What one rank does:
1. Builds the proxy (advisor.calibrate.proxy) of the declared model with `proxy_layers` layers,
   wrapped in DDP or FSDP2 (`fully_shard` per block and at the root, on an explicit
   `init_device_mesh`, never the default mesh: pytorch#132471). On CUDA it trains in the declared
   precision (bf16/fp16 autocast with gradients communicated in that dtype: DDP compress hook,
   FSDP2 MixedPrecisionPolicy); on CPU in fp32 (CPU bf16 kernels are slow and would measure the
   kernels, not the scaling); the file's environment says which.
2. `warmup` untimed optimizer steps, then `steps` timed ones: forward + backward over the
   micro-batches of plan.batch_plan (gradient sync on the last micro-batch only), optimizer step.
   Every step starts after a barrier, and the clock is read after a device synchronise.
3. After each timed step, one more with gradient synchronisation switched off (DDP `no_sync`,
   FSDP2 `set_requires_gradient_sync(False)`): the compute part, so exposed communication is
   measured as step - compute. The two kinds alternate so that load drifting on a shared machine
   biases neither. FSDP2 still all-gathers parameters in those steps; only the gradient
   reduce-scatter is dropped.
4. For world > 1: collective probes (plan.probe_sizes) for all_reduce, reduce_scatter and
   all_gather; busbw by the nccl-tests definitions (doc/PERFORMANCE.md in NVIDIA/nccl-tests).
Per-step times are the maximum over ranks (the slowest rank sets the pace). Rank 0 writes
`DIR/result.json`; every rank writes `DIR/rank<R>.json` (host, peak memory), and on failure
`DIR/rank<R>.error` (one line: exception type and message) before exiting with status 1.
Progress lines `@progress <phase> <i>/<n>` go to stdout for the launcher.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import traceback
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path

#: Untimed and timed repeats of each collective probe (nccl-tests defaults are 5 warm-up and 20
#: timed iterations; fewer on CPU, where one 64 MiB gloo all-reduce takes ~0.1 s).
PROBE_REPEATS = {"cpu": (1, 5), "cuda": (5, 20)}

def _write_json(path: Path, data: dict) -> None:
    from advisor.fileio import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=1))


def _progress(phase: str, i: int, n: int) -> None:
    print(f"@progress {phase} {i}/{n}", flush=True)


def _die_with_parent() -> None:
    """Under the local launcher: exit if the launcher dies (no orphans even after SIGKILL)."""
    parent = os.environ.get("ADVISOR_PARENT_PID")
    if not parent or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):  # the launcher died before prctl took effect
        os._exit(1)


class Rank:
    def __init__(self, args: argparse.Namespace):
        import torch
        import torch.distributed as dist

        from advisor.calibrate.plan import batch_plan, probe_sizes, proxy_shape
        from advisor.spec import load_workload

        self.torch, self.dist, self.args = torch, dist, args
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(self.world)))
        self.cuda = args.device == "cuda"
        if self.cuda:
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        from advisor.calibrate.rendezvous import init_process_group

        init_process_group("nccl" if self.cuda else "gloo", timedelta(seconds=args.collective_timeout))
        self.workload = load_workload(args.workload)
        self.plan = batch_plan(self.workload, self.world)
        self.shape = proxy_shape(self.workload)
        declared = self.workload.model.precision
        self.precision = declared if self.cuda else "fp32"
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[self.precision]
        gradient_bytes = self.workload.model.gradient_bytes
        self.probe_sizes = probe_sizes(gradient_bytes, args.device, self.world) if self.world > 1 else []

    # -- helpers -------------------------------------------------------------------------------
    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        if self.cuda:
            self.dist.barrier(device_ids=[self.local_rank])
        else:
            self.dist.barrier()

    def max_over_ranks(self, values: list[float]) -> list[float]:
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.tolist()

    # -- model ---------------------------------------------------------------------------------
    def layout(self):
        """The spec's layout at this world size (advisor.topology.layouts), refused when the degrees do not fit it."""
        from advisor.topology.layouts import build as build_layout

        nodes = max(1, self.world // self.local_world)
        lay = build_layout(self.workload, [self.world], [nodes])
        if not lay.valid[0]:
            raise ValueError(f"layout {lay.label()} does not multiply to {self.world} ranks")
        if lay.cp[0] > 1:  # torch's context_parallel shards SDPA's ring attention on CUDA only
            raise ValueError("context parallelism is not calibrated here: set parallelism.context_parallel_degree = 1 "
                             "for the calibration (its K/V ring is modelled from the layout's volumes)")
        return lay

    def build_mesh(self):
        """torchtitan's mesh, outermost first: (pp, dp_replicate, dp_shard, tp), tp innermost so that
        the tensor-parallel ranks of a group are neighbours (one node) and pipeline stages are the
        farthest apart. Returns (data-parallel mesh or None, tensor-parallel mesh or None)."""
        from torch.distributed.device_mesh import init_device_mesh

        lay = self.lay
        pp, rep, shard, tp = (int(a[0]) for a in (lay.pp, lay.dp_replicate, lay.dp_shard, lay.tp))
        names = ("pp", "dp_replicate", "dp_shard", "tp")
        self.mesh = init_device_mesh(self.device.type, (pp, rep, shard, tp), mesh_dim_names=names)
        dp = None
        if rep > 1:  # 2-D (replicate, shard): FSDP2's HSDP (a shard of 1: plain replication)
            dp = self.mesh["dp_replicate", "dp_shard"]
        elif shard > 1:
            dp = self.mesh["dp_shard"]
        return dp, (self.mesh["tp"] if tp > 1 else None)

    def build(self) -> None:
        torch = self.torch
        from advisor.calibrate.proxy import build_proxy, sample_inputs

        torch.manual_seed(0)
        self.lay = self.layout()
        self.strategy = self.lay.name
        self.mesh = None
        self.schedule = None
        plain_ddp = self.strategy == "ddp" and self.lay.tp[0] == 1 and self.lay.pp[0] == 1
        self.mesh_parts = (None, None) if plain_ddp else self.build_mesh()
        if self.lay.pp[0] > 1:
            modules = self.build_pipeline()
        else:
            model = build_proxy(self.shape).to(self.device)
            self.params = sum(p.numel() for p in model.parameters())
            modules = [self.wrap(model)]
        self.modules = modules
        self.model = modules[0]
        self.optimizer = torch.optim.AdamW([p for m in modules for p in m.parameters()], lr=1e-4)
        self.inputs = [sample_inputs(self.shape, m, self.device, self.dtype) for m in self.plan.micro_batches]

    def wrap(self, model):
        """DDP (replicas only, no TP), else FSDP2 on the layout's data-parallel mesh after TP."""
        torch = self.torch
        from advisor.calibrate.proxy import tensor_parallel

        low = self.dtype != torch.float32
        self.autocast = nullcontext
        if self.mesh is None:  # plain DDP: replicas only
            from torch.nn.parallel import DistributedDataParallel as DDP

            model = DDP(model, device_ids=[self.local_rank] if self.cuda else None)
            if low:  # communicate gradients in the compute dtype, as the spec's gradient bytes assume
                from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

                bf16 = self.dtype == torch.bfloat16
                hook = default_hooks.bf16_compress_hook if bf16 else default_hooks.fp16_compress_hook
                model.register_comm_hook(None, hook)
            self.autocast = (lambda: torch.autocast(self.device.type, dtype=self.dtype)) if low else nullcontext
            return model
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        dp_mesh, tp_mesh = self.mesh_parts
        if tp_mesh is not None:
            model = tensor_parallel(model, tp_mesh)
        policy = MixedPrecisionPolicy(param_dtype=self.dtype, reduce_dtype=self.dtype) if low \
            else MixedPrecisionPolicy()
        if dp_mesh is not None:
            for block in model.blocks:
                fully_shard(block, mesh=dp_mesh, mp_policy=policy)
            fully_shard(model, mesh=dp_mesh, mp_policy=policy)
        return model

    def build_pipeline(self) -> list:
        """This rank's pipeline stages (torch.distributed.pipelining), each wrapped as `wrap` does,
        and the schedule: 1F1B, or interleaved 1F1B with the layout's model chunks per rank."""
        from torch.distributed.pipelining import (
            PipelineStage,
            Schedule1F1B,
            ScheduleInterleaved1F1B,
        )

        from advisor.calibrate.proxy import pipeline_loss, pipeline_stages

        torch = self.torch
        pp_mesh = self.mesh["pp"]
        pp, v = int(self.lay.pp[0]), self.workload.parallelism.virtual_stages
        built = pipeline_stages(self.shape, pp * v, pp, pp_mesh.get_local_rank())
        local = sum(p.numel() for _, m in built for p in m.parameters())
        # every stage exists on world / pp ranks (its data- and tensor-parallel copies)
        self.params = int(self.sum_over_ranks(local) / (self.world // pp))
        modules, stages = [], []
        for index, module in built:
            module = self.wrap(module.to(self.device))
            modules.append(module)
            stages.append(PipelineStage(module, index, pp * v, self.device, group=pp_mesh.get_group()))
        self.first = any(s.is_first for s in stages)
        self.last = any(s.is_last for s in stages)
        micro = self.workload.parallelism.pipeline_microbatches or len(self.plan.micro_batches)
        if self.plan.per_gpu % micro:
            raise ValueError(f"pipeline: {self.plan.per_gpu} samples per data-parallel rank do not split into "
                             f"{micro} micro-batches")
        if v > 1:
            self.schedule = ScheduleInterleaved1F1B(stages, n_microbatches=micro, loss_fn=pipeline_loss)
        else:
            self.schedule = Schedule1F1B(stages[0], n_microbatches=micro, loss_fn=pipeline_loss)
        tokens = torch.randint(0, self.shape.vocab, (self.plan.per_gpu, self.shape.seq_len + 1), device=self.device)
        self.pipeline_batch = tokens[:, :-1], tokens[:, 1:]
        return modules

    def sum_over_ranks(self, value: float) -> float:
        t = self.torch.tensor([float(value)], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t)
        return float(t.item())

    def set_gradient_sync(self, on: bool) -> None:
        for module in self.modules:
            if hasattr(module, "set_requires_gradient_sync"):  # FSDP2; TP alone has no gradient sync
                module.set_requires_gradient_sync(on)

    def step(self, sync_gradients: bool) -> None:
        if self.schedule is not None:  # the schedule runs every micro-batch of the step
            self.set_gradient_sync(sync_gradients)
            inputs, targets = self.pipeline_batch
            args = (inputs,) if self.first else ()
            kwargs = {"target": targets, "losses": []} if self.last else {}
            self.schedule.step(*args, **kwargs)
        else:
            last = len(self.inputs) - 1
            for i, batch in enumerate(self.inputs):
                sync_now = sync_gradients and i == last
                context = nullcontext()
                if self.strategy == "ddp" and self.mesh is None:
                    context = nullcontext() if sync_now else self.model.no_sync()
                else:
                    self.set_gradient_sync(sync_now)
                with context, self.autocast():
                    loss = self.model(batch)
                (loss / len(self.inputs)).backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def timed_step(self, sync_gradients: bool) -> float:
        self.barrier()  # every rank starts together: the time is the step's, not a straggler's
        self.sync()
        start = time.perf_counter()
        self.step(sync_gradients)
        self.sync()  # a CUDA step is asynchronous until here
        return time.perf_counter() - start

    def timed_steps(self, count: int) -> tuple[list[float], list[float]]:
        """`count` pairs of (full step, compute-only step), interleaved so that load drifting on a
        shared machine hits both alike instead of biasing whichever ran later."""
        full, compute = [], []
        for i in range(count):
            full.append(self.timed_step(True))
            compute.append(self.timed_step(False))
            _progress("step", i + 1, count)
        return full, compute

    # -- collectives ---------------------------------------------------------------------------
    def probe_groups(self) -> list[tuple[object, list[int], str]]:
        """(process group, its ranks, name) to probe: every rank, then each layout mesh dimension
        with 2+ ranks that is smaller than the world (HSDP's shard and replicate groups, TP's group)."""
        groups = [(None, list(range(self.world)), "world")]
        if self.mesh is not None:
            for name in self.mesh.mesh_dim_names:
                sub = self.mesh[name]
                if 1 < sub.size() < self.world:
                    pg = sub.get_group()
                    groups.append((pg, self.dist.get_process_group_ranks(pg), name))
        return groups

    def probe(self) -> list[dict]:
        """Collective probes on each group of probe_groups(): the slowest rank's median (it sets the
        pace), and every rank's own median (`rank_seconds`: what the collective cost each rank)."""
        groups = self.probe_groups()
        out: list[dict] = []
        done, total = 0, 3 * len(self.probe_sizes) * len(groups)
        for group, ranks, name in groups:
            for op in ("all_reduce", "reduce_scatter", "all_gather"):
                for size in self.probe_sizes:
                    out.append(self.probe_one(op, size, group, ranks, name))
                    done += 1
                    _progress("probe", done, total)
        return out

    def probe_one(self, op: str, size: int, group, ranks: list[int], name: str) -> dict:
        from advisor.topology.collectives import bus_bandwidth_gbps

        torch, dist = self.torch, self.dist
        warm, repeats = PROBE_REPEATS[self.args.device]
        n = len(ranks)
        # torch >= 2.10 names them *_single (the *_tensor names are deprecated aliases).
        reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        count = size // 4
        full = torch.ones(count, dtype=torch.float32, device=self.device)
        part = torch.ones(count // n, dtype=torch.float32, device=self.device)
        if op == "all_reduce":
            run = lambda: dist.all_reduce(full, group=group)  # noqa: E731
        elif op == "reduce_scatter":
            run = lambda: reduce_scatter(part, full, group=group)  # noqa: E731
        else:
            run = lambda: all_gather(full, part, group=group)  # noqa: E731
        times = []
        for i in range(warm + repeats):
            self.barrier()  # every group runs at once, as in a step where all groups communicate
            self.sync()
            start = time.perf_counter()
            run()
            self.sync()
            if i >= warm:
                times.append(time.perf_counter() - start)
        seconds = statistics.median(self.max_over_ranks(times))
        mine = [0.0] * self.world
        mine[self.rank] = statistics.median(times)
        per_rank = self.max_over_ranks(mine)  # each slot is written by one rank only
        nodes = len({r // self.local_world for r in ranks})
        return {"op": op, "gpus": n, "nodes": nodes, "bytes": size, "seconds": seconds,
                "busbw": bus_bandwidth_gbps(op, n, size, seconds), "group": name,
                "rank_seconds": [per_rank[r] for r in ranks]}

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> None:
        from advisor.calibrate.environment import describe_rank

        args, torch = self.args, self.torch
        results = Path(args.results)
        self.build()
        for i in range(args.warmup):
            self.step(sync_gradients=True)
            _progress("warmup", i + 1, args.warmup)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        full, compute = self.timed_steps(args.steps)
        step_seconds, compute_seconds = self.max_over_ranks(full), self.max_over_ranks(compute)
        peak = torch.cuda.max_memory_allocated(self.device) if self.cuda else 0
        peak_max = int(self.max_over_ranks([float(peak)])[0])
        collectives = self.probe()
        env = describe_rank(self.device.type, self.local_rank)
        from advisor.calibrate.rendezvous import all_gather_strings

        hosts = all_gather_strings(env["host"], self.device)  # byte tensors, not pickles
        _write_json(results / f"rank{self.rank}.json",
                    {"rank": self.rank, "host": env["host"], "peak_memory_bytes": peak})
        if self.rank == 0:
            env.pop("host")
            env.update({
                "hosts": sorted(set(hosts)),
                "gpus_per_node": self.local_world,
                "precision": self.precision,
                "declared_precision": self.workload.model.precision,
                "strategy": self.strategy,
                "proxy": self.shape.kind,
                "proxy_layers": self.shape.layers,
                "model_layers": self.shape.full_layers,
                "proxy_params": self.params,
                "declared_params": int(self.workload.model.params),
            })
            tokens = self.plan.global_batch * self.shape.seq_len if self.shape.kind == "transformer" else None
            _write_json(results / "result.json", {
                "workload": self.workload.name,
                "gpus": self.world,
                "nodes": max(1, self.world // self.local_world),
                "step_seconds": step_seconds,
                "compute_seconds": compute_seconds,
                "global_batch": self.plan.global_batch,
                "micro_samples": self.plan.micro,
                "micro_batches": list(self.plan.micro_batches),
                "layout": self.lay.label(),
                "peak_memory_bytes": peak_max if self.cuda else None,
                "tokens_per_second": tokens / statistics.median(step_seconds) if tokens else None,
                "collectives": collectives,
                "environment": env,
            })
        self.barrier()
        self.dist.destroy_process_group()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m advisor.calibrate.worker", description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", required=True, help="workload spec (TOML), same path on every node")
    p.add_argument("--results", required=True, help="directory for result.json and rank<R>.json")
    p.add_argument("--device", choices=["cpu", "cuda"], required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--collective-timeout", type=float, default=600.0,
                   help="seconds a collective may wait for a peer before the rank fails")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _die_with_parent()
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    rank = os.environ.get("RANK", "0")
    try:
        Rank(args).run()
    except BaseException as exc:  # every failure becomes the rank's one-line error
        traceback.print_exc()
        first = (str(exc).strip().splitlines() or [""])[0]
        line = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        with contextlib.suppress(OSError):
            (results / f"rank{rank}.error").write_text(line + "\n", encoding="utf-8")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # skip torch's atexit hooks: a peer may be gone, and they can hang
    return 0


if __name__ == "__main__":
    sys.exit(main())
