"""Calibration files: measured (or published) step times and collective probes for one workload.

Format: docs/formats.md. A file holds `schema`, `workload`, `[provenance]`, `[environment]`,
`[[runs]]` (one per GPU count and placement: raw timed step seconds after warm-up) and
`[[collectives]]` (probe timings with nccl-tests bus bandwidth). Files are written atomically
(`advisor.fileio`) after every completed GPU count, so an interrupted calibration loses nothing.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Callable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.errors import InputError
from advisor.fileio import atomic_write_text, exclusive_lock
from advisor.validation import validation_error

SCHEMA_VERSION = 1

Positive = Annotated[float, Field(gt=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)


class Provenance(_Strict):
    source: Literal["measured", "published"]
    """measured: a real run (host, date, versions in [environment]); published: a citation per run."""
    created: str
    """ISO 8601 UTC time the file was created."""
    host: Optional[str] = None
    """Host the measurement ran on (measured)."""
    command: Optional[str] = None
    """Command that produced the file."""
    citation: Optional[str] = None
    """Publication the values come from (published); each run may cite more precisely."""
    notes: Optional[str] = None
    """Anything a reader needs to judge the numbers."""


class Run(_Strict):
    gpus: Annotated[int, Field(gt=0)]
    """GPUs (ranks) in the run."""
    nodes: Annotated[int, Field(gt=0)] = 1
    """Nodes the GPUs were spread over."""
    step_seconds: Annotated[list[Positive], Field(min_length=1)]
    """Wall seconds of each timed optimizer step, after warm-up."""
    compute_seconds: Optional[list[Positive]] = None
    """Seconds of each timed step without gradient synchronisation (exposes communication)."""
    comm_seconds: Optional[list[Annotated[float, Field(ge=0)]]] = None
    """Seconds of communication per step, where measured directly."""
    global_batch: Optional[Annotated[int, Field(gt=0)]] = None
    """Samples per optimizer step in this run, when it differs from the workload's batch policy."""
    micro_samples: Optional[Annotated[int, Field(gt=0)]] = None
    """Per-GPU micro-batch used in this run."""
    peak_memory_bytes: Optional[Annotated[int, Field(ge=0)]] = None
    """Largest peak device memory over ranks."""
    tokens_per_second: Optional[Positive] = None
    """Whole-job tokens per second, where reported."""
    layout: Optional[str] = None
    """Parallel layout of the run, e.g. "dp_shard=8, dp_replicate=4, tp=1, pp=1" (advisor.layouts)."""
    source: Optional[str] = None
    """Citation for this run's values (published files: required)."""


class Collective(_Strict):
    op: Literal["all_reduce", "reduce_scatter", "all_gather"]
    gpus: Annotated[int, Field(gt=1)]
    nodes: Annotated[int, Field(gt=0)] = 1
    bytes: Annotated[int, Field(gt=0)]
    """Message size in bytes (nccl-tests 'size': the full buffer)."""
    seconds: Positive
    """Median seconds of one collective."""
    busbw: Annotated[float, Field(ge=0)]
    """Bus bandwidth in GB/s (1e9 bytes/s), nccl-tests definition."""
    group: Optional[str] = None
    """Ranks probed: "world", or one layout mesh dimension (dp_shard, dp_replicate, tp); gpus is its size."""
    rank_seconds: Optional[list[Annotated[float, Field(ge=0)]]] = None
    """Each rank's own median seconds, in the group's rank order (the slowest sets `seconds`)."""
    source: Optional[str] = None


class Calibration(_Strict):
    schema_version: int = Field(SCHEMA_VERSION, alias="schema")
    workload: str
    provenance: Provenance
    environment: dict = {}
    runs: list[Run] = []
    collectives: list[Collective] = []

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True)

    #: Where the file was read from (not part of the file).
    path: Optional[Path] = Field(default=None, exclude=True)

    def measured_counts(self) -> set[tuple[int, int]]:
        """(gpus, nodes) placements already present."""
        return {(r.gpus, r.nodes) for r in self.runs}


