"""`advisor plan-calibration`: node-aware experiment design within a budget."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
LLM7B = ROOT / "workloads" / "llm7b.toml"
RENTAL = ROOT / "workloads" / "rental-ethernet.toml"


def _plan(*args):
    code, out, err = invoke("plan-calibration", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_llm7b_within_300_dollars_over_three_node_counts():
    plan = _plan(LLM7B, "--budget", "300")
    assert plan["total"]["usd"] <= 300
    assert len({r["nodes"] for r in plan["runs"]}) >= 3
    price = plan["usd_per_gpu_hour"]
    for r in plan["runs"]:
        # billed whole nodes beyond one node; start-up plus (warm-up + timed) x 2 steps at least
        assert r["billed_gpus"] == (r["gpus"] if r["nodes"] == 1 else 8 * r["nodes"])
        assert r["hours"] >= (plan["startup_seconds"] + 2 * 13 * r["step_seconds"]) / 3600 - 1e-9
        assert r["usd"] == pytest.approx(r["billed_gpus"] * r["hours"] * price)
    assert plan["total"]["usd"] == pytest.approx(sum(r["usd"] for r in plan["runs"]))
    assert plan["interval_90"]["after"] < plan["interval_90"]["now"]


def test_without_a_proxy_every_planned_count_holds_the_training_state(tmp_path):
    spec = tmp_path / "full.toml"
    spec.write_text(re.sub(r"(?m)^proxy_layers.*$", "", LLM7B.read_text()))
    plan = _plan(spec, "--budget", "300")
    assert len({r["nodes"] for r in plan["runs"]}) >= 3
    for r in plan["runs"]:
        assert 16 * 8.0e9 / r["gpus"] <= 80e9  # FSDP: 16 bytes per parameter (ZeRO), split over the GPUs


def test_planned_runs_pin_the_inter_node_terms_that_one_node_cannot():
    """Posterior sd of the topology model's inter-node coefficients (steps, exposed communication and
    the probes each run makes, as the fit sees them) against the prior's."""
    from advisor.calibrate.design import _Information, _StepModel
    from advisor.spec import load_workload

    w = load_workload(RENTAL)
    plan = _plan(RENTAL)
    assert {r["nodes"] for r in plan["runs"]} >= {1, 2, 3}
    sm = _StepModel(w)
    info = _Information(sm, (256, 32), [])
    names = [c.name for c in sm.design([16], [2]).columns]
    inter = [names.index(n) for n in ("inter_sync", "inter_bandwidth", "inter_latency")]
    places = [(r["gpus"], r["nodes"]) for r in plan["runs"]]

    def sd(rows):
        cov = np.linalg.inv(info.base + sum((info.row(p) for p in rows), np.zeros_like(info.base)))
        return np.sqrt(np.diag(cov))[inter]

    prior = sd([])
    assert np.all(sd([p for p in places if p[1] == 1]) > 0.99 * prior)  # one node: nothing learned
    assert np.all(sd(places) < 0.2 * prior)


def test_budget_below_the_cheapest_identifying_plan_exits_2_naming_its_cost():
    code, out, err = invoke("plan-calibration", LLM7B, "--budget", "5")
    assert code == 2 and out == ""
    cheapest = float(re.search(r"costs \$([\d,.]+)", err).group(1).replace(",", ""))
    plan = _plan(LLM7B, "--budget", str(cheapest + 1))
    assert len({r["nodes"] for r in plan["runs"]}) >= 3 and plan["total"]["usd"] <= cheapest + 1


def test_more_budget_never_leaves_a_wider_interval():
    small = _plan(LLM7B, "--budget", "40")
    large = _plan(LLM7B, "--budget", "300")
    assert large["interval_90"]["after"] <= small["interval_90"]["after"] + 1e-12
    assert small["total"]["usd"] <= 40


def test_commands_run_exactly_the_planned_placements():
    plan = _plan(LLM7B, "--budget", "100", "--max-nodes", "4")
    local = [r for r in plan["runs"] if r["nodes"] == 1]
    multi = [r for r in plan["runs"] if r["nodes"] > 1]
    words = [shlex.split(c.split("  #")[0].split(" > ")[0]) for c in plan["commands"]]
    assert words[0][words[0].index("--gpus") + 1] == ",".join(str(r["gpus"]) for r in local)
    assert words[1][words[1].index("--gpus") + 1] == ",".join(f"{r['gpus']}@{r['nodes']}" for r in multi)
    assert "--emit" in words[1] and words[1][words[1].index("--emit") + 1] == "slurm"
    assert max(r["nodes"] for r in plan["runs"]) <= 4


@pytest.mark.parametrize("args, message", [
    (("--max-nodes", "2"), "at least 3 distinct node counts"),
    (("--tier", "nope"), "tiers: no tier named 'nope'; tiers: on-demand, spot, reserved-1mo"),
    (("--startup", "soon"), "--startup"),
])
def test_bad_options_exit_2(args, message):
    code, _, err = invoke("plan-calibration", LLM7B, *args)
    assert code == 2 and message in err


def test_the_interval_now_is_predicts_at_the_target():
    """plan-calibration's "now" is predict's 90% interval at the same placement (the bar: within 10%
    of its relative width), and the promised one comes from the same model code with the runs added."""
    plan = _plan(LLM7B)
    code, out, err = invoke("predict", LLM7B, "--gpus", "1024@128", "--json")
    assert code == 0, err
    p = json.loads(out)["predictions"][0]
    width = (p["step_seconds_high"] - p["step_seconds_low"]) / p["step_seconds"]
    now = plan["interval_90"]["now_band"]
    assert now["relative_width"] == pytest.approx(width, rel=0.10)
    assert now["low"] < 0 < now["high"] and now["high"] > -now["low"]  # predict's band is skewed here
    after = plan["interval_90"]["after_band"]
    assert after["relative_width"] < now["relative_width"]
    assert plan["interval_90"]["now"] == pytest.approx(now["relative_width"] / 2)


def test_money_under_ten_dollars_keeps_its_cents():
    code, out, err = invoke("plan-calibration", LLM7B)
    assert code == 0, err
    plan = _plan(LLM7B)
    cheap = [r for r in plan["runs"] if r["usd"] < 10]
    assert cheap
    for r in cheap:
        assert f"{r['usd']:.2f}" in out
