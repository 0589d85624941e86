"""`advisor recommend` through the real CLI (subprocess): JSON shape, the no-calibration line,
one-line errors, and the bar on llm7b with its checked-in calibration and the fitted model."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import ROOT, WORKLOADS, run_cli


@pytest.fixture
def project_without_calibrations(tmp_path):
    (tmp_path / "workloads").mkdir()
    shutil.copy(WORKLOADS / "llm7b.toml", tmp_path / "workloads" / "llm7b.toml")
    shutil.copy(WORKLOADS / "tiny-cpu.toml", tmp_path / "workloads" / "tiny-cpu.toml")
    return tmp_path


def test_no_workload_and_no_calibration_says_so_per_workload(project_without_calibrations):
    result = run_cli("recommend", "--budget", "20000", cwd=project_without_calibrations)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("workloads/llm7b.toml: no calibration data for llm7b")
    assert lines[1].startswith("workloads/tiny-cpu.toml: no calibration data for tiny-cpu")


def test_no_calibration_json_is_one_document(project_without_calibrations):
    result = run_cli("recommend", "--json", cwd=project_without_calibrations)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["recommendations"] == [] and doc["candidates"] == []
    assert [(x["workload"], x["status"]) for x in doc["workloads"]] == [("llm7b", "no-calibration"), ("tiny-cpu", "no-calibration")]


def test_no_workloads_folder_is_a_one_line_error(tmp_path):
    result = run_cli("recommend", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "workloads: no workload specs here; give a WORKLOAD.toml or run from the project folder\n"


@pytest.mark.parametrize("args, line", [
    (["--budget", "-5"], "--budget: must be a positive number (got -5.0)"),
    (["--deadline", "0"], "--deadline: must be a positive number (got 0.0)"),
    (["--budget", "100", "--confidence", "1.5"], "--confidence: must be between 0 and 1 (exclusive) (got 1.5)"),
    (["--tier", "spott"], "workloads/llm7b.toml: tiers: no tier named 'spott'; did you mean 'spot'? (got 'spott')"),
])
def test_bad_options_are_one_line_errors(args, line):
    result = run_cli("recommend", "workloads/llm7b.toml", *args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == line + "\n"


def test_calibration_needs_a_workload():
    result = run_cli("recommend", "--calibration", "x.toml")
    assert result.returncode == 2 and result.stderr == "--calibration: needs a WORKLOAD argument\n"


def recommend_json(*args):
    pytest.importorskip("advisor.predict", reason="the scaling model (advisor.predict) is not in this build")
    from advisor.calibration_data import find_calibrations

    if not find_calibrations("llm7b", WORKLOADS / "llm7b.toml"):
        pytest.skip("no checked-in llm7b calibration")
    result = run_cli("recommend", "workloads/llm7b.toml", *args, "--json", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["candidates"], "every (gpus, tier) considered is listed"
    for row in doc["recommendations"] + doc["candidates"]:
        assert {"workload", "objective", "gpus", "nodes", "tier", "hours", "cost_usd", "speedup", "efficiency",
                "step_seconds", "p_meet"} <= set(row)
    return doc


def test_budget_bar_through_the_cli():
    doc = recommend_json("--budget", "20000")
    within = [c for c in doc["candidates"] if c["cost_usd"] <= 20000]
    assert len(doc["recommendations"]) == (1 if within else 0)
    for rec in doc["recommendations"]:
        assert rec["cost_usd"] <= 20000 and rec["objective"] == "fastest-within-budget"
        assert not any(c["hours"] < rec["hours"] for c in within), "a candidate within budget is faster"
    if not within:
        assert doc["workloads"][0]["status"] == "none-qualifies" and doc["workloads"][0]["closest"]


def test_deadline_bar_through_the_cli():
    doc = recommend_json("--deadline", "48")
    meeting = [c for c in doc["candidates"] if c["hours"] <= 48]
    assert len(doc["recommendations"]) == (1 if meeting else 0)
    for rec in doc["recommendations"]:
        assert rec["hours"] <= 48 and rec["objective"] == "cheapest-within-deadline"
        assert not any(c["cost_usd"] < rec["cost_usd"] for c in meeting), "a candidate meeting 48 h is cheaper"


def test_table_and_plot_through_the_cli(tmp_path):
    recommend_json()  # skips like the others when the model or calibration is missing
    png = tmp_path / "frontier.png"
    result = run_cli("recommend", "workloads/llm7b.toml", "--budget", "200000", "--plot", png, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "✔" in result.stdout and "llm7b" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