def now_utc() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def calibration_from_dict(data: dict, file: str | Path, workload: Optional[str] = None) -> Calibration:
    file = str(file)
    version = data.get("schema")
    if version != SCHEMA_VERSION:
        raise InputError.at(file, "schema", f"unsupported calibration schema; this advisor reads schema {SCHEMA_VERSION}", version)
    try:
        cal = Calibration.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, file, Calibration) from None
    if workload is not None and cal.workload != workload:
        raise InputError.at(file, "workload", f"calibration is for another workload, not {workload!r}", cal.workload)
    if cal.provenance.source == "published":
        for i, run in enumerate(cal.runs):
            if not (run.source or cal.provenance.citation):
                raise InputError.at(file, f"runs[{i}].source", "published values need a citation")
    return cal


def load_calibration(path: str | Path, workload: Optional[str] = None) -> Calibration:
    """Read and validate a calibration file; `workload` checks it belongs to that workload."""
    from advisor.spec import parse_toml

    path = Path(path)
    cal = calibration_from_dict(parse_toml(path), path, workload)
    return cal.model_copy(update={"path": path})


def save_calibration(cal: Calibration, path: str | Path) -> None:
    """Write atomically (temp file + rename): an interrupted write leaves the old file."""
    import tomli_w

    data = cal.model_dump(by_alias=True, exclude_none=True, exclude={"path"})
    atomic_write_text(path, tomli_w.dumps(data))


def calibrations_dir(workload_path: Optional[Path] = None) -> Path:
    """`calibrations/` beside the spec's `workloads/` folder if it exists, else under the cwd."""
    if workload_path is not None:
        candidate = Path(workload_path).resolve().parent.parent / "calibrations"
        if candidate.is_dir():
            return candidate
    return Path.cwd() / "calibrations"


def find_calibrations(name: str, workload_path: Optional[Path] = None) -> list[Path]:
    """Checked-in calibration files for workload `name`: `NAME.toml` or `NAME_*.toml`, sorted."""
    folder = calibrations_dir(workload_path)
    found = [folder / f"{name}.toml", *sorted(folder.glob(f"{name}_*.toml"))]
    return [p for p in found if p.is_file()]


def merge_calibrations(cals: list[Calibration]) -> Calibration:
    """Several calibration files of one workload as one: runs and probes together, the first file's
    provenance and path. Runs are kept as they are: the same placement measured
    twice is two measurements, which the model's bootstrap treats as repeated runs."""
    if not cals:
        raise ValueError("merge_calibrations needs at least one calibration")
    if len(cals) == 1:
        return cals[0]
    return cals[0].model_copy(update={
        "runs": [r for c in cals for r in c.runs],
        "collectives": [c2 for c in cals for c2 in c.collectives],
    })


def load_calibrations(paths: list[str | Path], workload: Optional[str] = None) -> Calibration:
    """Read several calibration files (each checked to belong to `workload`) and merge them."""
    return merge_calibrations([load_calibration(p, workload) for p in paths])


def update_calibration_file(path: str | Path, workload: str, new: Callable[[], Calibration],
                            change: Callable[[Calibration], Calibration]) -> Calibration:
    """Read-modify-write `path` under its lock: load it (or `new()` when absent), apply `change`,
    write atomically. One place for every command that adds to an existing calibration file."""
    path = Path(path)
    with exclusive_lock(path):
        cal = load_calibration(path, workload) if path.exists() else new()
        cal = change(cal)
        save_calibration(cal, path)
    return cal.model_copy(update={"path": path})


def load_workload_calibration(name: str, workload_path: Optional[Path] = None) -> Optional[Calibration]:
    """All checked-in calibrations of a workload merged into one (runs and probes together), or None."""
    paths = find_calibrations(name, workload_path)
    if not paths:
        return None
    return load_calibrations(paths, name)
