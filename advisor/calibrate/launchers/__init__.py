"""Launchers of calibration runs: `local` (ranks on this machine, advisor.calibrate.launchers.local)
and the emitters that `advisor calibrate --emit` offers, one registry (`LAUNCHERS`) whose names
are `--emit`'s choices:

    torchrun  per-node torchrun lines (launchers.torchrun)
    slurm     an sbatch script, one srun step per placement, --collect at the end (launchers.slurm)
    skypilot  one task YAML per placement and launch.sh (launchers.skypilot)

An emitter takes one checked `EmitJob` (launchers.job) and returns `EmittedFile`s; `write_files`
puts them in `--out-dir` (each atomically, all made before any is written); without `--out-dir`
a single file is printed. Every word goes through one quoting (launchers.quoting).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from advisor.calibrate.launchers.job import EmitJob, EmittedFile
from advisor.calibrate.launchers.skypilot import SkyPilot
from advisor.calibrate.launchers.slurm import Slurm
from advisor.calibrate.launchers.torchrun import Torchrun
from advisor.errors import InputError


class Emitter(Protocol):
    name: str
    help: str

    def emit(self, job: EmitJob) -> list[EmittedFile]: ...


LAUNCHERS: dict[str, Emitter] = {e.name: e for e in (Torchrun(), Slurm(), SkyPilot())}


def emit(name: str, job: EmitJob) -> list[EmittedFile]:
    return LAUNCHERS[name].emit(job)


def write_files(files: list[EmittedFile], out_dir: Path) -> list[Path]:
    """Every file into `out_dir` (created), each written whole or not at all (fileio.atomic_write_text)."""
    import os

    from advisor.fileio import atomic_write_text, check_output_target

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError.at("--out-dir", "", f"cannot create the folder: {exc.strerror}", str(out_dir)) from None
    for f in files:  # a target no file can replace (a folder, a device) stops the emit before any write
        check_output_target(out_dir / f.name)
    paths = []
    for f in files:
        path = out_dir / f.name
        atomic_write_text(path, f.text)
        if f.executable:  # executable wherever it is readable (the mode atomic_write_text gave it)
            mode = os.stat(path).st_mode
            os.chmod(path, mode | (mode & 0o444) >> 2)
        paths.append(path)
    return paths


__all__ = ["LAUNCHERS", "EmitJob", "EmittedFile", "Emitter", "emit", "write_files"]
