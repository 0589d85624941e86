"""`advisor calibrate`: measure a workload's step time and collectives at several GPU counts.

Thin skin over advisor.calibrate (calibrate, collect, emit). Progress goes to stderr (rich), the
summary table (or the emitted commands) to stdout. Exit status: 0 done, 2 bad input (including an
output file that cannot be written or is locked by another calibration), 1 a count failed or hung
(the counts finished before it stay in the file), 130 interrupted (Ctrl-C or SIGTERM; finished
counts stay in the file, `--resume` continues).
"""

from __future__ import annotations

import shlex
import signal
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from advisor.calibrate.launchers import LAUNCHERS
from advisor.calibrate.settings import SETTINGS
from advisor.cli.app import app
from advisor.cli.options import GpusOpt, JsonOpt, WorkloadArg, output_path
from advisor.cli.output import current
from advisor.errors import printable

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


class Device(str, Enum):  # noqa: UP042 -- StrEnum would change str() of members
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


#: --emit's choices: the launchers registry (advisor.calibrate.launchers.LAUNCHERS).
Emit = Enum("Emit", {name: name for name in LAUNCHERS}, type=str)


def _say(console, text: str) -> None:
    """One plain line on stderr: no rich markup (paths and errors hold brackets), no wrapping, what it
    quotes escaped (advisor.errors.printable: a path or host name cannot split it or drive the terminal)."""
    console.print(printable(text), highlight=False, markup=False, soft_wrap=True)


def _terminate_as_interrupt(signum, frame):  # SIGTERM: stop like Ctrl-C, cleaning up the ranks
    raise KeyboardInterrupt


