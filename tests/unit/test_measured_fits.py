"""A count a measurement shows ran (same layout, same micro-batch) is never "does not fit memory"
(advisor.topology.memory.MeasuredFit, advisor.topology.layouts.ran_bound; docs/model.md, Memory).

llm7b's estimate puts 8 FSDP GPUs at 98.9 GB per GPU, above its 96 GB; torchtitan's published runs
trained there (88.5 GB peak). A CSV row at 8 GPUs records no peak: it bounds the footprint at the
GPU's memory, so 8 GPUs (and more, which shard the state finer) fit, while 4, which holds a larger
share of the state and was never measured, is still refused by the estimate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from advisor.calibration_data import load_calibration
from advisor.measurements import read_measurements_csv
from advisor.planning import runnable
from advisor.planning.recommend import recommend
from advisor.scaling.model import build_model
from advisor.spec import load_workload
from advisor.topology.layouts import build
from advisor.topology.memory import MeasuredFit, measured_fits, memory_evidence
from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
LLM7B = ROOT / "workloads" / "llm7b.toml"
CAPACITY = 96e9


def _csv(tmp_path, rows="8,1,2.8,16\n"):
    path = tmp_path / "m.csv"
    path.write_text("gpus,nodes,step_seconds,global_batch\n" + rows)
    return path


def _predict(*args):
    code, out, err = invoke("predict", *args, "--json")
    assert code == 0, err
    return {r["gpus"]: r for r in json.loads(out)["predictions"]}, json.loads(out)


def test_the_estimate_alone_refuses_8_gpus():
    """The premise: without a measurement, 8 GPUs are over the 96 GB (the bug needs it)."""
    w = load_workload(LLM7B)
    used = build(w, [4, 8]).memory_bytes(w)
    assert used[1] > CAPACITY and used[0] > used[1]


def test_a_measured_count_is_predicted_not_left_out(tmp_path):
    """The repro: 8 GPUs measured in a CSV ran, so they are predicted (the baseline), not left out."""
    code, out, err = invoke("predict", str(LLM7B), "--measurements", str(_csv(tmp_path)), "--gpus", "4,8,16,32")
    assert code == 0, err
    assert "Left out 8 GPUs" not in out and "speedup vs 8 GPUs" in out
    assert "Left out 4 GPUs (1 node): the footprint per GPU" in out


def test_json_marks_the_measured_count_as_fitting_and_keeps_refusing_fewer(tmp_path):
    rows, doc = _predict(str(LLM7B), "--measurements", str(_csv(tmp_path)), "--gpus", "4,8,16,32")
    assert doc["baseline_gpus"] == 8
    assert rows[8]["fits_memory"] is True and rows[8]["runs"] is True and rows[8]["left_out"] is None
    assert rows[8]["memory_bytes"] == pytest.approx(CAPACITY)  # a bound: at most the GPU's memory
    assert rows[8]["speedup"] == pytest.approx(1.0)
    # more GPUs shard the state finer: below the bound by the state the estimate frees (16 B/param x 8B x (1/8 - 1/N))
    for g in (16, 32):
        assert rows[g]["fits_memory"] is True
        assert rows[g]["memory_bytes"] == pytest.approx(CAPACITY - 16 * 8.0e9 * (1 / 8 - 1 / g), rel=1e-9)
    # 4 GPUs hold 16 GB more state than 8 did and were never measured: the estimate, unchanged, refuses them
    w = load_workload(LLM7B)
    assert rows[4]["fits_memory"] is False and rows[4]["runs"] is False
    assert rows[4]["memory_bytes"] == pytest.approx(float(build(w, [4]).memory_bytes(w)[0]))


def test_recommend_and_explain_do_not_leave_the_measured_count_out(tmp_path):
    w = load_workload(LLM7B)
    m = build_model(w, measurements=str(_csv(tmp_path)))
    rec = recommend(w, m, budget=20000)
    i = int(np.flatnonzero(rec.sweep.gpus == 8)[0])
    assert rec.sweep.fits_memory[i] and rec.runnable.ok[i]
    assert not rec.sweep.fits_memory[rec.sweep.gpus < 8].any()
    memory = [s for s in rec.why if "footprint per GPU" in s]
    assert memory and all("below 8 GPUs" in s for s in memory)
    doc = json.loads(json.dumps(rec.summary()))
    assert [(r["gpus"], r["bound_bytes"]) for r in doc["memory"]["ran_without_peak"]] == [(8, CAPACITY)]
    assert doc["memory"]["measured_peaks"] == []


def test_the_bound_is_not_a_measured_peak_for_the_memory_pressure_rule(tmp_path):
    """The step-time fit sees no peak (its memory-pressure rule reads peaks near capacity): the bound at
    96 GB of 96 GB is the memory, not a measurement that ran at 100%."""
    w = load_workload(LLM7B)
    m = build_model(w, measurements=str(_csv(tmp_path)))
    assert m.peaks == [] and [f.gpus for f in memory_evidence(m)] == [8]
    assert not any("near memory capacity" in line for line in m.warnings())


def test_another_micro_batch_or_a_larger_device_does_not_carry():
    """A run at 1 sample a micro-batch says nothing of 2; a run on a 120 GB card says nothing of 96 GB."""
    w = load_workload(LLM7B)
    lay = build(w, [8, 16])
    plain = lay.memory_bytes(w)
    assert np.array_equal(lay.memory_bytes(w, [MeasuredFit(8, 8.0, None, "csv")]), plain)
    assert np.array_equal(lay.memory_bytes(w, [MeasuredFit(8, 16.0, 1, "cal")]), plain)
    bigger = lay.memory_bytes(w, [MeasuredFit(8, 16.0, 2, "cal", bound_bytes=120e9)])
    assert np.array_equal(bigger, plain) and not lay.fits(w, memory_bytes=bigger)[0]


def test_ddp_holds_the_same_at_every_count_so_a_run_bounds_fewer_gpus_too():
    """DDP replicates the state: at the same micro-batch every count holds what the run held."""
    w = load_workload(LLM7B)
    w = w.model_copy(update={"parallelism": w.parallelism.model_copy(update={"strategy": "ddp"})})
    lay = build(w, [4, 8, 16])
    plain = lay.memory_bytes(w)
    assert (plain > CAPACITY).all()
    bounded = lay.memory_bytes(w, [MeasuredFit(8, 16.0, None, "csv")])
    assert bounded == pytest.approx([CAPACITY] * 3)
    assert runnable.of(w, [4, 8, 16], None, [MeasuredFit(8, 16.0, None, "csv")]).fits.all()


def _published_without_peaks(**setup):
    cal = load_calibration(ROOT / "calibrations" / "llm7b_published_torchtitan.toml", "llm7b")
    runs = [r.model_copy(update={"peak_memory_bytes": None}) for r in cal.runs]
    return cal.model_copy(update={"runs": runs, "setup": {**cal.setup, **setup}})


def test_calibration_runs_without_a_peak_are_fits_unless_they_measured_another_shape():
    w = load_workload(LLM7B)
    cal = _published_without_peaks()
    assert [(f.gpus, f.micro_samples) for f in measured_fits(cal, w)] == [(8, 2), (128, 2)]
    longer = w.model_copy(update={"model": w.model.model_copy(update={"seq_len": 16384})})
    assert measured_fits(cal, longer) == []  # [setup] says seq_len 8192: not this job's memory
    proxy = cal.model_copy(update={"provenance": cal.provenance.model_copy(update={"source": "measured"}),
                                   "environment": {**cal.environment, "proxy_layers": 2, "model_layers": 32}})
    assert measured_fits(proxy, w) == []  # a 2-layer proxy measured a smaller model


def test_csv_fits_are_one_per_placement(tmp_path):
    w = load_workload(LLM7B)
    m = read_measurements_csv(_csv(tmp_path, "8,1,2.8,16\n8,1,2.9,16\n16,2,3.0,32\n"), w)
    assert [(f.gpus, f.global_batch) for f in m.fits] == [(8, 16.0), (16, 32.0)]


def test_an_imported_torchtitan_log_shows_its_count_fits(tmp_path):
    """advisor import torchtitan writes the job's own run (no [setup], no proxy): 8 GPUs ran, so they fit."""
    log = ROOT / "tests" / "fixtures" / "torchtitan" / "debug_model_pr1437.log"
    cal = tmp_path / "titan.toml"
    code, _, err = invoke("import", "torchtitan", str(LLM7B), str(log), "--gpus", "8@1", "--out", str(cal))
    assert code == 0, err
    rows, doc = _predict(str(LLM7B), "--calibration", str(cal), "--gpus", "4,8,16")
    assert doc["baseline_gpus"] == 8 and rows[8]["fits_memory"] is True and rows[16]["fits_memory"] is True
    assert rows[4]["fits_memory"] is False
