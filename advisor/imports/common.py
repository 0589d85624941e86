"""What every importer shares: reading a log as text, its numbers, and the calibration file it adds to.

Numbers in a log are read by one strict parser (`whole_number`, `decimal`) for every importer:
ASCII digits only (`str.isdigit()` and Python's `\\d` also take `²` and other Unicode digits, which
`int()` then refuses or reads as something else), a bounded count of digits before anything is
converted (Python's `int()` refuses more than 4,300 digits; 400 digits overflow a float), one
decimal point, an optional exponent, and optional thousands separators where the tool prints them
(torchtitan's `tps: 34,574`). Anything else is an InputError naming the file, line and field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import InputError

if TYPE_CHECKING:
    from advisor.calibration_data import Calibration
    from advisor.spec import Workload


#: Most digits a whole number in a log may have: 2^63 has 19; a size, rank or step longer than
#: this is not one the tools print (and never reaches int()).
MAX_DIGITS = 19
#: Most digits of a decimal number's integer and fraction parts (a float holds 17 significant).
MAX_DECIMAL_DIGITS = 30

_WHOLE = re.compile(r"[0-9]+", re.ASCII)
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+", re.ASCII)
_DECIMAL = re.compile(r"(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?(?:[eE][+-]?(?P<exp>[0-9]{1,4}))?", re.ASCII)


def read_log(path: str | Path) -> str:
    """A log's text (undecodable bytes replaced: logs mix in terminal output; a leading UTF-8
    byte-order mark dropped, as Windows editors write one); InputError if unreadable."""
    from advisor.fileio import read_input_bytes

    # advisor's one reader: regular files only (a FIFO or /dev/zero is refused, not read), size capped
    return read_input_bytes(path, "a log file").decode("utf-8-sig", errors="replace")


def whole_number(text: str, file: str, where: str, what: str = "a whole number") -> int:
    """`text` as a non-negative int: ASCII digits only, at most MAX_DIGITS of them."""
    if _WHOLE.fullmatch(text) and len(text) <= MAX_DIGITS:
        return int(text)
    if text[:1] == "-" and _WHOLE.fullmatch(text[1:]):
        raise InputError.at(file, where, f"expected {what}: must be >= 0", text)
    detail = f"at most {MAX_DIGITS} digits" if _WHOLE.fullmatch(text) else "digits 0-9 only"
    raise InputError.at(file, where, f"expected {what} ({detail})", text)


def decimal(text: str, file: str, where: str, what: str = "a number", grouped: bool = False) -> float:
    """`text` as a finite float >= 0: digits 0-9, one '.', an optional exponent; with `grouped`,
    thousands separators as in `34,574`. Bounded digits; never inf or nan."""
    body = text.replace(",", "") if grouped and _GROUPED.fullmatch(text.partition(".")[0]) else text
    m = _DECIMAL.fullmatch(body)
    digits = (m.group("int") or "") + (m.group("frac") or "") if m else ""
    if text[:1] == "-" and m is None and _DECIMAL.fullmatch(text[1:]):
        raise InputError.at(file, where, f"expected {what}: must be >= 0", text)
    if not m or not digits or len(digits) > MAX_DECIMAL_DIGITS:
        why = f"at most {MAX_DECIMAL_DIGITS} digits" if m and digits else "digits 0-9 and one '.'"
        raise InputError.at(file, where, f"expected {what} ({why})", text)
    value = float(body)
    if not math.isfinite(value):
        raise InputError.at(file, where, f"expected {what}: too large for a 64-bit float", text)
    return value


#: Relative tolerance of the busbw consistency check, on top of print rounding (the bar: +-2%).
BUSBW_TOLERANCE = 0.02


def check_collective(op: str, gpus: int, nbytes: float, seconds: float, busbw: float, file: str, where: str) -> None:
    """The one consistency check of a measured collective, for nccl-tests rows and `--collect`
    probes alike: its busbw must be size / time x nccl-tests' factor for its ranks (2(n-1)/n for
    all-reduce, (n-1)/n otherwise), within 2% plus the rounding of a 2-decimal print and a time of
    >= 4 significant digits (nccl-tests util.cu getFloatStr). A mismatch means the rank count, the
    collective or the numbers are wrong: InputError at `file: where`."""
    from advisor.topology.collectives import busbw_factor

    factor = float(busbw_factor(op, gpus))
    expected = nbytes / seconds * factor / 1e9
    slack = BUSBW_TOLERANCE * expected + 0.005 + expected * 5e-4
    if not math.isfinite(expected) or abs(busbw - expected) > slack:
        raise InputError.at(file, where, f"busbw disagrees with size / time x {factor:.3f} ({op} on "
                            f"{gpus} ranks: {nbytes:.6g} bytes in {seconds:.6g} s is {expected:.3g} GB/s): wrong "
                            "rank count, collective or time", busbw)


def check_hardware_reaches(workload: "Workload", op: str, algorithm: str | None, gpus: int, nodes: int,
                           busbw: float, file: str, where: str, catalog_only: bool = False) -> None:
    """Refuse a measured busbw no node of the spec's GPU could reach: above 1.5x (NVLS and SHARP's slack)
    what its algorithm reaches on the fastest links such nodes have, the catalog GPU's line rate with its
    NVLS margin (advisor.spec.LINK_BUSBW_MARGIN; the declared link where the GPU is not in the catalog,
    unless `catalog_only`: then nothing is checked) and advisor.spec.MAX_NIC_BANDWIDTH_PER_GPU for each rank
    on a node. One rule for an nccl-tests log (a log of times cut by 100, 33,880 GB/s across 2 H100 nodes,
    was fitted as a link 45x the declared) and a calibration file's [[collectives]] (47,887 GB/s on one
    node of 8 H100s was fitted, with advice to raise a declared bandwidth the spec refuses)."""
    import numpy as np

    from advisor.catalog import find_gpu
    from advisor.imports.algorithm import busbw_ceiling_factor, expected_algorithm
    from advisor.spec import LINK_BUSBW_MARGIN, MAX_NIC_BANDWIDTH_PER_GPU
    from advisor.topology.collectives import bus_bandwidth

    gpu = find_gpu(workload.cluster.gpu)
    if gpu is None and catalog_only:
        return
    intra = (gpu.link_ceiling * (1 + LINK_BUSBW_MARGIN) if gpu is not None and gpu.link_ceiling
             else workload.intra_node_bandwidth)
    per_node = -(-gpus // nodes)
    fastest = workload.model_copy(update={"cluster": workload.cluster.model_copy(update={
        "intra_node_bandwidth": intra, "inter_node_bandwidth": MAX_NIC_BANDWIDTH_PER_GPU * per_node})})
    ceiling = busbw_ceiling_factor(algorithm, op, gpus, nodes) * float(
        bus_bandwidth(fastest, np.array([float(nodes)]))[0]) / 1e9
    if busbw > 1.5 * ceiling:
        raise InputError.at(file, where, f"{busbw:.4g} GB/s is above what {algorithm or expected_algorithm(op, nodes)} "
                            f"reaches on the fastest links a node of {per_node} {workload.cluster.gpu} GPUs has "
                            f"({ceiling:.4g} GB/s busbw, 1.5x for NVLS and SHARP): the times are cut, or the "
                            "measurement is of other hardware", busbw)


def other_gpu_warning(file: str, where: str, name: str, workload: "Workload") -> list[str]:
    """A warning when a log says its job ran on `name`, a catalog GPU other than the spec's `cluster.gpu` (both
    in the catalog): an A100 log imported under an H100 spec was read as the H100 cluster's without a word. A
    warning, not a refusal, as the importers' busbw one: the user may know the two are alike."""
    from advisor.catalog import find_gpu

    spec, ran = find_gpu(workload.cluster.gpu), find_gpu(name) if name else None
    if spec is None or ran is None or ran.name == spec.name:
        return []
    return [f"warning: {file}: {where}: the job ran on {name} (the catalog's {ran.name}), not the spec's "
            f"{spec.name} (cluster.gpu): its measurements are read as this cluster's; import a log of this "
            "cluster's GPUs"]


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


def build(model: type, file: str, line: int, lines: dict[str, int | list[int]] | None = None, **fields):
    """`model(**fields)`, its validation errors (bounds of the calibration format) as one-line
    problems at the log line the values came from: `line`, or for a field in `lines` its own line
    (a list field: one line per item, so `step_seconds[6]` is reported at the line of that step)."""
    import dataclasses

    from pydantic import ValidationError

    from advisor.validation import validation_error

    try:
        return model(**fields)
    except ValidationError as exc:
        error = validation_error(exc, f"{file}: line {line}", model)
        if not lines:
            raise error from None
        problems = []
        for problem, detail in zip(error.problems, exc.errors(), strict=True):
            loc, at = tuple(detail["loc"]), lines.get(str(detail["loc"][0]) if detail["loc"] else "")
            if isinstance(at, list) and len(loc) > 1 and isinstance(loc[1], int) and loc[1] < len(at):
                problem = dataclasses.replace(problem, file=f"{file}: line {at[loc[1]]}", path=str(loc[0]))
            elif isinstance(at, int):
                problem = dataclasses.replace(problem, file=f"{file}: line {at}")
            problems.append(problem)
        raise InputError(problems) from None
