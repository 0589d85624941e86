"""One calibration rank: `python -m advisor.calibrate.worker --workload W.toml --results DIR ...`.

Runs under the local launcher (advisor.calibrate.launchers.local) or under torchrun on each node
(advisor.calibrate.launchers); it reads its place from the standard torch.distributed variables
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (env:// rendezvous;
torchrun sets them). Gloo picks its network interface from GLOO_SOCKET_IFNAME when set (read by
torch itself; this module never overrides it), NCCL from NCCL_SOCKET_IFNAME.

What one rank does:
1. Builds the proxy (advisor.calibrate.proxy) of the declared model with `proxy_layers` layers and
   applies the layout in torchtitan's order (advisor.calibrate.parallelize): TP, activation
   checkpointing as the spec declares it, FSDP2 (`fully_shard` per block and at the root, on an
   explicit `init_device_mesh`, never the default mesh: pytorch#132471), built on `meta` and
   materialised after sharding; plain DDP (replicas only) is built on the device. One precision
   path at every count: FSDP2's MixedPrecisionPolicy on every non-DDP layout (a size-1 mesh where
   the layout has no data parallelism), autocast under DDP. The compute dtype is the spec's on
   CUDA and fp32 on CPU unless `--precision` forces one (compute_precision); fp32 matmuls use TF32
   on CUDA (MATMUL_PRECISION). The environment records both.
2. `warmup` untimed pairs of steps (full and compute-only), then `steps` timed pairs: forward +
   backward over the micro-batches of plan.batch_plan (gradient sync on the last micro-batch only;
   under fixed-global at most plan.MAX_CALIBRATION_MICRO_BATCHES of them, the batch that
   plan-calibration prices and result.json records), optimizer step. Every step starts after a
   barrier, and the clock is read after a device synchronise. The two kinds alternate so that load
   drifting on a shared machine biases neither.
3. The compute-only step is the same step with no gradient moved between ranks (Rank.compute_only:
   DDP `no_sync`; FSDP2 and pipeline stages under parallelize.local_gradient_reduction), optimizer
   included, so exposed communication is step - compute. FSDP2 still all-gathers parameters and
   pipeline stages still send activations in those steps: only the gradient reduction is dropped.
4. For world > 1: collective probes (plan.probe_sizes) for all_reduce, reduce_scatter and
   all_gather, timed as nccl-tests times them (advisor.calibrate.probes), and the small-message
   latency fitted from them.
Per-step times are the maximum over ranks (the slowest rank sets the pace). Rank 0 writes
`DIR/result.json` (and `DIR/topology.txt`, `nvidia-smi topo -m`, on CUDA); every rank writes
`DIR/rank<R>.json` (host, peak allocated and reserved memory), and on failure
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

        init_process_group("nccl" if self.cuda else "gloo", timedelta(seconds=args.collective_timeout),
                           device_id=self.device if self.cuda else None)
        self.workload = load_workload(args.workload)
        self.plan = batch_plan(self.workload, self.world)
        self.shape = proxy_shape(self.workload)
        self.precision = compute_precision(args.precision, self.workload.model.precision, args.device)
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[self.precision]
        torch.set_float32_matmul_precision(matmul_precision(args.device))
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

    def sum_over_ranks(self, value: float) -> float:
        t = self.torch.tensor([float(value)], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t)
        return float(t.item())

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
        farthest apart. Returns (data-parallel mesh, tensor-parallel mesh or None); the data-parallel
        mesh is the size-1 dp_shard dimension when the layout has none (FSDP2 then only casts)."""
        from torch.distributed.device_mesh import init_device_mesh

        lay = self.lay
        pp, rep, shard, tp = (int(a[0]) for a in (lay.pp, lay.dp_replicate, lay.dp_shard, lay.tp))
        names = ("pp", "dp_replicate", "dp_shard", "tp")
        self.mesh = init_device_mesh(self.device.type, (pp, rep, shard, tp), mesh_dim_names=names)
        # 2-D (replicate, shard): FSDP2's HSDP (a shard of 1: plain replication)
        dp = self.mesh["dp_replicate", "dp_shard"] if rep > 1 else self.mesh["dp_shard"]
        return dp, (self.mesh["tp"] if tp > 1 else None)

    def build(self) -> None:
        torch = self.torch
        from advisor.calibrate.proxy import sample_inputs

        torch.manual_seed(0)
        self.lay = self.layout()
        self.strategy = self.lay.name
        self.mesh = None
        self.schedule = None
        self.autocast = nullcontext
        self.checkpointed = 0  # blocks wrapped for activation checkpointing, over this rank's stages
        plain_ddp = self.strategy == "ddp" and self.lay.tp[0] == 1 and self.lay.pp[0] == 1
        self.mesh_parts = (None, None) if plain_ddp else self.build_mesh()
        # this rank alone: the replicate "all-reduce" of an HSDP compute-only step (local_gradient_reduction)
        self.solo_group = self.dist.new_group([self.rank], use_local_synchronization=True) if self.mesh else None
        self.modules = self.build_pipeline() if self.lay.pp[0] > 1 else [self.build_model()]
        self.model = self.modules[0]
        self.optimizer = torch.optim.AdamW([p for m in self.modules for p in m.parameters()], lr=1e-4)
        self.inputs = [sample_inputs(self.shape, m, self.device, self.dtype) for m in self.plan.micro_batches]

    def build_model(self):
        """The whole proxy on this rank: on the device for plain DDP (nothing is sharded), else on
        `meta`, sharded, then materialised (advisor.calibrate.parallelize)."""
        from advisor.calibrate.parallelize import materialise
        from advisor.calibrate.proxy import build_proxy

        if self.mesh is None:
            model = build_proxy(self.shape).to(self.device)
            self.params = sum(p.numel() for p in model.parameters())
            return self.wrap(model)
        with self.torch.device("meta"):
            model = build_proxy(self.shape)
        self.params = sum(p.numel() for p in model.parameters())
        return materialise(self.wrap(model), self.device)

    def wrap(self, model):
        """Plain DDP (replicas only) with autocast, else TP, activation checkpointing and FSDP2 in
        torchtitan's order (advisor.calibrate.parallelize); the spec's activation_checkpoint is
        applied on both paths."""
        torch = self.torch
        from advisor.calibrate.parallelize import apply_ac, shard
        from advisor.calibrate.proxy import tensor_parallel

        low = self.dtype != torch.float32
        if self.mesh is None:  # plain DDP: replicas only
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.checkpointed += apply_ac(model, self.workload.parallelism.activation_checkpoint)
            model = DDP(model, device_ids=[self.local_rank] if self.cuda else None)
            # communicate gradients in the compute dtype, as the spec's gradient bytes assume (the
            # compress hooks need NCCL: a CPU run forced to bf16 reduces in fp32)
            if low and self.cuda:
                from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

                bf16 = self.dtype == torch.bfloat16
                hook = default_hooks.bf16_compress_hook if bf16 else default_hooks.fp16_compress_hook
                model.register_comm_hook(None, hook)
            self.autocast = (lambda: torch.autocast(self.device.type, dtype=self.dtype)) if low else nullcontext
            return model
        dp_mesh, tp_mesh = self.mesh_parts
        if tp_mesh is not None:
            model = tensor_parallel(model, tp_mesh)
        self.checkpointed += apply_ac(model, self.workload.parallelism.activation_checkpoint)
        return shard(model, dp_mesh, self.dtype)

    def build_pipeline(self) -> list:
        """This rank's pipeline stages (torch.distributed.pipelining), each built on `meta`, wrapped
        as `wrap` does and materialised, and the schedule: 1F1B, or interleaved 1F1B with the
        layout's model chunks per rank."""
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B

        from advisor.calibrate.parallelize import materialise
        from advisor.calibrate.proxy import pipeline_loss, pipeline_stages

        torch = self.torch
        pp_mesh = self.mesh["pp"]
        pp, v = int(self.lay.pp[0]), self.workload.parallelism.virtual_stages
        with torch.device("meta"):
            built = pipeline_stages(self.shape, pp * v, pp, pp_mesh.get_local_rank())
        local = sum(p.numel() for _, m in built for p in m.parameters())
        # every stage exists on world / pp ranks (its data- and tensor-parallel copies)
        self.params = int(self.sum_over_ranks(local) / (self.world // pp))
        modules, stages = [], []
        for index, module in built:
            module = materialise(self.wrap(module), self.device)
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

    # -- steps ---------------------------------------------------------------------------------
    def set_gradient_sync(self, on: bool) -> None:
        for module in self.modules:
            if hasattr(module, "set_requires_gradient_sync"):  # FSDP2
                module.set_requires_gradient_sync(on)

    def compute_only(self):
        """The context of a compute-only step: the same step with no gradient communication (DDP
        `no_sync` on every micro-batch; FSDP2 and the pipeline schedule under
        parallelize.local_gradient_reduction). The optimizer steps on the local gradients inside."""
        from advisor.calibrate.parallelize import local_gradient_reduction

        if self.mesh is None:
            return self.model.no_sync()
        return local_gradient_reduction(self.modules, self.solo_group)

    def step(self, sync_gradients: bool) -> None:
        """One optimizer step: forward + backward over every micro-batch (gradients reduced on the
        last one only), then the optimizer. `sync_gradients=False`: the compute-only step."""
        with nullcontext() if sync_gradients else self.compute_only():
            if self.schedule is not None:  # the schedule runs every micro-batch and reduces at the end
                inputs, targets = self.pipeline_batch
                args = (inputs,) if self.first else ()
                kwargs = {"target": targets, "losses": []} if self.last else {}
                self.schedule.step(*args, **kwargs)
            else:
                self.micro_batches()
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def micro_batches(self) -> None:
        last = len(self.inputs) - 1
        for i, batch in enumerate(self.inputs):
            context = nullcontext()
            if self.mesh is None:  # DDP: accumulate locally until the last micro-batch
                context = nullcontext() if i == last else self.model.no_sync()
            else:
                self.set_gradient_sync(i == last)
            with context, self.autocast():
                loss = self.model(batch)
            (loss / len(self.inputs)).backward()

    def timed_step(self, sync_gradients: bool) -> float:
        self.barrier()  # every rank starts together: the time is the step's, not a straggler's
        self.sync()
        start = time.perf_counter()
        self.step(sync_gradients)
        self.sync()  # a CUDA step is asynchronous until here
        return time.perf_counter() - start

    def timed_steps(self, count: int) -> tuple[list[float], list[float]]:
        """`count` pairs of (full step, compute-only step), interleaved so that load drifting on a
        shared machine hits both alike instead of biasing whichever ran later. The memory peaks are
        reset before each full step and read after it (Memory)."""
        full, compute = [], []
        for i in range(count):
            self.memory.reset()
            full.append(self.timed_step(True))
            self.memory.read()
            compute.append(self.timed_step(False))
            _progress("step", i + 1, count)
        return full, compute

    def warm_up(self, count: int) -> None:
        """`count` untimed pairs of steps, both kinds (the compute-only one has its own first-call costs)."""
        for i in range(count):
            self.step(sync_gradients=True)
            self.step(sync_gradients=False)
            _progress("warmup", i + 1, count)

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

    def probe(self) -> tuple[list[dict], list[dict]]:
        """Collective probes on each group of probe_groups() (advisor.calibrate.probes): the rows
        of the file's [[collectives]] (plan.probe_sizes, from 1 MiB), and the small-message rows
        (probes.LATENCY_BYTES) that only the latency fit reads."""
        from advisor.calibrate.probes import latency_sizes, probe_one

        groups = self.probe_groups()
        out: list[dict] = []
        small: list[dict] = []
        done, total = 0, 3 * len(self.probe_sizes) * len(groups)
        for group, ranks, name in groups:
            for op in ("all_reduce", "reduce_scatter", "all_gather"):
                small += [probe_one(self, op, size, group, ranks, name) for size in latency_sizes(len(ranks))]
                for size in self.probe_sizes:
                    out.append(probe_one(self, op, size, group, ranks, name))
                    done += 1
                    _progress("probe", done, total)
        return out, small

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> None:
        from advisor.calibrate.environment import describe_rank, gather_devices

        args = self.args
        results = Path(args.results)
        self.build()
        self.memory = Memory(self.torch, self.device if self.cuda else None)
        self.warm_up(args.warmup)
        full, compute = self.timed_steps(args.steps)
        step_seconds, compute_seconds = self.max_over_ranks(full), self.max_over_ranks(compute)
        peaks = [int(x) for x in self.max_over_ranks([float(self.memory.allocated), float(self.memory.reserved)])]
        collectives, small = self.probe()
        env = describe_rank(self.device.type, self.local_rank)
        hosts, devices = gather_devices(env, self.device)
        _write_json(results / f"rank{self.rank}.json",
                    {"rank": self.rank, "host": env["host"], "peak_memory_bytes": self.memory.allocated,
                     "peak_reserved_bytes": self.memory.reserved})
        if self.rank == 0:
            env.pop("host")
            topology = env.pop("topology", None)
            if topology:  # `nvidia-smi topo -m` beside the results, as printed
                (results / "topology.txt").write_text(topology, encoding="utf-8")
            env.update(self.environment(hosts, devices, topology))
            _write_json(results / "result.json",
                        self.result(step_seconds, compute_seconds, peaks, (collectives, small), env))
        self.barrier()
        self.dist.destroy_process_group()

    def environment(self, hosts: list[str], devices: list[str], topology: str | None) -> dict:
        """What rank 0 adds to its own describe_rank: every rank's host and device, and the set-up."""
        extra = {
            "hosts": sorted(set(hosts)),
            "gpus_per_node": self.local_world,
            "precision": self.precision,
            "declared_precision": self.workload.model.precision,
            "activation_checkpoint": self.workload.parallelism.activation_checkpoint,
            "checkpointed_blocks": self.checkpointed,
            "strategy": self.strategy,
            "proxy": self.shape.kind,
            "proxy_layers": self.shape.layers,
            "model_layers": self.shape.full_layers,
            "proxy_params": self.params,
            "declared_params": int(self.workload.model.params),
        }
        if self.cuda:
            extra["devices"] = sorted(set(devices))
            if topology:
                extra["topology"] = topology
        return extra

    def result(self, step_seconds, compute_seconds, peaks, probes, env) -> dict:
        """rank 0's result.json (advisor.calibrate.results.RankResult reads it); `probes` is
        (the [[collectives]] rows, the small-message rows only the latency fit reads)."""
        from advisor.calibrate.probes import fit_latencies

        tokens = self.plan.global_batch * self.shape.seq_len if self.shape.kind == "transformer" else None
        collectives, small = probes
        latencies = fit_latencies(collectives + small)
        return {
            "workload": self.workload.name,
            "gpus": self.world,
            "nodes": max(1, self.world // self.local_world),
            "step_seconds": step_seconds,
            "compute_seconds": compute_seconds,
            "global_batch": self.plan.global_batch,
            "micro_samples": self.plan.micro,
            "micro_batches": list(self.plan.micro_batches),
            "layout": self.lay.label(),
            "peak_memory_bytes": peaks[0] if self.cuda else None,
            "peak_reserved_bytes": peaks[1] if self.cuda else None,
            # calibration_data.run_tokens_per_second's rule, inline: a rank imports no pydantic
            "tokens_per_second": tokens / statistics.median(step_seconds) if tokens else None,
            "collectives": collectives,
            "probe_latency_seconds": latencies or None,
            "environment": env,
        }


class Memory:
    """Peak device memory of the full steps: allocated (tensors; torch.cuda.max_memory_allocated) and
    reserved (the caching allocator's segments; torch.cuda.max_memory_reserved, what torchtitan's
    memory monitor reports), reset before each full step and the largest over them kept (so the
    compute-only steps and the probes never count). Both 0 on CPU, where torch keeps no such counters."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device
        self.allocated = self.reserved = 0

    def reset(self) -> None:
        if self.device is not None:
            self.torch.cuda.reset_peak_memory_stats(self.device)

    def read(self) -> None:
        if self.device is not None:
            self.allocated = max(self.allocated, self.torch.cuda.max_memory_allocated(self.device))
            self.reserved = max(self.reserved, self.torch.cuda.max_memory_reserved(self.device))


#: float32 matmul precision per device (torch.set_float32_matmul_precision): on CUDA "high" lets
#: fp32 matmuls use TF32 tensor cores, the rate advisor.catalog prices fp32 at; on CPU "highest"
#: (torch's default; no TF32 there). Recorded in [environment] as float32_matmul_precision.
MATMUL_PRECISION = {"cpu": "highest", "cuda": "high"}


def matmul_precision(device: str) -> str:
    return MATMUL_PRECISION[device]


def compute_precision(requested: str, declared: str, device: str) -> str:
    """The dtype a run computes in: `requested` when not "auto"; "auto" is the spec's precision on
    CUDA and fp32 on CPU (CPU bf16 kernels are slow and would measure the kernels, not the scaling;
    `--precision bf16` forces it, as the precision tests do)."""
    if requested != "auto":
        return requested
    precision = declared if device == "cuda" else "fp32"
    # fp8: the proxy runs its matmuls in bf16 (FP8 needs Transformer Engine or torchao, not a
    # dependency); the recorded precision says so, and the fit reads its MFU against the fp8 peak.
    return "bf16" if precision == "fp8" else precision


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m advisor.calibrate.worker", description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", required=True, help="workload spec (TOML), same path on every node")
    p.add_argument("--results", required=True, help="directory for result.json and rank<R>.json")
    p.add_argument("--device", choices=["cpu", "cuda"], required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--warmup", type=int, required=True)
    p.add_argument("--precision", choices=["auto", "bf16", "fp16", "fp32"], default="auto",
                   help="compute dtype: auto = the spec's on CUDA, fp32 on CPU (see compute_precision)")
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
