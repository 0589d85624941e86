"""Calibration files: measured (or published) step times and collective probes for one workload.

Format: docs/formats.md. A file holds `schema`, `workload`, `[provenance]`, `[environment]`,
`[[runs]]` (one per GPU count and placement: raw timed step seconds after warm-up) and
`[[collectives]]` (probe timings with nccl-tests bus bandwidth). Files are written atomically
(`advisor.fileio`) after every completed GPU count, so an interrupted calibration loses nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from advisor.errors import InputError, Problem
from advisor.fileio import atomic_write_text, distinct_files, exclusive_lock
from advisor.spec import MAX_BATCH_SAMPLES, MAX_GPU_MEMORY, MAX_GPUS_LIMIT
from advisor.text import plural
from advisor.validation import validation_error

SCHEMA_VERSION = 1

#: Upper bounds of measured values (physical, far above any real run): one step or collective
#: longer than 10^6 s (11 days) is a typo; 10^6 timed steps per run; a collective message above
#: 1 TiB or a bus bandwidth above 10^5 GB/s (100x NVLink 5's 900 GB/s) cannot be measured.
MAX_SECONDS = 1e6
#: No timed step or collective takes less than a nanosecond (one kernel launch takes microseconds);
#: smaller positive values would make rates overflow to infinity in the fit.
MIN_SECONDS = 1e-9
MAX_STEPS_PER_RUN = 1_000_000
MAX_MESSAGE_BYTES = 2**40
MAX_BUSBW_GBPS = 1e5
#: A CSV row giving both step_seconds and throughput (and a run's tokens_per_second beside its step_seconds)
#: must agree within this relative tolerance: published tables round to 3-4 significant figures (<0.5%),
#: and a tool may report a mean throughput beside a median step (a few percent on a noisy run); 10% covers both, while a
#: wrong column or a per-GPU throughput in a whole-job column (a factor of N) is caught.
THROUGHPUT_TOLERANCE = 0.10

Positive = Annotated[float, Field(ge=MIN_SECONDS, le=MAX_SECONDS)]
#: GPU and node counts: whole TOML integers (`true` is not 1), at most the spec's MAX_GPUS_LIMIT.
Count = Annotated[int, Strict(), Field(gt=0, le=MAX_GPUS_LIMIT)]
Steps = Annotated[list[Positive], Field(min_length=1, max_length=MAX_STEPS_PER_RUN)]


class _Strict(BaseModel):
    """Strict types: a number is a TOML number (`step_seconds = ["1.5"]` and `true` were read as 1.5 and 1.0),
    a string a string, a flag true or false. Written files hold numbers; only the spec has the unit grammar."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True, strict=True)


class Provenance(_Strict):
    source: Literal["measured", "published"]
    """measured: a real run (host, date, versions in [environment]); published: a citation per run."""
    created: str
    """ISO 8601 UTC time the file was created."""
    host: str | None = None
    """Host the measurement ran on (measured)."""
    command: str | None = None
    """Command that produced the file."""
    citation: str | None = None
    """Publication the values come from (published); each run may cite more precisely."""
    notes: str | None = None
    """Anything a reader needs to judge the numbers."""


