"""Checked-in data: every calibration loads for its workload and cites its values; every published
series for the accuracy benchmark is well formed and has a valid spec; transcriptions agree with
the numbers quoted in their own citations and with the workload's batch policy."""

from __future__ import annotations

import csv
import re

import pytest

from advisor.calibration_data import load_calibration
from advisor.spec import load_workload
from conftest import ROOT, SHARED_DATA, WORKLOADS

CALIBRATIONS = sorted((ROOT / "calibrations").rglob("*.toml"))  # reference/ too: passed by hand
SERIES = sorted((ROOT / "benchmarks" / "data").glob("*.csv"))
SERIES_SPECS = ROOT / "benchmarks" / "workloads"
COMMIT = re.compile(r"\b[0-9a-f]{12,40}\b")  # full or abbreviated (>= 12 hex) commit


def workload_of(path):
    """calibrations/NAME.toml or NAME_anything.toml belongs to workloads/NAME.toml."""
    return path.stem.split("_", 1)[0]


def test_there_is_checked_in_data():
    assert CALIBRATIONS and SERIES


@pytest.mark.parametrize("path", CALIBRATIONS, ids=lambda p: p.name)
def test_calibration_loads_for_an_existing_valid_workload(path):
    name = workload_of(path)
    workload = load_workload(WORKLOADS / f"{name}.toml")
    cal = load_calibration(path, workload.name)
    assert cal.runs, "a calibration without runs gives the model nothing to fit"
    for run in cal.runs:
        assert run.nodes == workload.nodes(run.gpus), "nodes filled as the spec's gpus_per_node says"
        if run.global_batch is not None:
            assert run.global_batch == workload.global_batch(run.gpus), "run batch differs from the spec's policy"


@pytest.mark.parametrize("path", CALIBRATIONS, ids=lambda p: p.name)
def test_published_calibration_cites_every_value(path):
    cal = load_calibration(path)
    if cal.provenance.source != "published":
        pytest.skip("measured file: host, date and versions instead of citations")
    assert cal.provenance.citation and COMMIT.search(cal.provenance.citation)
    assert cal.provenance.notes, "published files say how the values were converted"
    for item in [*cal.runs, *cal.collectives]:
        assert item.source and COMMIT.search(item.source), item


@pytest.mark.parametrize("name", ["llm7b", "rental-ethernet"])
def test_torchtitan_step_seconds_reproduce_the_quoted_tokens_per_second(name):
    # Independent of the conversion script: tokens per GPU per step come from the spec, the
    # published TPS/GPU from the run's own citation text.
    workload = load_workload(WORKLOADS / f"{name}.toml")
    tokens_per_gpu_step = workload.per_gpu_batch(8) * workload.model.seq_len
    cal = load_calibration(ROOT / "calibrations" / f"{name}_published_torchtitan.toml", name)
    for run in cal.runs:
        quoted = re.search(r"([\d,]+) TPS/GPU", run.source).group(1)
        tps_per_gpu = float(quoted.replace(",", ""))
        assert run.step_seconds[0] == pytest.approx(tokens_per_gpu_step / tps_per_gpu, rel=1e-5)
        assert run.tokens_per_second == pytest.approx(tps_per_gpu * run.gpus)


def test_bert_large_step_seconds_reproduce_the_quoted_throughput():
    workload = load_workload(WORKLOADS / "bert-large.toml")
    cal = load_calibration(ROOT / "calibrations" / "bert-large_published_nvidia_dle.toml", "bert-large")
    assert sorted(r.gpus for r in cal.runs) == [1, 4, 8, 32, 128, 256]
    for run in cal.runs:
        quoted = float(re.search(r"'Throughput - mixed precision' ([\d.]+)", run.source).group(1))
        assert run.step_seconds[0] == pytest.approx(workload.global_batch(run.gpus) / quoted, rel=1e-5)