@app.command(name="calibrate")
def calibrate_command(
    workload: WorkloadArg,
    gpus: GpusOpt = None,
    device: Annotated[Device, typer.Option("--device",
        help="cuda (NCCL), cpu (gloo ranks stand in for GPUs), or auto.")] = Device.auto,
    steps: Annotated[int | None, typer.Option("--steps", min=1, max=100_000,
        help="Timed steps per count (default: calibration.steps).")] = None,
    warmup: Annotated[int | None, typer.Option("--warmup", min=0, max=100_000,
        help="Untimed warm-up steps (default: calibration.warmup_steps).")] = None,
    out: Annotated[Path | None, typer.Option("--out", parser=output_path("--out", suffixes=(".toml",)),
        help="Calibration file (default: calibrations/NAME_DEVICE_DATE.toml).")] = None,
    resume: Annotated[bool, typer.Option("--resume",
        help="Continue an existing --out file: skip the counts already in it.")] = False,
    timeout: Annotated[float | None, typer.Option("--timeout", min=1, max=7 * 86400,
        help=f"Seconds one count may take before its ranks are killed (with --emit: per placement, default "
             f"{SETTINGS.step_timeout:g}; collectives time out at half of it, at most "
             f"{SETTINGS.max_collective_timeout:g} s).")] = None,
    emit: Annotated[Emit | None, typer.Option("--emit", help="Write launchers for multi-node counts: " + "; ".join(
        f"{e.name}: {e.help}" for e in LAUNCHERS.values()) + ".")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out-dir", parser=output_path("--out-dir", folder=True),
        help="With --emit: write the emitted files into DIR (needed for skypilot's one file per task).")] = None,
    collect: Annotated[Path | None, typer.Option("--collect",
        help="Merge the results of emitted runs under DIR into the calibration file.")] = None,
    results: Annotated[Path | None, typer.Option("--results", parser=output_path("--results", folder=True),
        help="With --emit: folder the ranks write results to (default: advisor-results/NAME).")] = None,
    rdzv_host: Annotated[str | None, typer.Option("--rdzv-host",
        help="With --emit torchrun: node 0's address (default: this host's name).")] = None,
    rdzv_port: Annotated[int, typer.Option("--rdzv-port", min=1, max=65535,
        help="With --emit: rendezvous port on node 0 (1-65535).")] = SETTINGS.rdzv_port,
    partition: Annotated[str | None, typer.Option("--partition",
        help="With --emit slurm: #SBATCH --partition.")] = None,
    account: Annotated[str | None, typer.Option("--account", help="With --emit slurm: #SBATCH --account.")] = None,
    time_limit: Annotated[str | None, typer.Option("--time",
        help="With --emit slurm: allocation time limit (default: the per-placement --timeout limits summed "
             "+ 10 min).")] = None,
    setup: Annotated[str | None, typer.Option("--setup",
        help="With --emit slurm|skypilot: a script sourced before the runs (venv, modules).")] = None,
    root: Annotated[str | None, typer.Option("--root",
        help="With --emit slurm: folder paths are relative to on the cluster (default $SLURM_SUBMIT_DIR).")] = None,
    env: Annotated[list[str] | None, typer.Option("--env",
        help="With --emit slurm|skypilot: NAME=VALUE exported into the job (repeatable).")] = None,
    bucket: Annotated[str | None, typer.Option("--bucket",
        help="With --emit skypilot: bucket every node writes results to.")] = None,
    cpus_per_rank: Annotated[int | None, typer.Option("--cpus-per-rank", min=1, max=1024,
        help=f"With --emit: CPU cores per GPU rank (Slurm --cpus-per-task, OMP_NUM_THREADS; default "
             f"{SETTINGS.cpus_per_rank}, 1 for CPU ranks).")] = None,
    torch_cuda: Annotated[str | None, typer.Option("--torch-cuda",
        help="With --emit skypilot: install torch's CUDA build cuXYZ on the nodes (default: check the "
             "installed torch sees the GPU).")] = None,
    notes: Annotated[str | None, typer.Option("--notes",
        help="Text for the file's provenance notes (e.g. other load on the host).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run real torch.distributed training steps and collective probes at each GPU count."""
    from rich.console import Console

    from advisor.errors import InputError

    err = Console(stderr=True)
    if emit is not None and collect is not None:
        raise InputError.at("--emit", "", "use --emit (write the launchers) or --collect (merge their results), "
                            "not both")
    command = shlex.join(["advisor", *sys.argv[1:]]) if sys.argv and sys.argv[0] else None
    texts = {"--rdzv-host": rdzv_host, "--partition": partition, "--account": account, "--time": time_limit,
             "--setup": setup, "--root": root, "--bucket": bucket, "--out-dir": out_dir}
    _check_launcher_options(emit.value if emit is not None else None, {
        **texts, "--env": env or None, "--torch-cuda": torch_cuda, "--results": results,
        "--cpus-per-rank": cpus_per_rank})
    if emit is not None:
        _emit(emit.value, workload, gpus, device, results, out_dir, texts, steps=steps, warmup=warmup,
              rdzv_host=rdzv_host, rdzv_port=rdzv_port, step_timeout=timeout or SETTINGS.step_timeout,
              partition=partition, account=account, time_limit=time_limit, setup=setup, root=root, env=env,
              bucket=bucket, cpus_per_rank=cpus_per_rank, torch_cuda=torch_cuda)
        return
    if collect is not None:
        from advisor.calibrate import collect as collect_results

        cal, path = collect_results(workload, collect, out, notes=notes, command=command,
                                    on_event=lambda kind, text: current().quiet or _say(err, text))
        _summary(workload, cal, path, err)
        return
    _check_local(workload, gpus, device, out, resume)
    cal, path = _run_local(err, workload, gpus, device.value, steps, warmup, out, resume, timeout, notes, command)
    _summary(workload, cal, path, err)


#: The launchers that read each launcher option (every launcher where unnamed); the others ignored it.
_LAUNCHER_OPTIONS = {"--rdzv-host": ("torchrun",), "--partition": ("slurm",), "--account": ("slurm",),
                     "--time": ("slurm",), "--root": ("slurm",), "--setup": ("slurm", "skypilot"),
                     "--bucket": ("skypilot",), "--torch-cuda": ("skypilot",)}


def _check_launcher_options(emit: str | None, given: dict) -> None:
    """A launcher option the run would ignore is refused naming it: `--time 5` beside `--emit torchrun`, or
    any --emit option without --emit (a local run), printed or measured as if it had not been given."""
    from advisor.calibrate.launchers.quoting import check_text
    from advisor.errors import InputError

    for option, value in given.items():  # a line-ending character is named first, whichever the launcher
        for item in value if isinstance(value, list) else [] if value is None else [value]:
            check_text(option, item)
    for option, value in given.items():
        readers = _LAUNCHER_OPTIONS.get(option, tuple(LAUNCHERS))
        if value is not None and emit not in readers:
            what = f"--emit {emit}" if emit is not None else "a local run or --collect"
            raise InputError.at(option, "", f"only with --emit {'|'.join(readers)}: {what} does not read it", value)


def _check_local(workload: Path, gpus: str | None, device: Device, out: Path | None, resume: bool) -> None:
    """The options of a local run, checked before looking for torch (a planner's install has none):
    the spec, --gpus as counts on this machine, --out (advisor.calibrate.session.check_out); then
    torch, or how to install it."""
    import importlib.util

    from advisor.calibrate.session import check_out, local_counts
    from advisor.errors import InputError
    from advisor.spec import load_workload

    w = load_workload(workload)
    local_counts(w, gpus, "cpu" if device == Device.cpu else "cuda", None)
    if out is not None:
        check_out(w, out, resume, device.value)
    if importlib.util.find_spec("torch") is None:
        raise InputError.at("calibrate", "", "needs torch, which is not installed: pip install -e '.[calibrate]' "
                            "(from the advisor checkout) "
                            "(CPU-only machines: pip install torch==2.13.0); --emit needs no torch here")


def _run_local(err, workload, gpus, device, steps, warmup, out, resume, timeout, notes, command):
    """calibrate() with progress on stderr; a failed count exits 1, Ctrl-C or SIGTERM 130."""
    from advisor.calibrate import CalibrationFailed, CalibrationInterrupted, calibrate

    quiet = current().quiet  # -q: no spinner, no progress lines; failures still print
    status = err.status("starting") if err.is_terminal and not quiet else None

    def on_event(kind: str, text: str) -> None:
        if kind == "progress":
            if status is not None:
                status.update(text)
            return
        if not quiet:
            _say(err, text)

    # Ctrl-C and SIGTERM both stop the run cleanly (ranks killed, finished counts kept). SIGINT's
    # handler is installed explicitly: a shell starts background jobs with SIGINT ignored, and
    # `kill -INT` must still stop a calibration started that way.
    previous = signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if status is not None:
            status.start()
        return calibrate(workload, gpus, device, steps, warmup, out, resume, timeout, notes, command, on_event)
    except CalibrationFailed as exc:
        if status is not None:
            status.stop()
        _say(err, f"advisor calibrate: {exc}")
        kept = ", ".join(f"N={n}" for n in exc.saved) or "none"
        _say(err, f"finished counts kept in {exc.out}: {kept}; fix the cause and rerun with --resume")
        raise SystemExit(EXIT_FAILED) from None
    except KeyboardInterrupt as exc:
        if status is not None:
            status.stop()
        text = exc.message() if isinstance(exc, CalibrationInterrupted) else "interrupted before any count started"
        _say(err, f"advisor calibrate: {text}")
        raise SystemExit(EXIT_INTERRUPTED) from None
    finally:
        if status is not None:
            status.stop()
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _emit(name: str, workload: Path, gpus: str | None, device: Device, results: Path | None,
          out_dir: Path | None, texts: dict, env: list[str] | None, steps: int | None, warmup: int | None,
          **fields) -> None:
    """Emit launcher `name`'s files: into --out-dir, or one file on stdout; --json: one document."""
    from advisor.calibrate.launchers import emit, write_files
    from advisor.calibrate.launchers.job import emit_job, job_environment, parse_env
    from advisor.calibrate.session import check_warmup
    from advisor.errors import InputError
    from advisor.spec import load_workload

    w = load_workload(workload)
    target = "cpu" if device == Device.cpu else "cuda"  # emitted runs land on the cluster's GPUs unless --device cpu
    warmups = warmup if warmup is not None else w.calibration.warmup_steps
    check_warmup(target, warmups, "--warmup" if warmup is not None else "calibration.warmup_steps")
    job = emit_job(w, workload, gpus, target, results, texts,
                   steps=steps if steps is not None else w.calibration.steps, warmup=warmups,
                   env=job_environment(parse_env(env)), **fields)
    files = emit(name, job)
    if out_dir is None and len(files) > 1:
        raise InputError.at("--out-dir", "", f"--emit {name} writes {len(files)} files ({files[0].name}, ...): "
                            "pass --out-dir DIR")
    paths = write_files(files, out_dir) if out_dir is not None else []
    document = {"launcher": name, "placements": [{"gpus": g, "nodes": n} for g, n in job.placements],
                "files": [{"path": str(p), "executable": f.executable} for p, f in zip(paths, files, strict=False)],
                "collect": job.follow_up()}
    if out_dir is None:
        document["text"] = files[0].text
    current().result(document, lambda: sys.stdout.write(files[0].text) if out_dir is None else None)
    for p in paths:
        current().note(f"wrote {p}")


def _summary(workload_path: Path, cal, path: Path, err) -> None:
    from advisor.calibrate import summary
    from advisor.cli.nccl_table import print_calibration
    from advisor.spec import load_workload

    w = load_workload(workload_path)
    print_calibration(w, cal, path, summary(cal, w))  # busbw per op; probes in nccl-tests' columns; --json
    current().note(f"wrote {path}")
