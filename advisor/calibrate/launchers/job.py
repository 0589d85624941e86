"""What every emitter is given: one checked `EmitJob` (placements, paths, scheduler fields), and
what it gives back: `EmittedFile`s.

Every text option is checked here, at the boundary, naming the option (`quoting.check_text`):
a control or line-separator character in `--results`, `--setup`, `--root`, `--env`,
`--rdzv-host`, ... or in the workload file's name exits 2 before anything is emitted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from advisor.calibrate.launchers.quoting import Word, check_text, join_words, relative_path
from advisor.calibrate.settings import SETTINGS
from advisor.errors import InputError
from advisor.placement import check_layout_splits, check_placement, parse_placements
from advisor.spec import Workload
from advisor.text import plural

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TORCH_CUDA = re.compile(r"cu\d{3}")
#: What torchrun's `--rdzv-endpoint HOST:PORT` can name as HOST: a host name or IPv4 address (letters,
#: digits, '-', '_' and dots, at most 253 characters: RFC 1123, with the '_' some clusters' names hold), or an
#: IPv6 address in brackets (`[fe80::1]`: without them its colons run into the port's).
_HOST = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?\]")


@dataclass(frozen=True)
class EmittedFile:
    """One emitted file: its name inside `--out-dir`, its text, whether it is a script to run."""

    name: str
    text: str
    executable: bool = False


@dataclass(frozen=True)
class EmitJob:
    """Everything an emitter needs, checked (build it with `emit_job`)."""

    workload: Workload
    workload_path: Path
    placements: list[tuple[int, int]]
    results: Path
    device: str
    """The cluster's device (cuda or cpu), not this machine's."""
    steps: int
    warmup: int
    rdzv_host: str | None = None
    rdzv_port: int = SETTINGS.rdzv_port
    step_timeout: float = SETTINGS.step_timeout
    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None
    setup: str | None = None
    """A script sourced before the runs (venv activation, module loads), relative to the root."""
    root: str | None = None
    """Folder paths are relative to on the cluster (default $SLURM_SUBMIT_DIR)."""
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """NAME=VALUE pairs for the job: the passed NCCL/gloo settings, then --env (checked)."""
    bucket: str | None = None
    cpus_per_rank: int | None = None
    torch_cuda: str | None = None
    """SkyPilot: the CUDA build of torch to install (`cu126`: download.pytorch.org/whl/cu126)."""

    @property
    def name(self) -> str:
        return self.workload.name

    def threads(self) -> int:
        return SETTINGS.threads(self.device, self.cpus_per_rank)

    def cpus_per_node(self, gpus: int, nodes: int) -> int:
        return gpus // nodes * self.threads()

    def collective_timeout(self) -> float:
        return SETTINGS.collective_timeout(self.step_timeout)

    def worker(self, workload: Word, results: Word) -> list[Word]:
        """`-m advisor.calibrate.worker ...`: the same on every launcher, collectives bounded."""
        return ["-m", "advisor.calibrate.worker", "--workload", workload, "--results", results,
                "--device", self.device, "--steps", str(self.steps), "--warmup", str(self.warmup),
                "--collective-timeout", f"{self.collective_timeout():g}"]

    def follow_up(self, workload: Path | None = None, results: Path | None = None) -> str:
        """The command that merges the results (every word quoted)."""
        spec = workload if workload is not None else self.workload_path
        return join_words(["advisor", "calibrate", str(spec), "--collect", str(results or self.results)])


def emit_placements(w: Workload, gpus: str | None) -> list[tuple[int, int]]:
    """(gpus, nodes) to emit: --gpus (N or N@M; M defaults to filling nodes), else the spec's
    calibration counts that need more than one node. Each node runs the same number of ranks."""
    if gpus is None:
        placements = [(n, w.nodes(n)) for n in w.calibration.gpus if w.nodes(n) > 1]
        if not placements:
            raise InputError.at(
                w.source or "<spec>", "calibration.gpus",
                f"every count fits in one node of {w.cluster.gpus_per_node} GPUs: calibrate locally, "
                "or pass --gpus N@NODES", list(w.calibration.gpus))
        for n, nodes in placements:  # the one placement rule, as --gpus gets it from parse_placements
            check_placement(n, nodes, w.cluster.gpus_per_node, f"{w.source or '<spec>'}: calibration.gpus", n)
        check_layout_splits(w, placements, f"{w.source or '<spec>'}: calibration.gpus", list(w.calibration.gpus))
        return placements
    placements = parse_placements(gpus, w.cluster.gpus_per_node, keep_repeats=True)  # refuses uneven placements (8@3)
    if len(set(placements)) != len(placements):
        raise InputError.at("--gpus", "", "placements must be unique (each writes its own result folder)", gpus)
    for n, nodes in placements:  # as calibration.gpus is checked: no run larger than the job may rent
        if n > w.cluster.max_gpus:  # (--gpus 1000000 wrote 250,000 node lines for minutes)
            raise InputError.at("--gpus", "", f"{n}@{nodes} exceeds cluster.max_gpus ({w.cluster.max_gpus}) of "
                                f"{w.source or 'the spec'}: calibrate at counts the job may rent", gpus)
    check_layout_splits(w, placements, "--gpus", gpus)
    return placements


def result_dir(root: Path | str, gpus: int, nodes: int) -> Path:
    return Path(root) / f"gpus{gpus}-nodes{nodes}"


def coverage_note(workload_path: Path, placements: list[tuple[int, int]]) -> list[str]:
    """A comment when the emitted runs cross nodes at fewer than 2 node counts: with one node
    (calibrated locally) that is fewer than the 3 node counts the inter-node terms need."""
    multi = sorted({nodes for _, nodes in placements if nodes > 1})
    if len(multi) >= 2:
        return []
    crossing = (f"cross nodes at {plural(len(multi), 'node count')} {multi}" if multi
                else "stay within one node: none crosses nodes")
    return [f"# note: these runs {crossing}; "
            "measuring how the inter-node cost grows needs 3+ node counts (1, 2, 3+):",
            f"#   {join_words(['advisor', 'plan-calibration', relative_path(workload_path)])} suggests placements"]


def parse_env(items: list[str] | None) -> tuple[tuple[str, str], ...]:
    """--env NAME=VALUE pairs, checked: a shell name, each name once, a value with no line-ending character."""
    out = []
    for item in items or []:
        name, sep, value = check_text("--env", item).partition("=")
        if not sep:
            raise InputError.at("--env", "", "expected NAME=VALUE", item)
        if not _ENV_NAME.fullmatch(name):
            raise InputError.at("--env", "", "expected NAME=VALUE with NAME of letters, digits and _", name)
        if any(name == seen for seen, _ in out):  # `--env A=1 --env A=2` set A=2 without a word
            raise InputError.at("--env", "", f"{name} given more than once: the last value would silently win; "
                                "give each variable once", item)
        out.append((name, value))
    return tuple(out)


def job_environment(extra: tuple[tuple[str, str], ...] = ()) -> tuple[tuple[str, str], ...]:
    """SETTINGS.passed_env set in this process's environment, then the --env pairs (the later wins)."""
    pairs = {k: check_text(k, os.environ[k]) for k in SETTINGS.passed_env if os.environ.get(k)}
    for name, value in extra:
        pairs.pop(name, None)
        pairs[name] = value
    return tuple(pairs.items())


