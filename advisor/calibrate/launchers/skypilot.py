"""`--emit skypilot --out-dir DIR`: one SkyPilot task YAML per placement, and `launch.sh` that runs them.

Each task (SkyPilot docs, "YAML Configuration" and "Distributed Multi-Node Jobs"):
- `name`, `num_nodes: M`, `resources.accelerators: GPU:N/M` (SkyPilot's name for the spec's GPU)
  with `network_tier: best` on GPU tasks (clouds where the fast interconnect is opt-in would
  otherwise give NCCL plain TCP, and the calibration would measure the wrong fabric);
- `workdir: .`, the folder you run advisor in, synced to ~/sky_workdir on every node: the spec
  (and `--results`, `--setup`) must lie inside it, or the nodes would not have them;
- `envs:` the NCCL/gloo settings of the emitting shell, `--env` pairs and OMP_NUM_THREADS, as
  SkyPilot environment variables (seen by `setup` and `run`; `sky launch --env` overrides them);
- `setup:` installs advisor from the synced folder with its calibrate extra (`pip install
  '.[calibrate]'`, the path form: the PyPI name `advisor` is another project), torch from
  download.pytorch.org/whl/CUDA first when `--torch-cuda CUDA` names a build, and on GPU tasks
  checks that torch sees the GPU; `--setup SCRIPT` (a file in the synced folder, not a local
  virtual environment, which the nodes do not have) is sourced before it and before `run`;
- `run:` torchrun on every node, `--node-rank $SKYPILOT_NODE_RANK`, node 0 of `$SKYPILOT_NODE_IPS`
  as master, under `timeout` (the placement's `--timeout`). Each node writes its rank files under
  its own ~/sky_workdir/RESULTS/gpusN-nodesM (with `--bucket NAME`: the bucket mounted at
  /advisor-results on every node instead).
`launch.sh` (run from the synced folder) launches each task in turn (`sky launch -y -c CLUSTER
-i 15 --down`: torn down 15 idle minutes after the job, should the script die), waits for it,
copies every node's results home over the SSH names SkyPilot gives the cluster (`CLUSTER`,
`CLUSTER-worker1`, ...; SkyPilot docs, "Syncing Code and Artifacts": download with rsync), tears
the cluster down, then runs `advisor calibrate SPEC --collect RESULTS`.

The YAML is written by PyYAML (`yaml.safe_dump`) from a data structure, never by concatenation,
and read back before it is written: text that parses to anything but that structure is a bug, not
a file. Comment lines hold only checked text (quoting.check_text).
"""

from __future__ import annotations

import re
from pathlib import Path

from advisor.calibrate.launchers.job import EmitJob, EmittedFile, coverage_note, result_dir
from advisor.calibrate.launchers.quoting import Raw, inside, join_words, shell_quote
from advisor.calibrate.launchers.slurm import TORCH_CHECK
from advisor.calibrate.launchers.torchrun import torchrun_words
from advisor.calibrate.settings import SETTINGS
from advisor.errors import InputError
from advisor.text import plural

#: SkyPilot accelerator names for catalog GPUs (SkyPilot `sky show-gpus`: H100, A100-80GB, ...).
SKYPILOT_ACCELERATORS = {
    "H100-SXM": "H100", "H100-PCIe": "H100", "H200": "H200", "B200": "B200", "A100-SXM": "A100-80GB",
    "L40S": "L40S", "T4": "T4", "V100-SXM2": "V100",
}

_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,221}")
BUCKET_MOUNT = "/advisor-results"
DRIVER = "launch.sh"
SYNCED = "--emit skypilot syncs the current folder (workdir: .) to the nodes; run advisor from a folder that holds it"


def skypilot_accelerator(gpu_name: str) -> str:
    """SkyPilot's accelerator name for a spec's `cluster.gpu`."""
    from advisor.catalog import find_gpu

    gpu = find_gpu(gpu_name)
    if "A100" in gpu_name and "40" in gpu_name:
        return "A100"
    return SKYPILOT_ACCELERATORS.get(gpu.name, gpu.name) if gpu is not None else gpu_name


