"""Multi-node calibration: emit per-node torchrun commands or a Slurm script, then --collect.

Interface (kept small so other tools and people can drive it):

    advisor calibrate W.toml --emit torchrun [--gpus 8@2,16] [--results DIR]
                             [--rdzv-host HOST] [--rdzv-port 29500] [--device cuda|cpu]
    advisor calibrate W.toml --emit slurm    [--gpus ...] [--results DIR]
    advisor calibrate W.toml --collect DIR   [--out FILE.toml]

`--emit torchrun` prints, for each placement (N GPUs over M nodes; default: the spec's
calibration counts that need more than one node, M = ceil(N / gpus_per_node)), one line per node:

    torchrun --nnodes M --node-rank i --nproc-per-node N/M --rdzv-backend c10d
             --rdzv-endpoint HOST:PORT --rdzv-id advisor-NAME-N-M --rdzv-conf is_host=0|1
             --max-restarts 0
             -m advisor.calibrate.worker --workload /abs/W.toml --results DIR/gpusN-nodesM
             --device D --steps S --warmup K

On CPU (`--device cpu`) each line starts with OMP_NUM_THREADS=1 (one thread per rank). Run
line i on node i, all lines of one placement at the same time (node 0's first is best; the
others wait for it), placements one after another. Lines starting with `#` are comments. HOST
is node 0's address, reachable from every node (`--rdzv-host`, default this host's name); node 0
hosts the c10d rendezvous store on PORT (`is_host=1` on its line only). The workload file and
DIR must be at the same path on every node (a shared file system, or copy them); gloo ranks pick
their interface from GLOO_SOCKET_IFNAME (NCCL: NCCL_SOCKET_IFNAME) when set in the node's
environment. Each run writes DIR/gpusN-nodesM/result.json (rank 0) and one
rank<R>.json per rank; `--collect DIR` merges every finished run under DIR into the calibration
file (default calibrations/NAME_DEVICE_DATE.toml).

`--emit slurm` prints an sbatch script that allocates the largest node count and runs each
placement as `srun --nodes M --ntasks-per-node 1 --relative 0 torchrun ...` with node 0 of the
allocation as rendezvous host.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

from advisor.errors import InputError
from advisor.placement import parse_placements
from advisor.spec import Workload
from advisor.text import plural

DEFAULT_RDZV_PORT = 29500


def emit_placements(w: Workload, gpus: Optional[str]) -> list[tuple[int, int]]:
    """(gpus, nodes) to emit: --gpus (N or N@M; M defaults to filling nodes), else the spec's
    calibration counts that need more than one node. Each node runs the same number of ranks."""
    if gpus is None:
        placements = [(n, w.nodes(n)) for n in w.calibration.gpus if w.nodes(n) > 1]
        if not placements:
            raise InputError.at(
                w.source or "<spec>", "calibration.gpus",
                f"every count fits in one node of {w.cluster.gpus_per_node} GPUs: calibrate locally, or pass --gpus N@NODES",
                list(w.calibration.gpus),
            )
        return placements
    placements = parse_placements(gpus, w.cluster.gpus_per_node)
    for n, nodes in placements:
        if n % nodes:
            raise InputError.at("--gpus", "", f"{n}@{nodes}: every node must run the same number of ranks", gpus)
    return placements


def result_dir(root: Path, gpus: int, nodes: int) -> Path:
    return root / f"gpus{gpus}-nodes{nodes}"


def _torchrun(workload_path: Path, gpus: int, nodes: int, results: Path, device: str, steps: int,
              warmup: int, endpoint_word: str, id_word: str, node_rank: Optional[int]) -> str:
    """One torchrun command line; `endpoint_word` and `id_word` are already shell words (the Slurm
    script passes "$head:PORT" unquoted for the shell to expand)."""
    q = shlex.quote
    words = ["torchrun", "--nnodes", str(nodes)]
    if node_rank is not None:
        words += ["--node-rank", str(node_rank)]
    words += ["--nproc-per-node", str(gpus // nodes), "--rdzv-backend", "c10d",
              "--rdzv-endpoint", endpoint_word, "--rdzv-id", id_word]
    if node_rank is not None:
        # Say which node hosts the rendezvous store instead of letting torchrun guess from host
        # names: with a localhost endpoint every node would match, and if the wrong one hosts the
        # store it can leave first and strand the others at torchrun's 300 s exit barrier
        # (pytorch#69520).
        words += ["--rdzv-conf", f"is_host={int(node_rank == 0)}"]
    words += ["--max-restarts", "0",
              "-m", "advisor.calibrate.worker", "--workload", q(str(workload_path.resolve())),
              "--results", q(str(result_dir(results.resolve(), gpus, nodes))), "--device", device,
              "--steps", str(steps), "--warmup", str(warmup)]
    return " ".join(words)


#: CPU ranks get one OpenMP thread each. torchrun sets that only for --nproc-per-node > 1; unset,
#: ranks sharing a host's cores oversubscribe them (a 2-rank step on this 2-core machine ran ~10x
#: slower: 4.6 s against 0.49 s).
CPU_THREADS = "OMP_NUM_THREADS=1"


def torchrun_commands(w: Workload, workload_path: Path, placements: list[tuple[int, int]], results: Path,
                      device: str, steps: int, warmup: int, rdzv_host: str,
                      rdzv_port: int = DEFAULT_RDZV_PORT) -> str:
    """Per-node torchrun command lines for each placement (format: module docstring)."""
    lines = [
        f"# advisor calibrate {w.name}: run the lines of each placement at the same time, line i on node i;",
        f"# node 0 is {rdzv_host} (rendezvous on port {rdzv_port}). Then: advisor calibrate {workload_path} --collect {results}",
    ]
    for gpus, nodes in placements:
        lines.append(f"# N={gpus} over {plural(nodes, 'node')}, {gpus // nodes} per node")
        for i in range(nodes):
            prefix = CPU_THREADS + " " if device == "cpu" else ""
            lines.append(prefix + _torchrun(workload_path, gpus, nodes, results, device, steps, warmup,
                                   shlex.quote(f"{rdzv_host}:{rdzv_port}"), f"advisor-{w.name}-{gpus}-{nodes}", i))
    return "\n".join(lines) + "\n"


def slurm_script(w: Workload, workload_path: Path, placements: list[tuple[int, int]], results: Path,
                 device: str, steps: int, warmup: int, rdzv_port: int = DEFAULT_RDZV_PORT,
                 time_limit: str = "01:00:00") -> str:
    """An sbatch script running every placement with srun + torchrun (format: module docstring)."""
    max_nodes = max(nodes for _, nodes in placements)
    per_node = max(gpus // nodes for gpus, nodes in placements)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=advisor-calibrate-{w.name}",
        f"#SBATCH --nodes={max_nodes}",
        "#SBATCH --ntasks-per-node=1",
    ]
    if device == "cuda":
        lines.append(f"#SBATCH --gpus-per-node={per_node}")
    lines += [
        f"#SBATCH --time={time_limit}",
        f"#SBATCH --output={results.resolve()}/slurm-%j.out",
        "# Calibration runs for advisor; afterwards:",
        f"#   advisor calibrate {workload_path} --collect {results.resolve()}",
        "set -euo pipefail",
        f"mkdir -p {shlex.quote(str(results.resolve()))}",
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
    ]
    for gpus, nodes in placements:
        lines.append(f"# N={gpus} over {plural(nodes, 'node')}")
        cmd = _torchrun(workload_path, gpus, nodes, results, device, steps, warmup,
                        f'"$head:{rdzv_port}"', f'"$SLURM_JOB_ID-{gpus}-{nodes}"', None)
        export = f" --export=ALL,{CPU_THREADS}" if device == "cpu" else ""
        lines.append(f"srun --nodes {nodes} --ntasks {nodes} --ntasks-per-node 1 --relative 0{export} {cmd}")
    return "\n".join(lines) + "\n"
