"""fit, predict and backtest on a CSV made from the Pollux traces.

One case per command and exit status runs as a user runs it (a process: fit, predict and backtest
with 0 and 2); the rest in-process."""

from __future__ import annotations

import json

import pytest

from cli_inprocess import run_in_process
from conftest import WORKLOADS, run_cli
from pollux_inputs import POLLUX, write_imagenet_inputs

needs_pollux = pytest.mark.skipif(not POLLUX.is_dir(), reason="Pollux traces (../shared/data) not present")

@pytest.fixture
def pollux_csv(tmp_path):
    """ResNet-50 rows at 20 images per GPU from the Pollux placements trace, as a measurement CSV."""
    return write_imagenet_inputs(tmp_path, 20)


def test_predict_json_has_the_contract_fields(pollux_csv):
    spec, data = pollux_csv
    r = run_in_process("predict", spec, "--measurements", data, "--gpus", "1,8,16,64@16", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["baseline_gpus"] == 1
    assert isinstance(doc["model"]["name"], str)
    preds = doc["predictions"]
    assert [(p["gpus"], p["nodes"]) for p in preds] == [(1, 1), (8, 2), (16, 4), (64, 16)]
    for p in preds:
        for key in ("gpus", "nodes", "step_seconds", "throughput", "speedup", "efficiency", "throughput_low",
                    "throughput_high", "mfu"):
            assert key in p
        assert p["throughput_low"] <= p["throughput"] <= p["throughput_high"]
        assert p["throughput"] == pytest.approx(20 * p["gpus"] / p["step_seconds"])
        assert p["efficiency"] == pytest.approx(p["speedup"] / p["gpus"])
        assert 0 < p["mfu"] < 1  # T4's fp32 peak is in the catalog
    assert preds[0]["speedup"] == pytest.approx(1.0)
    assert any("past the largest measured node count (4)" in w for w in doc["warnings"])
    assert "warning:" in r.stderr


def test_predict_plot_writes_png_and_table_goes_to_stdout(pollux_csv, tmp_path):
    spec, data = pollux_csv
    png = tmp_path / "curve.png"
    r = run_in_process("predict", spec, "--measurements", data, "--gpus", "8,32", "--plot", png)
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "samples/s" in r.stdout and "warning" not in r.stdout


def test_fit_json_as_a_user_runs_it_reports_families_coefficients_and_residuals(pollux_csv):
    spec, data = pollux_csv
    r = run_cli("fit", spec, "--measurements", data, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    m = doc["model"]
    assert m["calibrated"] is True and m["name"] == "topology"
    assert [f["name"] for f in m["families"]] == ["topology"] and m["cv_mape"] == m["families"][0]["cv_mape"]
    assert all(c["value"] >= 0 and c["unit"] for c in m["coefficients"])
    compute = next(c for c in m["coefficients"] if c["name"] == "compute")
    assert compute["value"] >= 1.0  # 1/MFU: MFU <= 100%
    rows = [line.split(",") for line in data.read_text().splitlines() if line and not line.startswith("#")][1:]
    assert len(doc["residuals"]) == len({tuple(r[:2]) for r in rows})  # one per placement (same batch per GPU)


def test_fit_forced_family(pollux_csv):
    spec, data = pollux_csv
    r = run_in_process("fit", spec, "--measurements", data, "--model", "ernest", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["model"]["name"] == "ernest"
    assert [c["name"] for c in doc["model"]["coefficients"]] == ["overhead", "compute", "log_gpus", "gpus"]


def test_backtest_json_as_a_user_runs_it(pollux_csv):
    spec, data = pollux_csv
    r = run_cli("backtest", spec, "--measurements", data, "--fit-max-gpus", "8", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["points"] and all(p["gpus"] > 8 for p in doc["points"])
    for p in doc["points"]:
        assert p["error"] == pytest.approx((p["predicted"] - p["measured"]) / p["measured"])
    assert doc["mape"] == pytest.approx(sum(abs(p["error"]) for p in doc["points"]) / len(doc["points"]) * 100)


@pytest.mark.parametrize("args,message", [
    (["--model", "magic"],
     "--model: unknown model family; choose from auto, amdahl, ernest, topology, topology-ring (got 'magic')"),
    (["--gpus", "8@9"], "--gpus: more nodes than GPUs (got '8@9')"),
])
def test_bad_options_are_one_line_errors(pollux_csv, args, message):
    spec, data = pollux_csv
    r = run_in_process("predict", spec, "--measurements", data, *args)
    assert r.returncode == 2
    assert r.stderr.strip() == message
    assert r.stdout == ""


def test_backtest_with_nothing_to_predict_as_a_user_runs_it(pollux_csv):
    spec, data = pollux_csv
    r = run_cli("backtest", spec, "--measurements", data, "--fit-max-gpus", "64")
    assert r.returncode == 2
    assert r.stderr.strip().startswith("--fit-max-gpus: every measured run is at or below this count")


def test_bad_csv_as_a_user_runs_it_exits_2_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("gpus,step_seconds\n1,0.5\n2,slow\n")
    r = run_cli("fit", WORKLOADS / "llm7b.toml", "--measurements", bad)
    assert r.returncode == 2
    assert r.stderr.strip() == f"{bad}: line 3.step_seconds: must be a number (got 'slow')"


def test_no_calibration_data_answers_from_the_prior_marked_uncalibrated(tmp_path):
    spec = tmp_path / "workloads" / "llm7b.toml"
    spec.parent.mkdir()
    spec.write_text((WORKLOADS / "llm7b.toml").read_text())
    r = run_in_process("predict", spec, "--gpus", "8,64", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["model"]["calibrated"] is False
    assert "uncalibrated" in r.stderr
    for p in doc["predictions"]:
        # Wide and honest: a 90% band of at least 2x end to end, around an MFU below 100%.
        assert p["throughput_high"] / p["throughput_low"] > 2 and 0 < p["mfu"] <= 1
    table = run_in_process("predict", spec, "--gpus", "8", cwd=tmp_path)
    assert table.returncode == 0 and "UNCALIBRATED" in table.stdout


def test_llm70b_has_a_first_estimate(tmp_path):
    """The issue's bar: `advisor predict llm70b.toml --gpus 64,256 --json` exits 0, calibrated false, for
    the spec without its checked-in calibration (a copy in a folder with no calibrations/)."""
    spec = tmp_path / "workloads" / "llm70b.toml"
    spec.parent.mkdir()
    spec.write_text((WORKLOADS / "llm70b.toml").read_text())
    r = run_in_process("predict", spec, "--gpus", "64,256", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["model"]["calibrated"] is False and len(doc["predictions"]) == 2


def test_backtest_refuses_fewer_than_two_fitted_counts(pollux_csv):
    spec, data = pollux_csv
    r = run_in_process("backtest", spec, "--measurements", data, "--fit-max-gpus", "1")
    assert r.returncode == 2 and r.stdout == ""
    assert "at least 2 measured GPU counts" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_predict_llm7b_as_a_user_runs_it_from_its_checked_in_calibration():
    """The issue's bar: `advisor predict workloads/llm7b.toml --gpus 8,16,64,512 --json`."""
    r = run_cli("predict", WORKLOADS / "llm7b.toml", "--gpus", "8,16,64,512", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["baseline_gpus"] == 8  # the smallest count in calibrations/llm7b_*.toml
    assert doc["model"]["name"]
    preds = doc["predictions"]
    assert [(p["gpus"], p["nodes"]) for p in preds] == [(8, 1), (16, 2), (64, 8), (512, 64)]
    for p in preds:
        assert set(p) >= {"gpus", "nodes", "step_seconds", "throughput", "speedup", "efficiency",
                          "throughput_low", "throughput_high", "mfu"}
        assert 0 < p["mfu"] < 1  # H100 bf16 peak is in the catalog
        assert p["efficiency"] <= 1.0 + 1e-9


def test_fit_table_shows_families_coefficients_and_warnings(pollux_csv):
    spec, data = pollux_csv
    r = run_in_process("fit", spec, "--measurements", data)
    assert r.returncode == 0, r.stderr
    for text in ("leave-one-count-out CV", "✔", "naive linear", "inter_bandwidth", "x declared", "overlap γ",
                 "residuals", "posterior"):
        assert text in r.stdout
    assert "warning" not in r.stdout
