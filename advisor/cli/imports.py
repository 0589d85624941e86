"""`advisor import nccl-tests|torchtitan`: bring your own numbers into a calibration file.

Thin skin over advisor.imports. What was imported goes to stderr, one line per table or log;
`wrote FILE` last. Exit status 0 done, 2 bad input (not that tool's output: the file and line).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from advisor.cli.app import AdvisorTyper, app
from advisor.cli.options import WorkloadArg, output_path

imports_app = AdvisorTyper(  # its commands get -q like every other
    help="Import measurements made with other tools (nccl-tests, torchtitan).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(imports_app, name="import")

LogsArg = Annotated[list[Path], typer.Argument(help="Log files (stdout of the tool).", show_default=False)]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Calibration file to create or add to (default: "
        "calibrations/NAME_nccl-tests.toml or NAME_torchtitan.toml).",
        parser=output_path("--out"),
    ),
]


def _command() -> str | None:
    return shlex.join(["advisor", *sys.argv[1:]]) if sys.argv and sys.argv[0] else None


def _report(notes: list[str], path: Path) -> None:
    from advisor.cli.output import current

    for line in notes:
        current().note(line)
    current().note(f"wrote {path}")


@imports_app.command("nccl-tests")
def nccl_tests_command(
    workload: WorkloadArg,
    logs: LogsArg,
    out: OutOpt = None,
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes", help="Nodes the run spanned (default: distinct hosts in the '# Rank N ... on HOST' lines)."
        ),
    ] = None,
    op: Annotated[
        str | None,
        typer.Option(
            "--op",
            help="all_reduce, reduce_scatter or all_gather, when the log "
            "does not say (default: from the log, its file name, or its busbw factor).",
        ),
    ] = None,
) -> None:
    """nccl-tests output (all_reduce_perf, reduce_scatter_perf, all_gather_perf) -> [[collectives]]."""
    from advisor.imports.nccl_tests import import_nccl_tests

    _, path, notes = import_nccl_tests(workload, logs, out, nodes, op, _command())
    _report(notes, path)


@imports_app.command("torchtitan")
def torchtitan_command(
    workload: WorkloadArg,
    logs: LogsArg,
    gpus: Annotated[str, typer.Option("--gpus", help="Placement the logged job ran on: N@M (N GPUs over M nodes).")],
    out: OutOpt = None,
) -> None:
    """torchtitan training logs (step/loss/memory/tps lines) -> one [[runs]] entry per log."""
    from advisor.imports.torchtitan import import_torchtitan

    _, path, notes = import_torchtitan(workload, logs, gpus, out, _command())
    _report(notes, path)
