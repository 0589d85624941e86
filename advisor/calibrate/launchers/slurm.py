"""`--emit slurm`: one sbatch script that runs every placement as its own job step.

Meant to be submitted from the folder the workload path is relative to (`sbatch` from the same
folder you ran advisor in): paths are relative to `$SLURM_SUBMIT_DIR` (or `--root DIR`), never
this machine's absolute paths; the job log goes to `slurm-advisor-NAME-%j.out` in the submit
folder, which exists when Slurm opens it (Slurm creates no folders for --output).

What a site admin looks for (Slurm sbatch/srun man pages; torchtitan's multinode_trainer.slurm):
- whole nodes, said so: `--exclusive`, `--mem=0` (all of each node's memory), `--ntasks-per-node=1`
  (one torchrun per node) with `--cpus-per-task` = ranks per node x `--cpus-per-rank`, and the
  same `--cpus-per-task` on every `srun`: since Slurm 22.05 srun no longer inherits
  SLURM_CPUS_PER_TASK, and on clusters whose default is one CPU per task `srun torchrun
  --nproc-per-node 8` would pin 8 ranks to one core (Lightning-AI/pytorch-lightning#18650);
- `OMP_NUM_THREADS` exported (torchrun otherwise sets 1 and warns);
- the rendezvous host as an IP address, asked of the head node itself (`srun -w HEAD hostname
  --ip-address`, as torchtitan's script does): some sites resolve no node names between nodes;
- each placement one step `srun --nodes M --ntasks M --ntasks-per-node 1 --time MIN torchrun ...`
  with its own limit (`--timeout`); a failed or timed-out step is reported and the next one runs;
- at the end `python -m advisor calibrate SPEC --collect RESULTS` merges what finished into the
  calibration file (the python that runs the worker has advisor); the script exits 1 if anything
  failed. `--time` defaults to the steps' limits summed plus 10 min.
The NCCL/gloo settings set in the emitting shell (settings.passed_env) and `--env` pairs are
exported; `--setup SCRIPT` (your venv or modules) is sourced first.
"""

from __future__ import annotations

import re
from pathlib import Path

from advisor.calibrate.launchers.job import EmitJob, EmittedFile, coverage_note
from advisor.calibrate.launchers.quoting import Raw, Word, concat, join_words, relative_path, shell_quote
from advisor.calibrate.launchers.torchrun import c10d, torchrun_words
from advisor.calibrate.settings import SETTINGS
from advisor.errors import InputError
from advisor.text import plural

_SLURM_NAME = re.compile(r"[A-Za-z0-9_.,+@%-]+")
#: sbatch's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (the fields ASCII digits).
_SLURM_TIME = re.compile(r"(?:(\d+)-(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?|(\d+)(?::(\d{2}))?(?::(\d{2}))?)", re.ASCII)


def slurm_minutes(text: str, step_minutes: int) -> float:
    """Minutes of a Slurm `--time` (`90`, `01:30:00`, `1-12`): each field within its range (`12:99:99` and
    `1-99` were written into #SBATCH as given and refused by sbatch on the cluster), above zero (`0` is
    sbatch's "no limit"), and at least one job step's own limit (`--timeout`): a shorter allocation ends
    before its first step may. InputError naming --time otherwise."""
    m = _SLURM_TIME.fullmatch(text)
    if not m:
        raise InputError.at("--time", "", "expected a Slurm time such as 90, 01:30:00 or 1-00:00:00", text)
    days, d_hours, d_min, d_sec, lead, second, third = (int(g) if g is not None else None for g in m.groups())
    if days is not None:
        parts, limits = (d_hours, d_min or 0, d_sec or 0), (23, 59, 59)
    elif third is not None:
        parts, limits = (lead, second, third), (None, 59, 59)
    else:
        parts, limits = (0, lead, second or 0), (None, None, 59)
    if any(limit is not None and part > limit for part, limit in zip(parts, limits, strict=True)):
        raise InputError.at("--time", "", "a field out of range: hours 0-23 after days, minutes and seconds "
                            "0-59 after a larger unit", text)
    minutes = (days or 0) * 1440 + parts[0] * 60 + parts[1] + parts[2] / 60
    if minutes < step_minutes:
        raise InputError.at("--time", "", f"shorter than one job step's limit ({step_minutes} min, from --timeout): "
                            "the allocation would end before its first placement may", text)
    return minutes

#: A GPU job whose torch cannot see the GPU would fail in every step: say so once, first.
TORCH_CHECK = ("import sys, torch; sys.exit(0 if torch.cuda.is_available() else \"advisor: torch \" + "
               "torch.__version__ + \" sees no GPU (a CUDA build this driver cannot run?)\")")


