"""`--emit torchrun`: per-node torchrun command lines, and the torchrun words every launcher shares.

For each placement (N GPUs over M nodes) one line per node:

    [NAME=VALUE ...] OMP_NUM_THREADS=T torchrun --nnodes M --node-rank i --nproc-per-node N/M --rdzv-backend c10d
             --rdzv-endpoint HOST:PORT --rdzv-id advisor-NAME-N-M --rdzv-conf is_host=0|1
             --max-restarts 0
             -m advisor.calibrate.worker --workload /abs/W.toml --results DIR/gpusN-nodesM
             --device D --steps S --warmup K --collective-timeout C

Run line i on node i, all lines of one placement at the same time, placements one after another.
HOST is node 0's address (`--rdzv-host`, default this host's name); node 0 hosts the c10d store
(`is_host=1` on its line only). The workload file and DIR must be at the same (absolute) path on
every node. NAME=VALUE are `--env` and the NCCL/gloo settings passed through (launchers.job.job_environment).
T is one thread per CPU rank (torchrun sets 1 only for --nproc-per-node > 1; unset,
ranks sharing a host's cores oversubscribe them: a 2-rank step on a 2-core machine ran ~10x slower,
4.6 s against 0.49 s), `--cpus-per-rank` per GPU rank. C, the collective timeout, is derived from
`--timeout` (settings.CalibrationSettings.collective_timeout): one node that died fails the others'
next collective after C seconds instead of torch's default 10 minutes.
"""

from __future__ import annotations

import socket

from advisor.calibrate.launchers.job import EmitJob, EmittedFile, coverage_note, result_dir
from advisor.calibrate.launchers.quoting import Word, join_words, shell_quote
from advisor.text import plural


def torchrun_words(nnodes: Word, nproc: int, rendezvous: list[Word], worker: list[Word]) -> list[Word]:
    """torchrun's words around a rendezvous: no restarts (a failed calibration is reported, not retried)."""
    return ["torchrun", "--nnodes", nnodes, "--nproc-per-node", str(nproc), *rendezvous, "--max-restarts", "0",
            *worker]


def c10d(endpoint: Word, rdzv_id: Word) -> list[Word]:
    """torchrun's c10d rendezvous (the one torchtitan's multinode_trainer.slurm uses)."""
    return ["--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id]


def _node_line(job: EmitJob, gpus: int, nodes: int, host: str, node: int) -> str:
    # Say which node hosts the rendezvous store instead of letting torchrun guess from host names:
    # with a localhost endpoint every node would match, and if the wrong one hosts the store it can
    # leave first and strand the others at torchrun's 300 s exit barrier (pytorch#69520).
    rendezvous = [*c10d(f"{host}:{job.rdzv_port}", f"advisor-{job.name}-{gpus}-{nodes}"),
                  "--node-rank", str(node), "--rdzv-conf", f"is_host={int(node == 0)}"]
    worker = job.worker(str(job.workload_path.resolve()), str(result_dir(job.results.resolve(), gpus, nodes)))
    # --env and the passed NCCL/gloo settings, as slurm exports them: the docs promise --env to every launcher,
    # and these lines dropped it (`--env NCCL_DEBUG=INFO` printed nothing of it).
    env = "".join(f"{name}={shell_quote(value)} " for name, value in job.env)
    return f"{env}OMP_NUM_THREADS={job.threads()} " + join_words(torchrun_words(str(nodes), gpus // nodes, rendezvous,
                                                                                 worker))


def torchrun_commands(job: EmitJob) -> str:
    """Per-node torchrun command lines for each placement (format: module docstring)."""
    host = job.rdzv_host or socket.gethostname()
    lines = [
        f"# advisor calibrate {job.name}: run the lines of each placement at the same time, line i on node i;",
        f"# node 0 is {shell_quote(host)} (rendezvous on port {job.rdzv_port}). Then: {job.follow_up()}",
        *coverage_note(job.workload_path, job.placements),
    ]
    for gpus, nodes in job.placements:
        lines.append(f"# N={gpus} over {plural(nodes, 'node')}, {gpus // nodes} per node")
        lines += [_node_line(job, gpus, nodes, host, i) for i in range(nodes)]
    return "\n".join(lines) + "\n"


class Torchrun:
    name = "torchrun"
    help = "one torchrun line per node and placement (run them yourself)"

    def emit(self, job: EmitJob) -> list[EmittedFile]:
        return [EmittedFile(f"torchrun-{job.name}.txt", torchrun_commands(job))]
