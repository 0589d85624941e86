"""From what the ranks wrote (`result.json`) to the calibration file's runs and collectives.

One path for local runs and for multi-node results gathered with `--collect`: a result directory
holds rank 0's `result.json` (see advisor.calibrate.worker) and one `rank<R>.json` per rank.
"""

from __future__ import annotations

import os
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from advisor.calibrate.environment import merge_environments
from advisor.calibration_data import (
    MAX_BUSBW_GBPS,
    MAX_MESSAGE_BYTES,
    Calibration,
    Collective,
    Count,
    Positive,
    Run,
    Steps,
)
from advisor.errors import InputError
from advisor.fileio import load_json
from advisor.spec import MAX_BATCH_SAMPLES, MAX_GPUS_LIMIT, Workload
from advisor.text import plural
from advisor.validation import validation_error

#: A value of the environment table: TOML-writable scalars, lists of them, or one level of table
#: (per-count values such as load_average keyed by GPU count).
Scalar = bool | int | float | str
EnvValue = Scalar | list[Scalar] | list[list[Scalar]] | dict[str, Scalar | list[Scalar]]


class _Result(BaseModel):
    # Keys this advisor does not know are ignored (a newer worker may add some); the ones it
    # uses are checked as strictly as a calibration file.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class ProbeResult(_Result):
    op: Literal["all_reduce", "reduce_scatter", "all_gather"]
    bytes: Annotated[int, Strict(), Field(gt=0, le=MAX_MESSAGE_BYTES)]
    seconds: Positive
    busbw: Annotated[float, Field(ge=0, le=MAX_BUSBW_GBPS)]
    # a probe of one layout mesh group (advisor.calibrate.worker.probe_groups): its size and nodes
    gpus: Count | None = None
    nodes: Count | None = None
    group: Annotated[str, Field(max_length=64)] | None = None
    rank_seconds: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = None


class ResultEnvironment(_Result):
    """The environment a rank reports: the keys advisor reads are typed, others must be plain
    TOML-writable values (they are copied into the calibration file's [environment])."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    __pydantic_extra__: dict[str, EnvValue | None]  # None (e.g. no CUDA version) is dropped

    hosts: list[Annotated[str, Field(max_length=255)]] = []
    backend: str | None = None
    device: str | None = None
    strategy: str | None = None
    declared_precision: str | None = None
    declared_params: Annotated[int, Strict()] | None = None
    gpus_per_node: Count | None = None
    omp_threads: Annotated[int, Strict(), Field(ge=0, le=2 ** 20)] | None = None
    load_average: list[Annotated[float, Field(ge=0)]] | None = None


class RankResult(_Result):
    """rank 0's result.json (advisor.calibrate.worker), validated before anything is taken from it."""

    workload: str | None = None
    gpus: Count
    nodes: Count
    step_seconds: Steps
    compute_seconds: Steps | None = None
    global_batch: Annotated[int, Strict(), Field(gt=0, le=MAX_BATCH_SAMPLES * MAX_GPUS_LIMIT)]
    micro_samples: Annotated[int, Strict(), Field(gt=0, le=MAX_BATCH_SAMPLES)] | None = None
    peak_memory_bytes: Annotated[int, Strict(), Field(ge=0, le=2 ** 60)] | None = None
    peak_reserved_bytes: Annotated[int, Strict(), Field(ge=0, le=2 ** 60)] | None = None
    probe_latency_seconds: dict[Annotated[str, Field(max_length=80)], Positive] | None = None
    tokens_per_second: Annotated[float, Field(gt=0, le=1e+18)] | None = None
    collectives: list[ProbeResult] = []
    environment: ResultEnvironment = ResultEnvironment()
    layout: Annotated[str, Field(max_length=200)] | None = None


def parse_result(data: object, path: Path) -> dict:
    """A parsed result.json checked against RankResult; returns the checked values as a dict."""
    if not isinstance(data, dict):
        raise InputError.at(path, "", "expected a JSON object (not a result written by advisor.calibrate.worker)",
                            type(data).__name__)
    try:
        result = RankResult.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, str(path), RankResult) from None
    if result.nodes > result.gpus:
        raise InputError.at(path, "nodes", f"more nodes than GPUs ({result.gpus})", result.nodes)
    if result.gpus == 1 and result.collectives:
        raise InputError.at(path, "collectives", "a 1-GPU run has no collectives to probe")
    for i, probe in enumerate(result.collectives):
        check_probe(probe, result, str(path), f"collectives[{i}]")
    return result.model_dump(exclude_none=True)


def check_probe(probe: ProbeResult, result: RankResult, file: str, where: str) -> None:
    """A probe must be possible within its run, and its numbers must agree, as an nccl-tests row
    must (advisor.imports.common.check_collective): a group of at least 2 and at most the run's
    ranks that divides them, spread evenly over at most the run's nodes (the one placement rule),
    one time per rank of the group, and busbw = size / time x nccl-tests' factor for the group."""
    from advisor.imports.common import check_collective
    from advisor.placement import check_placement

    gpus, nodes = probe.gpus or result.gpus, probe.nodes or result.nodes
    if not 2 <= gpus <= result.gpus or result.gpus % gpus:
        raise InputError.at(file, f"{where}.gpus", f"a probe group of the run's {result.gpus} ranks has 2 to "
                            f"{result.gpus} of them and divides them", gpus)
    if nodes > result.nodes:
        raise InputError.at(file, f"{where}.nodes", f"more nodes than the run's {result.nodes}", nodes)
    check_placement(gpus, nodes, result.gpus, f"{file}: {where}", f"{gpus}@{nodes}")
    if probe.rank_seconds is not None and len(probe.rank_seconds) != gpus:
        raise InputError.at(file, f"{where}.rank_seconds", f"expected one time per rank of the {gpus}-rank group",
                            len(probe.rank_seconds))
    check_collective(probe.op, gpus, probe.bytes, probe.seconds, probe.busbw, file, f"{where}.busbw")