class Run(_Strict):
    gpus: Count
    """GPUs (ranks) in the run."""
    nodes: Count = 1
    """Nodes the GPUs were spread over (at most gpus)."""
    step_seconds: Steps
    """Wall seconds of each timed optimizer step, after warm-up."""
    compute_seconds: Steps | None = None
    """Seconds of each timed step without gradient synchronisation (exposes communication)."""
    comm_seconds: Annotated[list[Annotated[float, Field(ge=0, le=MAX_SECONDS)]],
                            Field(max_length=MAX_STEPS_PER_RUN)] | None = None
    """Seconds of communication per step, where measured directly."""
    global_batch: Annotated[int, Strict(), Field(gt=0, le=MAX_BATCH_SAMPLES * MAX_GPUS_LIMIT)] | None = None
    """Samples per optimizer step in this run, when it differs from the workload's batch policy."""
    micro_samples: Annotated[int, Strict(), Field(gt=0, le=MAX_BATCH_SAMPLES)] | None = None
    """Per-GPU micro-batch used in this run."""
    peak_memory_bytes: Annotated[int, Strict(), Field(ge=0, le=2 ** 60)] | None = None
    """Largest peak of allocated device memory over ranks and full steps (torch.cuda.max_memory_allocated:
    tensors only), reset before each full step."""
    peak_reserved_bytes: Annotated[int, Strict(), Field(ge=0, le=2 ** 60)] | None = None
    """Largest peak of reserved device memory over ranks and full steps (torch.cuda.max_memory_reserved:
    the caching allocator's segments, what torchtitan reports); at least peak_memory_bytes."""
    probe_latency_seconds: dict[str, Positive] | None = None
    """Small-message latency per probed "<op>/<group>", the intercept of seconds = a + bytes/bw fitted
    to this run's probes (advisor.calibrate.probes.fit_latency)."""
    tokens_per_second: Annotated[float, Field(gt=0, le=1e+18)] | None = None
    """Whole-job tokens per second, where reported."""
    layout: str | None = None
    """Parallel layout of the run, e.g. "dp_shard=8, dp_replicate=4, tp=1, pp=1" (advisor.topology.layouts)."""
    memory_bound: bool | None = None
    """The source says this run was slowed by memory pressure (allocator retries, a memory-bound
    configuration): its efficiency is a lower bound where memory is freed (advisor.scaling.evidence)."""
    source: str | None = None
    """Citation for this run's values (published files: required)."""


class Collective(_Strict):
    op: Literal["all_reduce", "reduce_scatter", "all_gather"]
    gpus: Annotated[Count, Field(gt=1)]
    nodes: Count = 1
    bytes: Annotated[int, Strict(), Field(gt=0, le=MAX_MESSAGE_BYTES)]
    """Message size in bytes (nccl-tests 'size': the full buffer)."""
    seconds: Positive
    """Median seconds of one collective."""
    busbw: Annotated[float, Field(ge=0, le=MAX_BUSBW_GBPS)]
    """Bus bandwidth in GB/s (1e9 bytes/s), nccl-tests definition."""
    group: str | None = None
    """Ranks probed: "world", or one layout mesh dimension (dp_shard, dp_replicate, tp); gpus is its size."""
    rank_seconds: list[Annotated[float, Field(ge=0)]] | None = None
    """Each rank's own median seconds, in the group's rank order (the slowest sets `seconds`)."""
    algorithm: Literal["ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat"] | None = None
    """NCCL algorithm the probe ran, where the log says (NCCL_ALGO); unset: the one NCCL picks for the
    node count (advisor.imports.algorithm.expected_algorithm)."""
    source: str | None = None


class Calibration(_Strict):
    schema_version: int = Field(SCHEMA_VERSION, alias="schema")
    workload: str
    provenance: Provenance
    environment: dict = {}
    setup: dict[str, bool | int | float | str] | None = None
    """What defines the measurement: the spec fields that change a step's time (`setup_of`),
    recorded by `advisor calibrate`; `--resume` and `--collect` refuse a spec that differs."""
    runs: list[Run] = []
    collectives: list[Collective] = []

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True, strict=True)

    #: Where the file was read from (not part of the file).
    path: Path | None = Field(default=None, exclude=True)

    def measured_counts(self) -> set[tuple[int, int]]:
        """(gpus, nodes) placements already present."""
        return {(r.gpus, r.nodes) for r in self.runs}

    @property
    def ran_on_cpu(self) -> bool:
        """Whether its runs timed CPU ranks (advisor calibrate's gloo "GPUs": environment.device
        "cpu (...)"): no GPU memory to bound, no catalog hardware to check a probe against."""
        return str((self.environment or {}).get("device", "")).lower().startswith("cpu")


def now_utc() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def calibration_from_dict(data: dict, file: str | Path, workload: str | None = None) -> Calibration:
    file = str(file)
    if not isinstance(data, dict):
        raise InputError.at(file, "", "expected a TOML document of tables")
    version = data.get("schema")
    if version is None and "schema" not in data and {"model", "cluster"} <= data.keys():
        raise InputError.at(file, "", "a workload spec, not a calibration file (it has [model] and [cluster], "
                            "no schema): give it as the WORKLOAD argument, and --calibration the file advisor "
                            "calibrate or advisor import wrote")
    if type(version) is not int or version != SCHEMA_VERSION:  # `schema = true` is not 1
        raise InputError.at(file, "schema", f"unsupported calibration schema; this advisor reads schema "
                            f"{SCHEMA_VERSION}", version)
    try:
        cal = Calibration.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, file, Calibration) from None
    if workload is not None and cal.workload != workload:
        raise InputError.at(file, "workload", f"calibration is for another workload, not {workload!r}", cal.workload)
    problems = (_provenance_problems(cal, file) + _environment_problems(cal, file) + _run_problems(cal, file)
                + _tokens_per_second_problems(cal, file))
    if problems:
        raise InputError(problems)
    return cal


