"""Option and argument aliases shared by every command, defined once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer


def output_path(option: str) -> Callable[[str], Path]:
    """The parser of an option naming a file to write: an empty value is refused naming the
    option (typer reads '' as '.', and the writer said only `.: is a directory`)."""

    def parse(text: str) -> Path:
        from advisor.errors import InputError

        if not text.strip():
            raise InputError.at(".", "", f"is a directory: an empty {option} reads as '.', the current folder; "
                                f"give {option} the path of a file to write, or leave it out for its default")
        return Path(text)

    return parse


WorkloadArg = Annotated[Path, typer.Argument(help="Workload spec (TOML).", show_default=False)]
OptionalWorkloadArg = Annotated[
    Path | None,
    typer.Argument(help="Workload spec (TOML); default: every workload in workloads/ (one without calibration data "
                   "from the model's prior, marked uncalibrated).", show_default=False),
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
                                              parser=output_path("--plot"))]
GpusOpt = Annotated[
    str | None,
    typer.Option("--gpus", help="Comma-separated GPU counts; N@M means N GPUs over M nodes (e.g. 16,64,64@16)."),
]
ModelOpt = Annotated[
    str,
    typer.Option("--model", help="Model family: auto (chosen by leave-one-count-out CV), amdahl, ernest, topology, "
                                  "topology-ring."),
]