def run_from_result(w: Workload, result: dict) -> tuple[Run, list[Collective]]:
    """The Run and probes of one checked result (parse_result). `global_batch` is recorded only
    when the run's batch differs from the workload's policy at that N (plan.batch_plan's rounding)."""
    gpus, nodes = int(result["gpus"]), int(result["nodes"])
    declared = w.global_batch(gpus)
    run = Run(
        gpus=gpus,
        nodes=nodes,
        step_seconds=result["step_seconds"],
        compute_seconds=result.get("compute_seconds"),
        global_batch=result["global_batch"] if result["global_batch"] != declared else None,
        micro_samples=result.get("micro_samples"),
        peak_memory_bytes=result.get("peak_memory_bytes"),
        peak_reserved_bytes=result.get("peak_reserved_bytes"),
        probe_latency_seconds=result.get("probe_latency_seconds") if gpus > 1 else None,
        tokens_per_second=result.get("tokens_per_second"),
        layout=result.get("layout"),
    )
    probes = [Collective(**{"gpus": gpus, "nodes": nodes, **{k: v for k, v in c.items() if v is not None}})
              for c in result.get("collectives", [])] if gpus > 1 else []
    return run, probes


def add_result(cal: Calibration, w: Workload, result: dict) -> Calibration:
    """`cal` with one more run (and its probes, environment) from a checked result."""
    run, probes = run_from_result(w, result)
    env = merge_environments(cal.environment, result.get("environment", {}), run.gpus)
    return cal.model_copy(update={
        "runs": sorted([*cal.runs, run], key=lambda r: (r.gpus, r.nodes)),
        "collectives": [*cal.collectives, *probes],
        "environment": env,
    })


def read_result_file(path: Path) -> dict:
    """One result.json through advisor's reader (regular file, size, depth, repeated keys), checked."""
    return parse_result(load_json(path, "a result.json"), path)


def read_result_dir(folder: Path) -> dict:
    """rank 0's result.json of one run, checked to have every rank's rank<R>.json beside it."""
    result = read_result_file(folder / "result.json")
    try:
        names = set(os.listdir(folder))
    except OSError as exc:
        raise InputError.at(folder, "", f"cannot read: {exc.strerror}") from None
    missing = [r for r in range(result["gpus"]) if f"rank{r}.json" not in names]
    if missing:
        shown = missing if len(missing) <= 8 else [*missing[:8], "..."]
        raise InputError.at(folder, "", f"incomplete run: no rank<R>.json from {plural(len(missing), 'rank')} {shown}")
    extra = sorted(n for n in names if _RANK_FILE.fullmatch(n) and int(n[4:-5]) >= result["gpus"])
    if extra:
        raise InputError.at(folder / extra[0], "", f"a rank beyond the {plural(result['gpus'], 'rank')} result.json "
                            "reports: results of two runs mixed in one folder")
    named = _RESULT_DIR.fullmatch(folder.name)
    if named and (int(named.group(1)), int(named.group(2))) != (result["gpus"], result["nodes"]):
        raise InputError.at(folder / "result.json", "gpus", f"the folder is named for {named.group(1)} GPUs over "
                            f"{named.group(2)} nodes, the result reports {result['gpus']} over {result['nodes']}",
                            result["gpus"])
    return result


#: `rank<R>.json` (ASCII digits, bounded) and the folder names `--emit` gives each placement.
_RANK_FILE = re.compile(r"rank[0-9]{1,7}\.json", re.ASCII)
_RESULT_DIR = re.compile(r"gpus([0-9]{1,7})-nodes([0-9]{1,7})", re.ASCII)


def find_result_dirs(root: Path) -> list[Path]:
    """Every folder under `root` (itself included) holding a result.json, sorted."""
    if not root.is_dir():
        what = "not a directory" if root.exists() else "no such directory"
        raise InputError.at(root, "", f"{what} (--collect wants the --results folder of the emitted runs)")
    return sorted(p.parent for p in root.rglob("result.json"))


@dataclass(frozen=True)
class SummaryRow:
    gpus: int
    nodes: int
    step_seconds: float
    throughput: float
    speedup: float
    efficiency: float
    busbw: float | None
    exposed_comm: float | None


def summary(cal: Calibration, w: Workload) -> list[SummaryRow]:
    """Per run: median step, samples/s, speedup and efficiency against the smallest count, all_reduce
    busbw at the largest probed message, and the median exposed-communication share."""
    rows = []
    runs = sorted(cal.runs, key=lambda r: (r.gpus, r.nodes))
    base = None
    for r in runs:
        step = statistics.median(r.step_seconds)
        batch = r.global_batch or w.global_batch(r.gpus)
        thr = batch / step
        if base is None:
            base = (r.gpus, thr)
        speedup = thr / base[1]
        probes = [c for c in cal.collectives if c.op == "all_reduce" and c.gpus == r.gpus and c.nodes == r.nodes]
        busbw = max(probes, key=lambda c: c.bytes).busbw if probes else None
        exposed = None
        if r.compute_seconds:
            exposed = max(0.0, step - statistics.median(r.compute_seconds)) / step
        rows.append(SummaryRow(r.gpus, r.nodes, step, thr, speedup, speedup / (r.gpus / base[0]), busbw, exposed))
    return rows