#: The one rule for a step's exposed communication, in a calibration file and a CSV row alike: it is part
#: of the step, so never longer (a comm_seconds of 5 s beside a 2.84 s step was fitted as 0.9 s of network).
COMM_OVER_STEP = "longer than its step ({step:g} s): the communication a step exposes is part of it"


def comm_over_step(step, comm) -> "list[bool]":
    """Per paired value: True where `comm` exceeds `step` (beyond float rounding); False where either is NaN."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        return (np.asarray(comm, dtype=float) > np.asarray(step, dtype=float) * (1 + 1e-9)).tolist()


#: How far a `provenance.created` may run ahead of this host's clock: another host's clock, set a day off, wrote it.
CLOCK_SKEW = timedelta(days=1)


def _provenance_problems(cal: Calibration, file: str) -> list[Problem]:
    """`provenance.created` is an ISO 8601 date and time with its UTC offset (`now_utc` writes
    `2026-11-30T05:15:17Z`): free text ("yesterday", "2026-13-01") was read as a date nobody could check,
    and one in the future (2999) as a measurement not yet made; a day's clock skew between hosts is allowed."""
    text = cal.provenance.created
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        stamp = None
    if stamp is None or stamp.tzinfo is None:
        return [Problem(file, "provenance.created", "must be an ISO 8601 date and time with its UTC offset, "
                        "such as '2026-11-30T05:15:17Z'", text, True)]
    if stamp > datetime.now(UTC) + CLOCK_SKEW:
        return [Problem(file, "provenance.created", f"is in the future (now {now_utc()}): a file cannot be "
                        "created after it is read", text, True)]
    return []


def _environment_problems(cal: Calibration, file: str) -> list[Problem]:
    """[environment] is a free table, but `device_memory_bytes` (torch's total_memory) bounds every measured
    peak (advisor.topology.memory.device_memory_ceiling) and sets the near-capacity warning: -1, 0 or
    "80 GB" was skipped without a word (the catalog's ceiling applied instead), and 1e30 let any peak
    through as held. It is a whole number of bytes no larger than the largest GPU memory a spec accepts."""
    value = cal.environment.get("device_memory_bytes")
    out = _gpus_per_node_problems(cal, file)
    if value is not None and (type(value) is not int or not 0 < value <= MAX_GPU_MEMORY):
        out.append(Problem(file, "environment.device_memory_bytes", f"must be a whole number of bytes from 1 to "
                           f"{MAX_GPU_MEMORY:.4g} (cluster.gpu_memory's bound): the memory torch reports for one "
                           "device", value, True))
    return out


