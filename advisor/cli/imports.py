"""`advisor import nccl-tests|torchtitan`: bring your own numbers into a calibration file.

Thin skin over advisor.imports. What was imported goes to stderr, one line per table or log;
`wrote FILE` last; with `--json` stdout holds one strict JSON document (the file written, the notes,
and what the file now holds: its collectives in nccl-tests' columns, or its runs). Exit status 0
done, 2 bad input (not that tool's output: the file and line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor.cli.app import AdvisorTyper, app
from advisor.cli.options import JsonOpt, WorkloadArg, output_path
from advisor.cli.output import command_line

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
        parser=output_path("--out", suffixes=(".toml",)),
    ),
]


def _report(notes: list[str], path: Path, cal, tool: str) -> None:
    from advisor.cli.nccl_table import probe_rows
    from advisor.cli.output import current

    for line in notes:
        current().note(line)
    current().note(f"wrote {path}")
    if current().json:
        held = ({"collectives": probe_rows(cal)} if tool == "nccl-tests"
                else {"runs": [run.model_dump(mode="json") for run in cal.runs]})
        current().result({"workload": cal.workload, "tool": tool, "file": str(path), "notes": notes, **held})


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
    as_json: JsonOpt = False,
) -> None:
    """nccl-tests output (all_reduce_perf, reduce_scatter_perf, all_gather_perf) -> [[collectives]]."""
    from advisor.imports.nccl_tests import import_nccl_tests

    cal, path, notes = import_nccl_tests(workload, logs, out, nodes, op, command_line())
    _report(notes, path, cal, "nccl-tests")


@imports_app.command("torchtitan")
def torchtitan_command(
    workload: WorkloadArg,
    logs: LogsArg,
    gpus: Annotated[str, typer.Option("--gpus", help="Placement the logged job ran on: N@M (N GPUs over M nodes).")],
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """torchtitan training logs (step/loss/memory/tps lines) -> one [[runs]] entry per log."""
    from advisor.imports.torchtitan import import_torchtitan

    cal, path, notes = import_torchtitan(workload, logs, gpus, out, command_line())
    _report(notes, path, cal, "torchtitan")