def read_series(path):
    lines = path.read_text().splitlines()
    comments = [line for line in lines if line.startswith("#")]
    rows = list(csv.DictReader(line for line in lines if line and not line.startswith("#")))
    return comments, rows


@pytest.mark.parametrize("path", SERIES, ids=lambda p: p.name)
def test_published_series_is_well_formed_with_a_valid_spec(path):
    comments, rows = read_series(path)
    assert COMMIT.search(" ".join(comments)), "the comment header cites a commit"
    assert rows and {"gpus", "global_batch"} <= set(rows[0])
    assert {"throughput", "step_seconds"} & set(rows[0])
    workload = load_workload(SERIES_SPECS / f"{path.stem}.toml")
    assert workload.name == path.stem
    gpus = [int(r["gpus"]) for r in rows]
    assert min(gpus) <= 16 and max(gpus) >= 32, "the accuracy test fits on <= 16 GPUs and predicts beyond"
    for row in rows:
        assert float(row.get("throughput") or row.get("step_seconds")) > 0
        assert int(row["nodes"]) == workload.nodes(int(row["gpus"]))


def test_every_series_spec_has_its_data():
    assert {p.stem for p in SERIES_SPECS.glob("*.toml")} == {p.stem for p in SERIES}


def test_pollux_traces_are_not_copied_into_the_repository():
    # Data rule (../shared/data/README.md): read them from ../shared, never commit copies.
    names = {"placements.csv", "scalability.csv"}
    tracked = [p for p in ROOT.rglob("*.csv") if p.name in names and ".venv" not in p.parts]
    assert not tracked
    if not (SHARED_DATA / "pollux-osdi21").is_dir():
        return
    originals = {p.read_bytes() for p in (SHARED_DATA / "pollux-osdi21").rglob("*.csv")}
    for p in ROOT.rglob("*.csv"):
        if ".venv" not in p.parts:
            assert p.read_bytes() not in originals, p


@pytest.mark.parametrize("spec", sorted(WORKLOADS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_workload_predicts_physically(spec):
    """MFU <= 100% at every count, and below the smallest measured count no per-GPU throughput
    above the baseline's beyond 1.3x (the issue's bar; a superlinear plan is not a plan)."""
    import numpy as np

    from advisor.scaling.model import build_model

    w = load_workload(spec)
    m = build_model(w, n_bootstrap=8)
    gpus = np.unique(np.r_[2.0 ** np.arange(0, 11), w.cluster.max_gpus])
    p = m.predict(gpus[gpus <= w.cluster.max_gpus])
    if p.mfu is not None:
        assert (p.mfu <= 1.0 + 1e-9).all(), p.mfu
    below = p.gpus < m.baseline_gpus
    assert (p.efficiency[below] <= 1.3).all(), p.efficiency[below]
    assert (p.step_low <= p.step_seconds).all() and (p.step_seconds <= p.step_high).all()


def test_published_runs_cite_every_row_and_their_steps_reproduce_the_quoted_rates():
    """benchmarks/data/runs/mfu_published_runs.csv (MFU evidence, not a series): every row cites a commit or
    a paper's section, its nodes follow from gpus_per_node, and a torchtitan step is global batch x seq_len /
    (GPUs x the TPS/GPU its citation quotes)."""
    comments, rows = read_series(ROOT / "benchmarks" / "data" / "runs" / "mfu_published_runs.csv")
    assert comments and rows
    for r in rows:
        assert COMMIT.search(r["source"]) or re.search(r"arXiv \d{4}\.\d{5}\), Section", r["source"]), r["name"]
        assert int(r["nodes"]) * int(r["gpus_per_node"]) == int(r["gpus"])
        if r["name"].startswith("torchtitan-"):
            tps = float(re.search(r"([\d,]+) TPS/GPU", r["source"]).group(1).replace(",", ""))
            step = int(r["global_samples"]) * int(r["seq_len"]) / (int(r["gpus"]) * tps)
            assert float(r["step_seconds"]) == pytest.approx(step, rel=1e-5)