def _gpus_per_node_problems(cal: Calibration, file: str) -> list[Problem]:
    """`environment.gpus_per_node` agrees with the placements: a published file's one number (the GPUs
    of a node) holds every run's and probe's ranks per node (ceil(gpus / nodes)); the table `advisor
    calibrate` writes, keyed by GPU count, gives the ranks per node of a run at that count (gpus / nodes).
    `gpus_per_node = 4` beside a run of 16 GPUs on 2 nodes was read without a word."""
    from advisor.spec import MAX_GPUS_PER_NODE

    value, where = cal.environment.get("gpus_per_node"), "environment.gpus_per_node"
    if value is None:
        return []
    if not isinstance(value, dict):
        value = {None: value}
    for key, per_node in value.items():
        at = where if key is None else f"{where}.{key}"
        if type(per_node) is not int or not 0 < per_node <= MAX_GPUS_PER_NODE:
            return [Problem(file, at, f"must be a whole number of GPUs from 1 to {MAX_GPUS_PER_NODE}", per_node, True)]
        if key is None:
            over = [(f"{k}[{i}]", x) for k, xs in (("runs", cal.runs), ("collectives", cal.collectives))
                    for i, x in enumerate(xs) if -(-x.gpus // x.nodes) > per_node]
            if over:
                name, x = over[0]
                return [Problem(file, at, f"fewer than the {-(-x.gpus // x.nodes)} GPUs per node of {name} "
                                f"({plural(x.gpus, 'GPU')} over {plural(x.nodes, 'node')})", per_node, True)]
            continue
        runs = [r for r in cal.runs if str(r.gpus) == str(key).strip()]
        if not runs:
            return [Problem(file, at, "keyed by a GPU count no run has: the table gives each run's GPUs per node, "
                            f"keyed by its GPU count ({', '.join(str(r.gpus) for r in cal.runs) or 'no runs'})",
                            per_node, True)]
        if all(r.gpus != per_node * r.nodes for r in runs):
            said = ", ".join(f"{r.gpus}@{r.nodes}" for r in runs)
            return [Problem(file, at, f"contradicts the runs' placement ({said}): {per_node} GPUs per node "
                            f"would put {plural(runs[0].gpus, 'GPU')} on {runs[0].gpus / per_node:g} nodes",
                            per_node, True)]
    return []


def run_tokens_per_second(tokens: int, steps: list[float]) -> float:
    """A run's tokens per second as every writer records it and `_tokens_per_second_problems` checks it:
    tokens a step over the median step (advisor calibrate's worker computes the same in the rank, which
    imports no pydantic). The median of a log's tps, or of several logs' medians, could differ from it by
    more than THROUGHPUT_TOLERANCE."""
    return tokens / statistics.median(steps)


def _tokens_per_second_problems(cal: Calibration, file: str) -> list[Problem]:
    """A run's `tokens_per_second` says what its steps say: its global_batch x the sequence length the file
    records (`[setup]` "model.seq_len") over its median step, how advisor calibrate and the torchtitan
    importer write it, within THROUGHPUT_TOLERANCE. A hand-edited 1e12 beside a 2.84 s step of 16 x 8192
    tokens was kept. A run without its own global_batch, or a file recording no sequence length, is not
    checked: what it ran is not in the file (the spec's batch and seq_len may have changed since)."""
    seq_len = (cal.setup or {}).get("model.seq_len")
    if type(seq_len) is not int or seq_len <= 0:
        return []
    for i, run in enumerate(cal.runs):
        if run.tokens_per_second is None or run.global_batch is None:
            continue
        step = statistics.median(run.step_seconds)
        said = run_tokens_per_second(run.global_batch * seq_len, run.step_seconds)
        if abs(run.tokens_per_second - said) > THROUGHPUT_TOLERANCE * said:
            return [Problem(file, f"runs[{i}].tokens_per_second", f"contradicts step_seconds: {run.global_batch} "
                            f"samples x {seq_len} tokens / {step:.4g} s (median step) = {said:.4g} tokens/s",
                            run.tokens_per_second, True)]
    return []


def _run_problems(cal: Calibration, file: str) -> list[Problem]:
    """The checks a measurement CSV gets, applied to a calibration file: placements that cannot
    exist, one placement twice (a file holds one run per placement: its repeated steps are the
    repeats), per-step lists of different lengths, published values without a citation."""
    out: list[Problem] = []
    seen: dict[tuple[int, int], int] = {}
    for kind, items in (("runs", cal.runs), ("collectives", cal.collectives)):
        for i, item in enumerate(items):
            if item.nodes > item.gpus:
                out.append(Problem(file, f"{kind}[{i}].nodes", f"more nodes than GPUs ({item.gpus})", item.nodes, True))
    for i, run in enumerate(cal.runs):
        key = (run.gpus, run.nodes)
        if key in seen:
            out.append(Problem(file, f"runs[{i}]", f"repeats the placement of runs[{seen[key]}] "
                               f"({plural(run.gpus, 'GPU')} over "
                               f"{plural(run.nodes, 'node')}); keep one run per placement, its step_seconds "
                               "holding every repeat",
                               None, False))
        seen.setdefault(key, i)
        if run.comm_seconds is not None and len(run.comm_seconds) != len(run.step_seconds):
            out.append(Problem(file, f"runs[{i}].comm_seconds", f"one value per step: step_seconds has "
                               f"{len(run.step_seconds)}", len(run.comm_seconds), True))
        elif run.comm_seconds is not None and True in (over := comm_over_step(run.step_seconds, run.comm_seconds)):
            j = over.index(True)
            out.append(Problem(file, f"runs[{i}].comm_seconds[{j}]", COMM_OVER_STEP.format(step=run.step_seconds[j]),
                               run.comm_seconds[j], True))
        out += _compute_over_step(run, f"runs[{i}].compute_seconds", file)
        if (run.peak_reserved_bytes is not None and run.peak_memory_bytes is not None
                and run.peak_reserved_bytes < run.peak_memory_bytes):
            out.append(Problem(file, f"runs[{i}].peak_reserved_bytes", f"below peak_memory_bytes "
                               f"({run.peak_memory_bytes}): the allocator reserves at least what it allocates",
                               run.peak_reserved_bytes, True))
        if cal.provenance.source == "published" and not (run.source or cal.provenance.citation):
            out.append(Problem(file, f"runs[{i}].source", "published values need a citation", None, False))
    return out


#: How far a run's compute-only median may pass its slowest full step before it is refused: the noise between
#: consecutive steps, at the spread advisor calibrate already warns about (advisor.calibrate.quality: 25%).
COMPUTE_NOISE = 0.25


def _compute_over_step(run: Run, where: str, file: str) -> list[Problem]:
    """A run's compute-only steps are its full steps without the gradient communication (docs/formats.md),
    so their median is not longer than its slowest timed step beyond COMPUTE_NOISE: compute_seconds = [5.0]
    beside a 2.84 s step on 8 GPUs was read as no exposed communication at all (the fit clamps step - compute
    at 0). The slowest step and the margin, not the median, bound it: with few steps (calibration.steps = 1)
    a compute step may pass its full one by noise, and advisor calibrate must read back what it wrote. One
    GPU is not checked: it has no communication, its compute-only step is the same work as the full one."""
    if not run.compute_seconds or run.gpus == 1:
        return []
    compute, slowest = statistics.median(run.compute_seconds), max(run.step_seconds)
    if compute <= slowest * (1 + COMPUTE_NOISE):
        return []
    return [Problem(file, where, f"median {compute:g} s is more than {COMPUTE_NOISE:.0%} longer than the slowest "
                    f"timed step ({slowest:g} s): a compute-only step is the full step without its gradient "
                    "communication")]


def load_calibration(path: str | Path, workload: str | None = None) -> Calibration:
    """Read and validate a calibration file; `workload` checks it belongs to that workload."""
    from advisor.fileio import load_toml

    path = Path(path)
    cal = calibration_from_dict(load_toml(path, "a calibration file (TOML)"), path, workload)
    return cal.model_copy(update={"path": path})


def save_calibration(cal: Calibration, path: str | Path) -> None:
    """Write atomically (temp file + rename): an interrupted write leaves the old file."""
    import tomli_w

    data = cal.model_dump(by_alias=True, exclude_none=True, exclude={"path"})
    atomic_write_text(path, tomli_w.dumps(data))


def calibrations_dir(workload_path: Path | None = None) -> Path:
    """`calibrations/` beside the spec's `workloads/` folder if it exists, else under the cwd."""
    if workload_path is not None:
        candidate = Path(workload_path).resolve().parent.parent / "calibrations"
        if candidate.is_dir():
            return candidate
    return Path.cwd() / "calibrations"


def find_calibrations(name: str, workload_path: Path | None = None) -> list[Path]:
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


def load_calibrations(paths: list[str | Path], workload: str | None = None) -> Calibration:
    """Read several calibration files (each checked to belong to `workload`) and merge them; a file
    given twice (a symlink to it among the checked-in ones) is read once (advisor.fileio.distinct_files)."""
    kept, _notes = distinct_files(list(paths))
    return merge_calibrations([load_calibration(p, workload) for p in kept])


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


def load_workload_calibration(name: str, workload_path: Path | None = None) -> Calibration | None:
    """All checked-in calibrations of a workload merged into one (runs and probes together), or None."""
    paths = find_calibrations(name, workload_path)
    if not paths:
        return None
    return load_calibrations(paths, name)