def _synced(job: EmitJob) -> dict[str, str | None]:
    """Paths as the nodes see them (relative to the synced folder); refused when outside it."""
    cwd = Path.cwd()
    spec = inside(cwd, job.workload_path, job.workload_path, SYNCED)
    results = None if job.bucket else inside(cwd, job.results, "--results", SYNCED)
    setup = None
    if job.setup:
        setup = inside(cwd, Path(job.setup), "--setup", SYNCED)
        venv = next((p for p in Path(job.setup).resolve().parents if (p / "pyvenv.cfg").is_file()), None)
        if venv is not None:
            raise InputError.at("--setup", "", f"is inside the local virtual environment {venv}, which the nodes "
                                "do not have; their setup installs advisor (pass a script of module loads or "
                                "exports instead, or nothing)", job.setup)
    if job.bucket is not None and not _BUCKET.fullmatch(job.bucket):
        raise InputError.at("--bucket", "", "expected a bucket name (lower-case letters, digits, . _ -)", job.bucket)
    return {"spec": spec, "results": results, "setup": setup}


def _setup(job: EmitJob, paths: dict) -> str:
    lines = ["set -euo pipefail"]
    if paths["setup"]:
        lines.append(f". {shell_quote(paths['setup'])}")
    if job.torch_cuda:
        lines.append(join_words(["python", "-m", "pip", "install", "torch", "--index-url",
                                 f"https://download.pytorch.org/whl/{job.torch_cuda}"]))
    lines.append(join_words(["python", "-m", "pip", "install", ".[calibrate]"]))
    if job.device == "cuda":
        lines.append(join_words(["python", "-c", TORCH_CHECK]))
    return "\n".join(lines) + "\n"


