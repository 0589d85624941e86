"""Multi-node calibration: emit per-node torchrun commands, a Slurm script or SkyPilot tasks, then --collect.

Interface (kept small so other tools and people can drive it):

    advisor calibrate W.toml --emit torchrun [--gpus 8@2,16] [--results DIR]
                             [--rdzv-host HOST] [--rdzv-port 29500] [--device cuda|cpu]
    advisor calibrate W.toml --emit slurm    [--gpus ...] [--results DIR] [--partition P] [--account A]
                             [--time HH:MM:SS] [--timeout S] [--setup SCRIPT] [--root DIR] [--env NAME=VALUE]
    advisor calibrate W.toml --emit skypilot [--gpus ...] [--results DIR] [--bucket NAME] [--setup SCRIPT]
    advisor calibrate W.toml --collect DIR   [--out FILE.toml]

Every word printed goes through one quoting function, `shell_quote` (shlex.quote, after refusing
control characters such as newlines: exit 2), so a path or value with spaces, quotes or `$` is
one word and runs nothing. Shell expansions advisor itself writes (`"$ROOT"`, `"$head"`) are
`Raw` fragments that never hold user text.

`--emit torchrun` prints, for each placement (N GPUs over M nodes; default: the spec's
calibration counts that need more than one node, M = ceil(N / gpus_per_node)), one line per node:

    torchrun --nnodes M --node-rank i --nproc-per-node N/M --rdzv-backend c10d
             --rdzv-endpoint HOST:PORT --rdzv-id advisor-NAME-N-M --rdzv-conf is_host=0|1
             --max-restarts 0
             -m advisor.calibrate.worker --workload /abs/W.toml --results DIR/gpusN-nodesM
             --device D --steps S --warmup K

On CPU (`--device cpu`) each line starts with OMP_NUM_THREADS=1 (one thread per rank). Run
line i on node i, all lines of one placement at the same time, placements one after another.
HOST is node 0's address (`--rdzv-host`, default this host's name); node 0 hosts the c10d store
(`is_host=1` on its line only). The workload file and DIR must be at the same (absolute) path on
every node. Each run writes DIR/gpusN-nodesM/result.json (rank 0) and rank<R>.json per rank;
`--collect DIR` merges every finished run under DIR into the calibration file.

`--emit slurm` prints an sbatch script meant to be submitted from the folder the workload path is
relative to (`sbatch` from the same folder you ran advisor in): paths are relative to
`$SLURM_SUBMIT_DIR` (or `--root DIR`), never this machine's absolute paths; the job log goes to
`slurm-advisor-NAME-%j.out` in the submit folder, which exists when Slurm opens it (Slurm creates
no folders for --output). It allocates the largest node count, sources `--setup SCRIPT` (your
venv or modules), exports the NCCL/gloo settings set in the emitting shell (NCCL_SOCKET_IFNAME,
NCCL_IB_HCA, NCCL_DEBUG, GLOO_SOCKET_IFNAME) and `--env` pairs, and runs each placement as one
job step `srun --nodes M --ntasks M --ntasks-per-node 1 --relative 0 --time MIN torchrun ...`
with node 0 of the allocation as rendezvous host; a failed or timed-out step is reported and the
next one runs; the script exits 1 if any failed. `--time` defaults to the sum of the per-step
limits (`--timeout`, default 30 min each) plus 10 min.

`--emit skypilot` prints one SkyPilot task YAML per placement, separated by `---` lines (save each
to its own file, or pass `--results` and use the file names in the comments): `num_nodes: M`,
`resources.accelerators: GPU:N/M` (SkyPilot's name for the spec's GPU), `workdir: .` (the folder
you run advisor in, synced to every node), `setup:` installs advisor from that folder
(`pip install '.[calibrate]'`, the path form: the PyPI name `advisor` is another project), and
`run:` starts torchrun on every node with `--node-rank $SKYPILOT_NODE_RANK` and node 0 of
`$SKYPILOT_NODE_IPS` as master. Results: with `--bucket NAME` every node writes to the bucket
mounted at /advisor-results; without, worker nodes copy their rank files to the head node over
SkyPilot's inter-node SSH, and `sky rsync-down` fetches them (the comment says the commands).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from advisor.errors import InputError
from advisor.placement import parse_placements
from advisor.spec import Workload
from advisor.text import plural

DEFAULT_RDZV_PORT = 29500

#: Seconds one placement may run under Slurm unless --timeout says otherwise.
DEFAULT_STEP_TIMEOUT = 1800.0

#: Environment variables exported into emitted jobs when set where advisor runs: the NCCL
#: network choices every NCCL issue asks about (NVIDIA NCCL docs, "Environment Variables") and gloo's.
PASSED_ENV = ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG", "GLOO_SOCKET_IFNAME")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Raw(str):
    """A shell fragment advisor wrote itself (an expansion such as "$ROOT"); never user text."""


Word = str | Raw


def shell_quote(word: object) -> str:
    """The one quoting function for everything advisor prints for a shell: one word, expanding
    nothing. Control characters (a newline would end the command) are refused: InputError, exit 2."""
    if isinstance(word, Raw):
        return str(word)
    text = str(word)
    bad = next((c for c in text if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise InputError.at("emit", "", "refusing a control character in a word of an emitted command", text)
    return shlex.quote(text)


def join_words(words: list[Word]) -> str:
    return " ".join(shell_quote(w) for w in words)


def concat(*parts: Word) -> Raw:
    """One shell word from pieces: Raw pieces as written, the others quoted (`"$ROOT"/'a b'`)."""
    return Raw("".join(shell_quote(p) for p in parts))


def emit_placements(w: Workload, gpus: str | None) -> list[tuple[int, int]]:
    """(gpus, nodes) to emit: --gpus (N or N@M; M defaults to filling nodes), else the spec's
    calibration counts that need more than one node. Each node runs the same number of ranks."""
    if gpus is None:
        placements = [(n, w.nodes(n)) for n in w.calibration.gpus if w.nodes(n) > 1]
        if not placements:
            raise InputError.at(
                w.source or "<spec>",
                "calibration.gpus",
                f"every count fits in one node of {w.cluster.gpus_per_node} GPUs: calibrate locally, "
                "or pass --gpus N@NODES",
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


def _worker(workload: Word, results: Word, device: str, steps: int, warmup: int) -> list[Word]:
    return [
        "-m",
        "advisor.calibrate.worker",
        "--workload",
        workload,
        "--results",
        results,
        "--device",
        device,
        "--steps",
        str(steps),
        "--warmup",
        str(warmup),
    ]


def _torchrun(
    workload: Word,
    gpus: int,
    nodes: int,
    results: Word,
    device: str,
    steps: int,
    warmup: int,
    endpoint: Word,
    rdzv_id: Word,
    node_rank: int | None,
) -> str:
    """One torchrun command line (c10d rendezvous)."""
    words: list[Word] = ["torchrun", "--nnodes", str(nodes)]
    if node_rank is not None:
        words += ["--node-rank", str(node_rank)]
    words += [
        "--nproc-per-node",
        str(gpus // nodes),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        endpoint,
        "--rdzv-id",
        rdzv_id,
    ]
    if node_rank is not None:
        # Say which node hosts the rendezvous store instead of letting torchrun guess from host
        # names: with a localhost endpoint every node would match, and if the wrong one hosts the
        # store it can leave first and strand the others at torchrun's 300 s exit barrier
        # (pytorch#69520).
        words += ["--rdzv-conf", f"is_host={int(node_rank == 0)}"]
    words += ["--max-restarts", "0", *_worker(workload, results, device, steps, warmup)]
    return join_words(words)


#: CPU ranks get one OpenMP thread each. torchrun sets that only for --nproc-per-node > 1; unset,
#: ranks sharing a host's cores oversubscribe them (a 2-rank step on this 2-core machine ran ~10x
#: slower: 4.6 s against 0.49 s).
CPU_THREADS = "OMP_NUM_THREADS=1"


def follow_up(workload_path: Path, results: Path) -> str:
    """The hint printed after emitted commands: how to merge their results (every word quoted)."""
    return join_words(["advisor", "calibrate", str(workload_path), "--collect", str(results)])


def coverage_note(workload_path: Path, placements: list[tuple[int, int]]) -> list[str]:
    """A comment when the emitted runs cross nodes at fewer than 2 node counts: with one node
    (calibrated locally) that is fewer than the 3 node counts the inter-node terms need."""
    multi = sorted({nodes for _, nodes in placements if nodes > 1})
    if len(multi) >= 2:
        return []
    return [f"# note: these runs cross nodes at {plural(len(multi), 'node count')} {multi}; "
            "measuring how the inter-node cost grows needs 3+ node counts (1, 2, 3+):",
            f"#   {join_words(['advisor', 'plan-calibration', relative_path(workload_path)])} suggests placements"]


def torchrun_commands(
    w: Workload,
    workload_path: Path,
    placements: list[tuple[int, int]],
    results: Path,
    device: str,
    steps: int,
    warmup: int,
    rdzv_host: str,
    rdzv_port: int = DEFAULT_RDZV_PORT,
) -> str:
    """Per-node torchrun command lines for each placement (format: module docstring)."""
    lines = [
        f"# advisor calibrate {w.name}: run the lines of each placement at the same time, line i on node i;",
        f"# node 0 is {shell_quote(rdzv_host)} (rendezvous on port {rdzv_port}). Then: "
        f"{follow_up(workload_path, results)}",
    ]
    lines += coverage_note(workload_path, placements)
    for gpus, nodes in placements:
        lines.append(f"# N={gpus} over {plural(nodes, 'node')}, {gpus // nodes} per node")
        for i in range(nodes):
            prefix = CPU_THREADS + " " if device == "cpu" else ""
            lines.append(
                prefix
                + _torchrun(
                    str(workload_path.resolve()),
                    gpus,
                    nodes,
                    str(result_dir(results.resolve(), gpus, nodes)),
                    device,
                    steps,
                    warmup,
                    f"{rdzv_host}:{rdzv_port}",
                    f"advisor-{w.name}-{gpus}-{nodes}",
                    i,
                )
            )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class JobOptions:
    """What the cluster needs to know that the spec does not: scheduler fields, set-up, environment."""

    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None
    """Slurm --time of the allocation (default: the step limits summed, plus 10 min)."""
    step_timeout: float | None = None
    """Seconds one placement may run (default DEFAULT_STEP_TIMEOUT)."""
    setup: str | None = None
    """A script sourced before the runs (venv activation, module loads), relative to the root."""
    root: str | None = None
    """Folder paths are relative to on the cluster (default $SLURM_SUBMIT_DIR / the SkyPilot workdir)."""
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """Extra NAME=VALUE pairs exported into the job."""
    bucket: str | None = None
    """SkyPilot: a bucket mounted at /advisor-results that every node writes to."""


def job_environment(extra: tuple[tuple[str, str], ...] = ()) -> list[tuple[str, str]]:
    """PASSED_ENV set in this process's environment, then the --env pairs (validated names)."""
    pairs = [(k, os.environ[k]) for k in PASSED_ENV if os.environ.get(k)]
    for name, value in extra:
        if not _ENV_NAME.fullmatch(name):
            raise InputError.at("--env", "", "expected NAME=VALUE with NAME of letters, digits and _", name)
        pairs = [(k, v) for k, v in pairs if k != name] + [(name, value)]
    return pairs


