"""Option and argument aliases shared by every command, defined once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from advisor.errors import InputError


def quantity(flag: str, value: str | None, parse: Callable[[object], float]) -> float | None:
    """An option's text read with the spec's unit grammar (advisor.units: `--budget 20k`,
    `--deadline "3 days"`); a bad value is one line naming the option, exit 2."""
    if value is None:
        return None
    try:
        return parse(value)
    except ValueError as error:
        raise InputError.at(flag, "", str(error), value) from None


def complete_workload(incomplete: str) -> list[str]:
    """Shell completion of a workload argument: the .toml specs (and folders) starting with what is
    typed, and with nothing typed the specs in workloads/."""
    typed = Path(incomplete or "workloads/")
    folder, stem = (typed, "") if incomplete.endswith("/") or not incomplete else (typed.parent, typed.name)
    if not folder.is_dir():
        return []
    shown = [p for p in sorted(folder.iterdir()) if p.name.startswith(stem) and (p.is_dir() or p.suffix == ".toml")]
    prefix = "" if folder == Path(".") and not incomplete.startswith("./") else f"{folder}/"
    return [f"{prefix}{p.name}{'/' if p.is_dir() else ''}" for p in shown]


def complete_tier(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of --tier: the tier names of the workload on the command line (of every spec
    in workloads/ when none is given or it does not load)."""
    from advisor.errors import InputError
    from advisor.spec import load_workload

    given = ctx.params.get("workload")
    paths = [Path(given)] if given else sorted(Path("workloads").glob("*.toml"))
    names: list[str] = []
    for path in paths:
        try:
            names += [t.name for t in load_workload(path).tiers]
        except (InputError, OSError):
            continue
    return [n for n in dict.fromkeys(names) if n.startswith(incomplete)]

def output_path(option: str, folder: bool = False, suffixes: tuple[str, ...] = ()) -> Callable[[str], Path]:
    """The parser of an option naming a file (or with `folder`, a folder) to write: an empty or
    blank value is refused naming the option. typer reads '' as '.': the writer said only `.: is a
    directory`, and a folder option (`--out-dir ''`, `--results ''`) silently wrote into the
    current folder; check_option_values never sees the text, only the Path. With `suffixes` (the
    format written, first the usual one) a file named for another format is refused: `--plot x.html`
    wrote a PNG under that name. A name without a suffix (`--plot /dev/null`) is left to the writer."""

    def parse(text: str) -> Path:
        from advisor.errors import InputError

        if text.strip() and suffixes and Path(text).suffix and Path(text).suffix.lower() not in suffixes:
            raise InputError.at(option, "", f"writes {suffixes[0][1:].upper()} only: give a path ending in "
                                f"{' or '.join(suffixes)}", text)
        if text.strip():
            return Path(text)
        if folder:
            raise InputError.at(option, "", "empty value: an empty folder reads as '.', the current folder; give "
                                "one (`.` if you mean it), or leave the option out for its default", text)
        raise InputError.at(".", "", f"is a directory: an empty {option} reads as '.', the current folder; "
                            f"give {option} the path of a file to write, or leave it out for its default")

    return parse


WorkloadArg = Annotated[
    Path, typer.Argument(help="Workload spec (TOML).", show_default=False, autocompletion=complete_workload)
]
OptionalWorkloadArg = Annotated[
    Path | None,
    typer.Argument(help="Workload spec (TOML); default: every workload in workloads/ (one without calibration data "
                   "from the model's prior, marked uncalibrated).", show_default=False,
                   autocompletion=complete_workload),
]
CalibrationOpt = Annotated[
    list[Path] | None,
    typer.Option("--calibration", help="Calibration file; repeat to merge several, or add --measurements "
                 "(default: the workload's checked-in calibrations/NAME*.toml)."),
]
BacktestCalibrationOpt = Annotated[
    list[Path] | None,
    typer.Option("--calibration", help="Calibration file; repeat to merge several, or add --measurements "
                 "(backtest needs one of the two: it scores a fit on measurements you name)."),
]
MeasurementsOpt = Annotated[
    Path | None,
    typer.Option("--measurements", help="Measurement CSV (gpus, nodes, step_seconds or throughput, global_batch)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout and nothing else there.")]
PlotOpt = Annotated[Path | None, typer.Option("--plot", help="Write a PNG plot to this path.",
                                              parser=output_path("--plot", suffixes=(".png",)))]
GpusOpt = Annotated[
    str | None,
    typer.Option("--gpus", help="Comma-separated GPU counts; N@M means N GPUs over M nodes (e.g. 16,64,64@16)."),
]
ModelOpt = Annotated[
    str,
    typer.Option("--model", help="Model family: auto (chosen by leave-one-count-out CV), amdahl, ernest, topology, "
                                  "topology-ring."),
]
WideOpt = Annotated[
    bool, typer.Option("--wide", help="Show every table column (the default set fits 80 columns).")
]
HtmlOpt = Annotated[
    Path | None,
    typer.Option("--html", help="Write a self-contained HTML report (figures, table, sentences, spec and "
                 "calibration provenance) to this path.", show_default=False,
                 parser=output_path("--html", suffixes=(".html", ".htm"))),
]
