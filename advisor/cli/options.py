"""Option and argument aliases shared by every command, defined once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

WorkloadArg = Annotated[Path, typer.Argument(help="Workload spec (TOML).", show_default=False)]
OptionalWorkloadArg = Annotated[
    Path | None,
    typer.Argument(help="Workload spec (TOML); default: every workload in workloads/ with calibration data.",
                   show_default=False),
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
PlotOpt = Annotated[Path | None, typer.Option("--plot", help="Write a PNG plot to this path.")]
GpusOpt = Annotated[
    str | None,
    typer.Option("--gpus", help="Comma-separated GPU counts; N@M means N GPUs over M nodes (e.g. 16,64,64@16)."),
]
ModelOpt = Annotated[
    str,
    typer.Option("--model", help="Model family: auto (chosen by leave-one-count-out CV), amdahl, ernest, topology, "
                                  "topology-ring."),
]