def _run(job: EmitJob, paths: dict, out: str, gpus: int, nodes: int) -> str:
    """The `run:` script of one task: torchrun on every node, node 0 of $SKYPILOT_NODE_IPS as master."""
    lines = ["set -euo pipefail"]
    if paths["setup"]:
        lines.append(f". {shell_quote(paths['setup'])}")
    rendezvous = ["--node-rank", Raw('"$SKYPILOT_NODE_RANK"'), "--master-addr", Raw('"$HEAD"'),
                  "--master-port", str(job.rdzv_port)]
    torchrun = torchrun_words(Raw('"$SKYPILOT_NUM_NODES"'), gpus // nodes, rendezvous, job.worker(paths["spec"], out))
    limit = ["timeout", "--kill-after", f"{SETTINGS.kill_after:g}", f"{job.step_timeout:g}"]
    lines += ['HEAD=$(echo "$SKYPILOT_NODE_IPS" | head -n 1)', join_words([*limit, *torchrun])]
    return "\n".join(lines) + "\n"


def task(job: EmitJob, paths: dict, gpus: int, nodes: int) -> dict:
    """One placement's SkyPilot task as data."""
    out = str(result_dir(BUCKET_MOUNT if job.bucket else paths["results"], gpus, nodes))
    per_node = gpus // nodes
    resources = ({"accelerators": f"{skypilot_accelerator(job.workload.cluster.gpu)}:{per_node}",
                  "network_tier": "best"} if job.device == "cuda" else {"cpus": f"{per_node}+"})
    doc = {"name": cluster_name(job, gpus, nodes), "num_nodes": nodes, "resources": resources, "workdir": ".",
           "envs": dict((*job.env, ("OMP_NUM_THREADS", str(job.threads()))))}
    if job.bucket:
        doc["file_mounts"] = {BUCKET_MOUNT: {"name": job.bucket, "mode": "MOUNT"}}
    doc["setup"] = _setup(job, paths)
    doc["run"] = _run(job, paths, out, gpus, nodes)
    return doc


def cluster_name(job: EmitJob, gpus: int, nodes: int) -> str:
    """A SkyPilot cluster name (letters, digits, '-'): advisor-NAME-gpusN-nodesM."""
    return f"advisor-{job.name.replace('_', '-')}-gpus{gpus}-nodes{nodes}"


def dump_yaml(header: list[str], data: dict) -> str:
    """`data` as YAML (multi-line strings as literal blocks), under comment lines, checked by
    reading it back: a file that does not parse to exactly `data` is never written."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper, value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    _Dumper.add_representer(str, _str)
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=False, width=10_000)
    text = "".join(f"{line}\n" for line in header) + body
    if yaml.safe_load(text) != data:  # pragma: no cover - a bug in the emitter, never user input
        raise RuntimeError("emitted YAML does not read back as the task it was made from")
    return text


def _header(job: EmitJob, paths: dict, gpus: int, nodes: int, file: str) -> list[str]:
    minutes = int(-(-job.step_timeout // 60))
    return [f"# advisor calibrate {job.name}: {plural(gpus, 'GPU')} over {plural(nodes, 'node')}, at most "
            f"{minutes} min. Launched by {DRIVER} beside this file, or from the folder holding",
            f"# {shell_quote(paths['spec'])}: sky launch -y -c {cluster_name(job, gpus, nodes)} {shell_quote(file)}",
            *coverage_note(job.workload_path, job.placements)]


_DRIVER_FUNCTIONS = r'''status=0
here=$(dirname "$0")
fetch() {  # CLUSTER NODES FOLDER: every node's rank files, over SkyPilot's SSH names for the cluster
  mkdir -p "$3" || return 1
  local i host
  for ((i = 0; i < $2; i++)); do
    host=$1
    [ "$i" -gt 0 ] && host=$1-worker$i
    rsync -a "$host:sky_workdir/$3/" "$3/" || return 1
  done
}
place() {  # TASK-FILE CLUSTER NODES FOLDER
  sky launch -y -c "$2" -i 15 --down "$here/$1" || { echo "advisor: $2 failed" >&2; status=1; }
  if [ -n "$4" ]; then
    fetch "$2" "$3" "$4" || { echo "advisor: could not copy $4 from $2" >&2; status=1; }
  fi
  sky down -y "$2" || status=1
}'''


def driver(job: EmitJob, paths: dict, files: list[tuple[str, int, int]]) -> str:
    """launch.sh: each task launched, waited for, its results fetched, torn down; then --collect."""
    spec = paths["spec"]
    lines = ["#!/bin/bash",
             f"# advisor calibrate {job.name}: launch each SkyPilot task beside this script in turn, wait for it,",
             "# copy every node's results home, tear the cluster down; then merge them into the calibration file.",
             f"# Run from the folder the tasks sync (workdir: .), the one holding {shell_quote(spec)}.",
             "set -uo pipefail",
             f"[ -f {shell_quote(spec)} ] || {{ echo {shell_quote(f'advisor: run this from the folder holding {spec}')}"
             " >&2; exit 2; }", _DRIVER_FUNCTIONS]
    for file, gpus, nodes in files:
        folder = "" if job.bucket else str(result_dir(paths["results"], gpus, nodes))
        lines.append(join_words(["place", file, cluster_name(job, gpus, nodes), str(nodes), folder]))
    if job.bucket:
        hint = (f"advisor: the results are in the bucket {job.bucket}: copy its gpus*-nodes* folders into a "
                f"folder here, then run advisor calibrate {spec} --collect FOLDER")
        lines.append(f"echo {shell_quote(hint)}")
    else:
        lines.append(f"advisor calibrate {shell_quote(spec)} --collect {shell_quote(paths['results'])} || status=1")
    lines.append('exit "$status"')
    return "\n".join(lines) + "\n"


class SkyPilot:
    name = "skypilot"
    help = "one SkyPilot task YAML per placement and launch.sh, which runs them and collects (needs --out-dir)"

    def emit(self, job: EmitJob) -> list[EmittedFile]:
        paths = _synced(job)
        files, placed = [], []
        for gpus, nodes in job.placements:
            name = f"{cluster_name(job, gpus, nodes)}.yaml"
            text = dump_yaml(_header(job, paths, gpus, nodes, name), task(job, paths, gpus, nodes))
            files.append(EmittedFile(name, text))
            placed.append((name, gpus, nodes))
        return [*files, EmittedFile(DRIVER, driver(job, paths, placed), executable=True)]
