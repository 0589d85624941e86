"""What every importer shares: reading a log as text, and the calibration file it adds to."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import InputError

if TYPE_CHECKING:
    from advisor.calibration_data import Calibration
    from advisor.spec import Workload


def read_log(path: str | Path) -> str:
    """A log's text (undecodable bytes replaced: logs mix in terminal output); InputError if unreadable."""
    from advisor.fileio import read_input_bytes

    # advisor's one reader: regular files only (a FIFO or /dev/zero is refused, not read), size capped
    return read_input_bytes(path, "a log file").decode("utf-8", errors="replace")


def not_this_format(file: str, text: str, message: str) -> InputError:
    """`FILE: line N: MESSAGE (got FIRST LINE)` for a file that is not the tool's output."""
    lineno, line = next(((i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()), (1, ""))
    return InputError.at(file, f"line {lineno}", message, line.strip())


def target_file(
    w: "Workload",
    workload_path: str | Path,
    out: str | Path | None,
    tool: str,
    logs: list,
    what: str,
    command: str | None,
) -> tuple[Path, Callable[[], "Calibration"]]:
    """The calibration file to add to (default calibrations/NAME_TOOL.toml) and how to start a new one."""
    from advisor.calibration_data import Calibration, Provenance, calibrations_dir, now_utc

    path = Path(out) if out is not None else calibrations_dir(Path(workload_path)) / f"{w.name}_{tool}.toml"
    names = ", ".join(Path(p).name for p in logs)

    def new() -> Calibration:
        return Calibration(
            workload=w.name,
            provenance=Provenance(
                source="measured",
                created=now_utc(),
                command=command,
                notes=f"{what} imported from {tool} output ({names}); each entry's source names its log.",
            ),
        )

    return path, new


def build(model: type, file: str, line: int, **fields):
    """`model(**fields)`, its validation errors (bounds of the calibration format) as one-line
    problems at the log line the values came from."""
    from pydantic import ValidationError

    from advisor.validation import validation_error

    try:
        return model(**fields)
    except ValidationError as exc:
        raise validation_error(exc, f"{file}: line {line}", model) from None