def emit_job(w: Workload, workload_path: Path, gpus: str | None, device: str, results: Path | None,
             texts: dict[str, str | None], **fields) -> EmitJob:
    """An EmitJob after checking every text option (`texts`: option name -> value) and the file name."""
    check_text("WORKLOAD (the file name)", workload_path)
    for option, value in texts.items():
        if value is not None and not str(value):
            raise InputError.at(option, "", "empty value; leave the option out for its default", value)
        if value is not None:
            check_text(option, value)
    if results is not None:
        check_text("--results", results)
    host = fields.get("rdzv_host")
    if host is not None and str(host) and not _HOST.fullmatch(host):
        raise InputError.at("--rdzv-host", "", "expected node 0's host name or address (letters, digits, '-', '_', "
                            "'.'; an IPv6 address in brackets, [fe80::1]): torchrun reads it as HOST in HOST:PORT, "
                            "and every node would fail to reach it", host)
    torch_cuda = fields.get("torch_cuda")
    if torch_cuda is not None and not _TORCH_CUDA.fullmatch(torch_cuda):
        raise InputError.at("--torch-cuda", "", "expected a CUDA build of torch such as cu126 (the index "
                            "download.pytorch.org/whl/cu126)", torch_cuda)
    return EmitJob(workload=w, workload_path=workload_path, placements=emit_placements(w, gpus), device=device,
                   results=results if results is not None else SETTINGS.results_root(w.name), **fields)
