"""`advisor recommend`: JSON shape, the uncalibrated recommendation from the scaling model's prior,
one-line errors, exit status 3, and the bars on the checked-in workloads with their calibrations and
the fitted model.

One case per exit status (0, 2, 3) runs as a user runs it (a process); the rest in-process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_inprocess import run_in_process
from conftest import ROOT, WORKLOADS, run_cli
from pollux_inputs import write_imagenet_inputs


@pytest.fixture
def project_without_calibrations(tmp_path):
    (tmp_path / "workloads").mkdir()
    shutil.copy(WORKLOADS / "llm7b.toml", tmp_path / "workloads" / "llm7b.toml")
    shutil.copy(WORKLOADS / "tiny-cpu.toml", tmp_path / "workloads" / "tiny-cpu.toml")
    return tmp_path


def test_no_workloads_folder_as_a_user_runs_it_is_a_one_line_error(tmp_path):
    result = run_cli("recommend", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == "workloads: no workload specs here; give a WORKLOAD.toml or run from the project folder\n"


@pytest.mark.parametrize("args, line", [
    (["--budget", "-5"], "--budget: must be a positive number (got -5.0)"),
    (["--deadline", "0"], "--deadline: must be a positive number (got 0.0)"),
    (["--budget", "100", "--confidence", "1.5"], "--confidence: must be between 0 and 1 (exclusive) (got 1.5)"),
    (["--confidence", "0.9"], "--confidence: needs --budget or --deadline (the odds are of meeting them) (got 0.9)"),
    (["--tier", "spott"], "workloads/llm7b.toml: tiers: no tier named 'spott'; did you mean 'spot'? (got 'spott')"),
    (["--objective", "cheap"], "--objective: choose from worth-the-cost, speedup-per-dollar (got 'cheap')"),
    (["--budget", "10", "--objective", "speedup-per-dollar"],
     "--objective: applies only without --budget/--deadline (with them: fastest-within-budget) "
     "(got 'speedup-per-dollar')"),
])
def test_bad_options_are_one_line_errors(args, line):
    result = run_in_process("recommend", "workloads/llm7b.toml", *args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == line + "\n"


def test_calibration_needs_a_workload():
    result = run_in_process("recommend", "--calibration", "x.toml")
    assert result.returncode == 2 and result.stderr == "--calibration: needs a WORKLOAD argument\n"


def recommend_json(*args, spec="workloads/llm7b.toml", stderr=None):
    pytest.importorskip("advisor.scaling.model", reason="the scaling model is not in this build")
    from advisor.calibration_data import find_calibrations

    if not find_calibrations(Path(spec).stem, WORKLOADS / Path(spec).name):
        pytest.skip(f"no checked-in {spec} calibration")
    result = run_in_process("recommend", spec, *args, "--json", cwd=ROOT)
    doc = json.loads(result.stdout)
    qualified = all(w["status"] == "ok" for w in doc["workloads"])
    assert result.returncode == (0 if qualified else 3), result.stderr
    assert doc["candidates"], "every (gpus, tier) considered is listed"
    for row in doc["recommendations"] + doc["candidates"]:
        assert {"workload", "objective", "gpus", "nodes", "tier", "hours", "cost_usd", "speedup", "efficiency",
                "step_seconds", "p_meet", "global_batch", "calibrated"} <= set(row)
    if stderr is not None:
        stderr.append(result.stderr)
    return doc


def limits_of(args: list[str]) -> tuple[float, float]:
    value = lambda flag: float(args[args.index(flag) + 1]) if flag in args else float("inf")  # noqa: E731
    return value("--budget"), value("--deadline")


def check_bar(doc: dict, args: list[str]) -> list[dict]:
    """The bar over the JSON candidates, by brute force: the recommendation meets the limits, and
    no candidate meeting them is faster (budget alone) or cheaper (deadline, or both)."""
    budget, deadline = limits_of(args)
    ok = [c for c in doc["candidates"] if c["cost_usd"] <= budget and c["hours"] <= deadline]
    assert len(doc["recommendations"]) == (1 if ok else 0)
    for rec in doc["recommendations"]:
        assert rec["cost_usd"] <= budget and rec["hours"] <= deadline and rec["chosen"]
        if deadline == float("inf"):
            assert not any(c["hours"] < rec["hours"] for c in ok), "a plan within budget is faster"
        else:
            assert not any(c["cost_usd"] < rec["cost_usd"] for c in ok), "a plan meeting the limits is cheaper"
        assert 0 <= rec["p_meet"] <= 1 and rec["hours_low"] <= rec["hours"] <= rec["hours_high"]
    if not ok:
        assert doc["workloads"][0]["status"] == "none-qualifies" and doc["workloads"][0]["closest"]
    return ok


@pytest.mark.parametrize("args", [["--budget", "20000"], ["--deadline", "48"]])
def test_llm7b_bar_through_the_cli(args):
    check_bar(recommend_json(*args), args)


# ResNet-50 for 90 epochs of ImageNet at 81 images per GPU; prices are test inputs in the range of
# T4 cloud list prices.
POLLUX_JOB = 'samples = "115.3M"'
POLLUX_TIERS = """[[tiers]]
name = "on-demand"
usd_per_gpu_hour = 0.98
[[tiers]]
name = "spot"
usd_per_gpu_hour = 0.40
preemptions_per_node_hour = 0.1
restart = "5 min"
checkpoint = "30 s"
[[tiers]]
name = "reserved"
usd_per_gpu_hour = 0.62
min_hours = 24
"""


@pytest.fixture
def pollux_imagenet(tmp_path):
    """Real step times (Pollux imagenet, 81 images per GPU, 1-16 GPUs on 1-4 nodes), three tiers."""
    return write_imagenet_inputs(tmp_path, 81, POLLUX_JOB, POLLUX_TIERS)


@pytest.mark.parametrize("limits", [["--budget", "100"], ["--deadline", "10"], ["--budget", "100", "--deadline", "30"]])
def test_bar_on_real_measurements_through_the_cli(pollux_imagenet, limits):
    spec, csv_path = pollux_imagenet
    result = run_in_process("recommend", spec, "--measurements", csv_path, *limits, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert check_bar(doc, limits), "these limits leave real plans"


def test_real_measurements_table_and_plot_as_a_user_runs_it(pollux_imagenet, tmp_path):
    spec, csv_path = pollux_imagenet
    png = tmp_path / "frontier.png"
    result = run_cli("recommend", spec, "--measurements", csv_path, "--budget", "100", "--plot", png)
    assert result.returncode == 0, result.stderr
    assert "✔" in result.stdout and "Fastest plan within $100" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_uncalibrated_workloads_are_recommended_and_marked(project_without_calibrations):
    result = run_in_process("recommend", "--json", cwd=project_without_calibrations)
    assert result.returncode in (0, 3), result.stderr
    doc = json.loads(result.stdout)
    assert {w["workload"]: w["model"]["calibrated"] for w in doc["workloads"]} == {"llm7b": False, "tiny-cpu": False}
    assert all(row["calibrated"] is False for row in doc["candidates"])
    assert "warning: llm7b: uncalibrated" in result.stderr or "warning: llm7b: no calibration data" in result.stderr
    table = run_in_process("recommend", "workloads/tiny-cpu.toml", cwd=project_without_calibrations)
    assert "UNCALIBRATED" in table.stdout


def test_nothing_qualifies_as_a_user_runs_it_exits_3_with_the_json_printed():
    pytest.importorskip("advisor.scaling.model")
    result = run_cli("recommend", "--budget", "10", "--json", cwd=ROOT)
    assert result.returncode == 3, result.stderr
    doc = json.loads(result.stdout)
    statuses = {w["workload"]: w["status"] for w in doc["workloads"]}
    assert set(statuses) == {p.stem for p in WORKLOADS.glob("*.toml")}  # those without data too (--help says so)
    assert statuses["llm7b"] == "none-qualifies" and statuses["tiny-cpu"] == "ok"  # tiny-cpu costs cents
    last = result.stderr.splitlines()[-1]
    assert last.startswith("no plan meets the limits for ") and last.endswith("(exit status 3)")
    unmet = set(last.removeprefix("no plan meets the limits for ").removesuffix(" (exit status 3)").split(", "))
    assert {"bert-large", "llm7b", "rental-ethernet"} <= unmet and "tiny-cpu" not in unmet
    assert doc["candidates"] and all("global_batch" in row for row in doc["candidates"])


def test_llm7b_budget_20000_warns_about_batch_growth_and_has_no_plan_below_8_gpus():
    err: list[str] = []
    doc = recommend_json("--budget", "20000", stderr=err)
    assert min(row["gpus"] for row in doc["candidates"]) >= 8
    (rec,) = doc["recommendations"]
    assert rec["global_batch"] == 2 * rec["gpus"]
    assert "global batch of" in err[0] and "gradient_noise_scale" in err[0]
    assert any("global batch of" in line for line in doc["workloads"][0]["warnings"])


def test_spot_wall_time_over_on_demand_is_the_exact_factor_in_the_json():
    from recommend_inputs import exact_factor

    doc = recommend_json()
    rows = {(r["gpus"], r["tier"]): r for r in doc["candidates"]}
    checked = 0
    for (gpus, tier), row in rows.items():
        if tier == "spot" and (gpus, "on-demand") in rows:
            nodes = row["nodes"]
            factor, _ = exact_factor(0.05 * nodes, 2 / 60, 10 / 60)  # llm7b's spot tier
            assert row["hours"] / rows[(gpus, "on-demand")]["hours"] == pytest.approx(factor, rel=0.05)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("spec", ["workloads/bert-large.toml", "workloads/llm7b.toml", "workloads/rental-ethernet.toml",
                                  "workloads/tiny-cpu.toml"])
def test_default_pick_on_every_checked_in_workload_meets_the_bar(spec):
    doc = recommend_json(spec=spec)
    (rec,) = doc["recommendations"]
    cheapest = min(row["cost_usd"] for row in doc["candidates"])
    assert rec["objective"] == "worth-the-cost"
    assert not (rec["cost_usd"] >= 2 * cheapest and rec["efficiency"] < 0.5), rec
    if spec.endswith("rental-ethernet.toml"):
        assert rec["nodes"] == 1


def test_knife_edge_on_demand_budget_says_so_and_exits_3():
    # on-demand llm7b plans all cost ~$20.3k-20.9k (near-perfect weak scaling): $20,000 meets none on its median
    pytest.importorskip("advisor.scaling.model")
    result = run_in_process("recommend", "workloads/llm7b.toml", "--tier", "on-demand", "--budget", "20000", cwd=ROOT)
    assert result.returncode == 3, result.stderr
    assert "No plan qualifies within $20,000" in result.stdout
    assert "The budget does not discriminate" in result.stdout and "with 90% odds" in result.stdout


def test_a_prior_only_model_is_recommended_and_marked_in_process(project_without_calibrations, monkeypatch):
    # Simulates the scaling model's prior for workloads without data (calibrated = False): the CLI recommends them,
    # marks the table title, warns, and says "model": {"calibrated": false} in the JSON.
    import advisor.cli.recommend as cli_recommend
    from cli_inprocess import invoke
    from recommend_inputs import Amdahl

    class Prior(Amdahl):
        calibrated = False

    monkeypatch.setattr(cli_recommend, "build_step_time_model", lambda w, *a: Prior(0.5, 60.0, baseline_gpus=8))
    monkeypatch.chdir(project_without_calibrations)
    code, out, err = invoke("recommend", "--json")
    doc = json.loads(out)
    assert code == 0, err
    calibrated = [(w["workload"], w["model"]["calibrated"]) for w in doc["workloads"]]
    assert calibrated == [("llm7b", False), ("tiny-cpu", False)]
    assert all(row["calibrated"] is False for row in doc["recommendations"] + doc["candidates"])
    assert "warning: llm7b: no calibration data" in err
    code, out, err = invoke("recommend", "workloads/tiny-cpu.toml")
    assert code == 0 and "tiny-cpu: worth-the-cost (UNCALIBRATED" in out