def parse_env(items: list[str] | None) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise InputError.at("--env", "", "expected NAME=VALUE", item)
        out.append((name, value))
    return tuple(out)


def relative_path(path: Path) -> str:
    """`path` as the user will address it from the submit folder: relative to the current folder
    when it lies under it, else as given (an absolute path the user chose)."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _under_root(path: Path) -> Word:
    rel = relative_path(path)
    return rel if rel.startswith("/") else concat(Raw('"$ROOT"/'), rel)


def _hms(seconds: float) -> str:
    s = int(-(-seconds // 1))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


_SLURM_NAME = re.compile(r"[A-Za-z0-9_.,+@%-]+")
_SLURM_TIME = re.compile(r"(\d+-)?\d{1,2}(:\d{2}){0,2}|\d+")


def _sbatch_lines(w: Workload, o: JobOptions, placements: list[tuple[int, int]], device: str, total: str) -> list[str]:
    """#SBATCH directives. sbatch reads these lines itself, not through a shell: values it would
    split (spaces, quotes) are refused rather than quoted."""
    max_nodes = max(nodes for _, nodes in placements)
    sb = [f"--job-name=advisor-calibrate-{w.name}", f"--nodes={max_nodes}", "--ntasks-per-node=1"]
    if device == "cuda":
        sb.append(f"--gpus-per-node={max(gpus // nodes for gpus, nodes in placements)}")
    sb.append(f"--time={total}")
    for flag, value in (("partition", o.partition), ("account", o.account)):
        if value is not None:
            if not _SLURM_NAME.fullmatch(value):
                raise InputError.at(f"--{flag}", "", "expected a Slurm name (letters, digits, . _ - , + @ %)", value)
            sb.append(f"--{flag}={value}")
    sb.append(f"--output=slurm-advisor-{w.name}-%j.out")
    return [f"#SBATCH {shell_quote(x)}" for x in sb]


def _srun_step(workload_path: Path, results_word: Word, gpus: int, nodes: int, device: str, steps: int, warmup: int,
               rdzv_port: int, minutes: int) -> str:
    """One placement as one job step with its own time limit; a failure is reported, not fatal."""
    cmd = _torchrun(_under_root(workload_path), gpus, nodes, concat(results_word, f"/gpus{gpus}-nodes{nodes}"), device,
                    steps, warmup, Raw(f'"$head:{rdzv_port}"'), Raw(f'"$SLURM_JOB_ID-{gpus}-{nodes}"'), None)
    export = f" --export=ALL,{CPU_THREADS}" if device == "cpu" else ""
    return (f"srun --nodes {nodes} --ntasks {nodes} --ntasks-per-node 1 --relative 0 --time {minutes} "
            f"--kill-on-bad-exit=1{export} {cmd} \\\n"
            f"  || {{ echo {shell_quote(f'advisor: {gpus}@{nodes} failed or timed out')} >&2; status=1; }}")


def slurm_script(w: Workload, workload_path: Path, placements: list[tuple[int, int]], results: Path, device: str,
                 steps: int, warmup: int, rdzv_port: int = DEFAULT_RDZV_PORT, time_limit: str | None = None,
                 options: JobOptions | None = None) -> str:
    """An sbatch script running every placement as its own srun job step (format: module docstring)."""
    o = options or JobOptions(time_limit=time_limit)
    time_limit = o.time_limit or time_limit
    step_timeout = o.step_timeout or DEFAULT_STEP_TIMEOUT
    if time_limit is not None and not _SLURM_TIME.fullmatch(time_limit):
        raise InputError.at("--time", "", "expected a Slurm time such as 90, 01:30:00 or 1-00:00:00", time_limit)
    total = time_limit or _hms(step_timeout * len(placements) + 600)
    spec = relative_path(workload_path)
    root = shell_quote(o.root) if o.root else '"${SLURM_SUBMIT_DIR:-$PWD}"'
    lines = ["#!/bin/bash", *_sbatch_lines(w, o, placements, device, total),
             f"# advisor calibrate {w.name}: submit with sbatch from the folder {shell_quote(spec)} is relative to; "
             "afterwards:",
             f"#   {follow_up(Path(spec), Path(relative_path(results)))}", *coverage_note(workload_path, placements),
             "set -uo pipefail", f"ROOT={root}", 'cd "$ROOT" || exit 1']
    if o.setup:
        lines.append(f". {shell_quote(_under_root(Path(o.setup)))} || exit 1")
    lines += [f"export {name}={shell_quote(value)}" for name, value in job_environment(o.env)]
    results_word = _under_root(results)
    lines += [f"mkdir -p {shell_quote(results_word)} || exit 1",
              'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)', "status=0"]
    minutes = int(-(-step_timeout // 60))
    for gpus, nodes in placements:
        lines.append(f"# N={gpus} over {plural(nodes, 'node')}, {gpus // nodes} per node, at most {minutes} min")
        lines.append(_srun_step(workload_path, results_word, gpus, nodes, device, steps, warmup, rdzv_port, minutes))
    lines.append('exit "$status"')
    return "\n".join(lines) + "\n"


#: SkyPilot accelerator names for catalog GPUs (SkyPilot `sky show-gpus`: H100, A100-80GB, ...).
SKYPILOT_ACCELERATORS = {
    "H100-SXM": "H100",
    "H100-PCIe": "H100",
    "H200": "H200",
    "B200": "B200",
    "A100-SXM": "A100-80GB",
    "L40S": "L40S",
    "T4": "T4",
    "V100-SXM2": "V100",
}


def skypilot_accelerator(w: Workload) -> str:
    from advisor.catalog import find_gpu

    gpu = find_gpu(w.cluster.gpu)
    name = SKYPILOT_ACCELERATORS.get(gpu.name, gpu.name) if gpu is not None else w.cluster.gpu
    if "A100" in w.cluster.gpu and "40" in w.cluster.gpu:
        name = "A100"
    return name


def _yaml_block(lines: list[str], indent: str = "  ") -> str:
    return "|\n" + "\n".join(indent + ln for ln in lines)


_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,221}")


def _skypilot_run(o: JobOptions, spec: str, out: str, gpus: int, nodes: int, device: str, steps: int, warmup: int,
                  rdzv_port: int) -> list[str]:
    """The `run:` lines of one task: torchrun on every node, node 0 of $SKYPILOT_NODE_IPS as master."""
    run = ["set -euo pipefail", *(f"export {k}={shell_quote(v)}" for k, v in job_environment(o.env))]
    if device == "cpu":
        run.append(f"export {CPU_THREADS}")
    torchrun = ["torchrun", "--nnodes", Raw('"$SKYPILOT_NUM_NODES"'), "--node-rank", Raw('"$SKYPILOT_NODE_RANK"'),
                "--nproc-per-node", str(gpus // nodes), "--master-addr", Raw('"$HEAD"'), "--master-port",
                str(rdzv_port), "--max-restarts", "0", *_worker(spec, out, device, steps, warmup)]
    run += ['HEAD=$(echo "$SKYPILOT_NODE_IPS" | head -n 1)', join_words(torchrun)]
    if not o.bucket:
        # Rank files of worker nodes go to the head node, where `sky rsync-down` finds them.
        run += ['if [ "$SKYPILOT_NODE_RANK" != 0 ]; then',
                f'  rsync -a {shell_quote(out + "/")} "$HEAD":{shell_quote("sky_workdir/" + out + "/")}', "fi"]
    return run


def skypilot_tasks(w: Workload, workload_path: Path, placements: list[tuple[int, int]], results: Path, device: str,
                   steps: int, warmup: int, rdzv_port: int = DEFAULT_RDZV_PORT,
                   options: JobOptions | None = None) -> str:
    """One SkyPilot task YAML per placement, `---` between them (format: module docstring)."""
    import json

    o = options or JobOptions()
    spec = relative_path(workload_path)
    if spec.startswith("/"):
        raise InputError.at(workload_path, "", "--emit skypilot syncs the current folder to the nodes: run advisor "
                            "from a folder that holds the workload file (a relative path)")
    if o.bucket is not None and not _BUCKET.fullmatch(o.bucket):
        raise InputError.at("--bucket", "", "expected a bucket name (lower-case letters, digits, . _ -)", o.bucket)
    root = "/advisor-results" if o.bucket else relative_path(results)
    setup = [f". {shell_quote(o.setup)}"] if o.setup else []
    setup.append(f"python -m pip install {shell_quote('.[calibrate]')}")
    docs = []
    note = coverage_note(workload_path, placements)
    for gpus, nodes in placements:
        name, out = f"advisor-{w.name}-gpus{gpus}-nodes{nodes}", f"{root}/gpus{gpus}-nodes{nodes}"
        local = f"{relative_path(results)}/gpus{gpus}-nodes{nodes}/"
        fetch = (join_words(["gsutil", "-m", "rsync", "-r", f"gs://{o.bucket}/gpus{gpus}-nodes{nodes}", local])
                 + "  # or aws s3 sync" if o.bucket else
                 join_words(["sky", "rsync-down", name, f"sky_workdir/{out}/", local]))
        resources = (f"  accelerators: {json.dumps(f'{skypilot_accelerator(w)}:{gpus // nodes}')}" if device == "cuda"
                     else "  cpus: 2+")
        doc = [f"# advisor calibrate {w.name}: {plural(gpus, 'GPU')} over {plural(nodes, 'node')}. "
               f"Save as {name}.yaml; sky launch -c {name} {name}.yaml",
               f"# then: {fetch}; {follow_up(Path(spec), Path(relative_path(results)))}", *note,
               f"name: {name}", f"num_nodes: {nodes}", "resources:", resources, "workdir: ."]
        if o.bucket:
            doc += ["file_mounts:", "  /advisor-results:", f"    name: {json.dumps(o.bucket)}", "    mode: MOUNT"]
        run = _skypilot_run(o, spec, out, gpus, nodes, device, steps, warmup, rdzv_port)
        doc += [f"setup: {_yaml_block(setup)}", f"run: {_yaml_block(run)}"]
        docs.append("\n".join(doc))
    return "\n---\n".join(docs) + "\n"
