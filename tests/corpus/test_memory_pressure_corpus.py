"""Memory pressure (issue 21): a run whose measured peak is near the GPU's capacity (> 90%,
advisor.scaling.evidence.MEMORY_NEAR) ran slower than its count would with memory to spare, so its
efficiency is a lower bound: the output says so, and its level is neither carried to the counts above
it (anchoring) nor a ceiling on them. Expectations from the rows by hand, never from the model."""

from __future__ import annotations

import json

from cli_inprocess import invoke
from conftest import ROOT, WORKLOADS

RESNET = WORKLOADS / "resnet50.toml"  # A100 80 GB (catalog), fixed per-GPU batch
GB = 10**9


def _calibration(tmp_path, rows) -> str:
    """A published-style calibration of resnet50: (gpus, nodes, step seconds, peak bytes) per run."""
    runs = "".join(f"\n[[runs]]\ngpus = {g}\nnodes = {n}\nstep_seconds = [{t}]\npeak_memory_bytes = {p}\n"
                   for g, n, t, p in rows)
    path = tmp_path / "resnet50_pressed.toml"
    path.write_text('schema = 1\nworkload = "resnet50"\n\n[provenance]\nsource = "published"\n'
                    'created = "2026-12-01T00:00:00Z"\ncitation = "test corpus: one run near memory capacity"\n\n'
                    '[environment]\nsystem = "8x A100 80GB per host"\ngpus_per_node = 8\n' + runs)
    return str(path)


def _predict(cal, gpus):
    code, out, err = invoke("predict", RESNET, "--calibration", cal, "--gpus", gpus, "--json")
    assert code == 0, err
    doc = json.loads(out)
    return {p["gpus"]: p for p in doc["predictions"]}, doc["warnings"]


def test_a_one_gpu_run_near_capacity_does_not_set_the_level_above_it(tmp_path):
    """1 GPU at 0.30 s with a 76 GB peak of 80 GB (95%), 8-32 GPUs at 0.21-0.225 s with 40 GB: 2 and 4
    GPUs held the 1-GPU level (0.300 s, 143% efficiency at 8 against it); now they are no slower than the
    slowest run with memory to spare (0.225 s) and 1 GPU stays its measurement."""
    cal = _calibration(tmp_path, [(1, 1, 0.30, 76 * GB), (8, 1, 0.21, 40 * GB), (16, 2, 0.22, 40 * GB),
                                  (32, 4, 0.225, 40 * GB)])
    rows, warnings = _predict(cal, "1,2,4,8")
    assert abs(rows[1]["step_seconds"] - 0.30) < 1e-6
    assert rows[2]["step_seconds"] <= 0.225 * 1.01 and rows[4]["step_seconds"] <= 0.225 * 1.01
    assert max(p["efficiency"] for p in rows.values()) <= 1.05
    assert any(w.startswith("N=1 ran with peak memory near capacity (> 90%)") for w in warnings), warnings


def test_a_peak_with_memory_to_spare_changes_nothing(tmp_path):
    """The same rows with the 1-GPU peak at 60 GB (75%): no memory warning, and 2 GPUs hold the 1-GPU
    level as anchoring does for any measured count (0.30 s within 1%)."""
    cal = _calibration(tmp_path, [(1, 1, 0.30, 60 * GB), (8, 1, 0.21, 40 * GB), (16, 2, 0.22, 40 * GB),
                                  (32, 4, 0.225, 40 * GB)])
    rows, warnings = _predict(cal, "1,2")
    assert abs(rows[2]["step_seconds"] / 0.30 - 1) < 0.01
    assert not any("near capacity" in w for w in warnings), warnings


def test_the_published_llm7b_8_gpu_run_at_92_percent_of_its_96_gb_is_flagged():
    """torchtitan's Llama 3.1 8B FSDP on 8 H100 96GB: memory 82.4 GiB = 88.5 GB, 92% of 96 GB (Table 1);
    at 128 GPUs 67.0 GiB = 71.9 GB, 75% (Table 3): only N=8 is named."""
    code, out, err = invoke("predict", WORKLOADS / "llm7b.toml", "--calibration",
                            ROOT / "calibrations" / "llm7b_published_torchtitan.toml", "--gpus", "8,128", "--json")
    assert code == 0, err
    warnings = json.loads(out)["warnings"]
    assert any(w.startswith("N=8 ran with peak memory near capacity") for w in warnings), warnings
    assert not any("N=128 ran" in w or "N=8, N=128" in w for w in warnings), warnings