def _hms(seconds: float) -> str:
    s = int(-(-seconds // 1))
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _under_root(path: Path | str) -> Word:
    rel = relative_path(Path(path))
    return rel if rel.startswith("/") else concat(Raw('"$ROOT"/'), rel)


def _sbatch_lines(job: EmitJob, total: str) -> list[str]:
    """#SBATCH directives. sbatch reads these lines itself, not through a shell: values it would
    split (spaces, quotes) are refused rather than quoted."""
    max_nodes = max(nodes for _, nodes in job.placements)
    cpus = max(job.cpus_per_node(gpus, nodes) for gpus, nodes in job.placements)
    sb = [f"--job-name=advisor-calibrate-{job.name}", f"--nodes={max_nodes}", "--ntasks-per-node=1",
          f"--cpus-per-task={cpus}", "--exclusive", "--mem=0"]
    if job.device == "cuda":
        sb.append(f"--gpus-per-node={max(gpus // nodes for gpus, nodes in job.placements)}")
    sb.append(f"--time={total}")
    for flag, value in (("partition", job.partition), ("account", job.account)):
        if value is not None:
            if not _SLURM_NAME.fullmatch(value):
                raise InputError.at(f"--{flag}", "", "expected a Slurm name (letters, digits, . _ - , + @ %)", value)
            sb.append(f"--{flag}={value}")
    sb.append(f"--output=slurm-advisor-{job.name}-%j.out")
    return [f"#SBATCH {shell_quote(x)}" for x in sb]


def _step(job: EmitJob, results: Word, gpus: int, nodes: int, minutes: int) -> str:
    """One placement as one job step with its own time limit; a failure is reported, not fatal."""
    worker = job.worker(_under_root(job.workload_path), concat(results, f"/gpus{gpus}-nodes{nodes}"))
    rendezvous = c10d(Raw(f'"$head_ip:{job.rdzv_port}"'), Raw(f'"$SLURM_JOB_ID-{gpus}-{nodes}"'))
    cmd = join_words(torchrun_words(str(nodes), gpus // nodes, rendezvous, worker))
    return (f"srun --nodes {nodes} --ntasks {nodes} --ntasks-per-node 1 --cpus-per-task "
            f"{job.cpus_per_node(gpus, nodes)} --relative 0 --time {minutes} --kill-on-bad-exit=1 {cmd} \\\n"
            f"  || {{ echo {shell_quote(f'advisor: {gpus}@{nodes} failed or timed out')} >&2; status=1; }}")


def _head_lines() -> list[str]:
    return ['head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "# the head's address as an IP, from the head itself (torchtitan's multinode_trainer.slurm)",
            'head_ip=$(srun --nodes 1 --ntasks 1 --cpus-per-task 1 -w "$head" hostname --ip-address '
            "| awk '{print $1}')",
            '[ -n "$head_ip" ] || { echo "advisor: no IP address for the head node $head" >&2; exit 1; }']


def _preamble(job: EmitJob, spec: str) -> list[str]:
    if job.time_limit is not None:
        slurm_minutes(job.time_limit, max(1, int(-(-job.step_timeout // 60))))
    total = job.time_limit or _hms(SETTINGS.allocation_seconds(len(job.placements), job.step_timeout))
    root = shell_quote(job.root) if job.root else '"${SLURM_SUBMIT_DIR:-$PWD}"'
    lines = ["#!/bin/bash", *_sbatch_lines(job, total),
             f"# advisor calibrate {job.name}: submit with sbatch from the folder {shell_quote(spec)} is relative to; "
             "the last step merges the results:",
             f"#   {job.follow_up(Path(spec), Path(relative_path(job.results)))}",
             *coverage_note(job.workload_path, job.placements),
             "set -uo pipefail", f"ROOT={root}", 'cd "$ROOT" || exit 1']
    if job.setup:
        lines.append(f". {shell_quote(_under_root(job.setup))} || exit 1")
    env = [*job.env, ("OMP_NUM_THREADS", str(job.threads()))]
    return lines + [f"export {name}={shell_quote(value)}" for name, value in env]


def slurm_script(job: EmitJob) -> str:
    """An sbatch script running every placement as its own srun job step (format: module docstring)."""
    spec = relative_path(job.workload_path)
    lines = _preamble(job, spec)
    results = _under_root(job.results)
    if job.device == "cuda":
        lines.append(f"python -c {shell_quote(TORCH_CHECK)} || exit 1")
    lines += [f"mkdir -p {shell_quote(results)} || exit 1", *_head_lines(), "status=0"]
    minutes = int(-(-job.step_timeout // 60))
    for gpus, nodes in job.placements:
        lines.append(f"# N={gpus} over {plural(nodes, 'node')}, {gpus // nodes} per node, at most {minutes} min")
        lines.append(_step(job, results, gpus, nodes, minutes))
    collect = join_words(["python", "-m", "advisor", "calibrate", _under_root(job.workload_path), "--collect",
                          results])
    lines += ["# merge every finished placement into the calibration file (calibrations/ beside the spec)",
              f"{collect} || status=1", 'exit "$status"']
    return "\n".join(lines) + "\n"


class Slurm:
    name = "slurm"
    help = "an sbatch script: one srun step per placement, results collected at the end"

    def emit(self, job: EmitJob) -> list[EmittedFile]:
        return [EmittedFile(f"calibrate-{job.name}.sbatch", slurm_script(job), executable=True)]
