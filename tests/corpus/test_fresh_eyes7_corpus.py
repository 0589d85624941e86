"""Fresh eyes, round 7: outputs and writers under hostile-but-valid use, each a class of bug found and
fixed at its root (the module named above each test). Expectations are worked from the inputs and the
sources by hand, never from the model; each case's comment says what it did before the fix."""

from __future__ import annotations

import re

import pytest
from spec_edit import edited_toml

from cli_inprocess import assert_refused, invoke
from conftest import ROOT, WORKLOADS

LLM7B = WORKLOADS / "llm7b.toml"          # FSDP, H100-SXM, 8 per node
RENTAL = WORKLOADS / "rental-ethernet.toml"   # on-demand and spot tiers, 8 per node, max 256 GPUs
TITAN_LOG = ROOT / "tests" / "fixtures" / "torchtitan" / "debug_model_pr1437.log"  # 7 steps at 8 GPUs


# -- --out writes TOML (advisor.cli.options.output_path, suffixes=(".toml",)) --------------------------------
# `advisor init --out x.csv` and `advisor import torchtitan ... --out y.csv` wrote a TOML file under a CSV
# name (exit 0), as --plot x.html wrote a PNG before round 6. A name without a suffix is left to the
# writer, as for --plot (`--plot /dev/null`).

@pytest.mark.parametrize("name", ["x.csv", "x.json", "x.toml.bak"])
def test_init_out_refuses_a_suffix_other_than_toml(tmp_path, name):
    path = tmp_path / name
    assert_refused(*invoke("init", "--out", path), "--out: writes TOML only: give a path ending in .toml")
    assert not path.exists()


def test_import_out_refuses_a_suffix_other_than_toml(tmp_path):
    path = tmp_path / "cal.csv"
    assert_refused(*invoke("import", "torchtitan", LLM7B, TITAN_LOG, "--gpus", "8", "--out", path),
                   "--out: writes TOML only", "(got ")
    assert not path.exists()


def test_calibrate_out_refuses_a_suffix_other_than_toml(tmp_path):
    path = tmp_path / "cal.csv"
    assert_refused(*invoke("calibrate", LLM7B, "--collect", tmp_path, "--out", path), "--out: writes TOML only")
    assert not path.exists()


@pytest.mark.parametrize("name", ["x.toml", "x.TOML", "noext"])
def test_init_out_accepts_toml_and_a_name_without_suffix(tmp_path, name):
    code, _, err = invoke("init", "--out", tmp_path / name)
    assert code == 0 and (tmp_path / name).exists(), err


# -- two output files: both checked before either is written (advisor.cli.app.check_output_paths, --------
# advisor.fileio.check_output_folder). `predict --plot ok.png --html nodir/x.html` wrote ok.png, then
# failed on the page: exit 2 with one of the two written.

@pytest.mark.parametrize("bad", ["nodir/x.html", "afile/x.html"])
def test_a_bad_html_path_is_refused_before_the_plot_is_written(tmp_path, bad):
    (tmp_path / "afile").write_text("")
    plot, page = tmp_path / "ok.png", tmp_path / bad
    assert_refused(*invoke("predict", LLM7B, "--gpus", "8", "--plot", plot, "--html", page),
                   f"{page}: cannot write: ")
    assert not plot.exists()


@pytest.mark.parametrize("bad", ["nodir/x.png", "afile/x.png"])
def test_a_bad_plot_path_is_refused_before_the_page_is_written(tmp_path, bad):
    (tmp_path / "afile").write_text("")
    plot, page = tmp_path / bad, tmp_path / "ok.html"
    assert_refused(*invoke("recommend", LLM7B, "--html", page, "--plot", plot), f"{plot}: cannot write: ")
    assert not page.exists()


# -- plain numbers in tables and sentences (advisor.text.number) --------------------------------------------
# Python's `:.2g`/`:.3g` switch to exponent notation from 1,000 (or 100): plan-calibration's step column
# printed 3.18e+04 for a whole 70B model's step, the preemption sentence "1.9e+03 preemptions/h" for a
# tier preempted 60 times a node-hour over 32 nodes, and `fit` a coefficient as 2.296e+09.

def _spec(tmp_path, base, edit):
    return edited_toml(base, edit, tmp_path / "spec.toml")


def test_plan_calibration_step_seconds_in_plain_notation(tmp_path):
    def whole_model(doc):
        doc["batch"]["global_samples"] = 65536          # 8 samples a GPU at 8192 GPUs: long steps at 8 GPUs
        doc["calibration"]["proxy_layers"] = doc["model"]["layers"]   # the whole model: no proxy shortening
    code, out, err = invoke("plan-calibration", _spec(tmp_path, WORKLOADS / "llm70b.toml", whole_model))
    assert code == 0, err
    assert not re.search(r"\de[+-]\d", out), out


def test_a_preemption_rate_over_1000_an_hour_reads_in_plain_notation(tmp_path):
    def preempted(doc):       # every tier, on-demand too, preempted 60 times a node-hour (the bound);
        doc["name"] = "preempted"   # no checked-in calibration: the prior's plan is the largest, 32 nodes
        for tier in doc["tiers"]:
            tier["preemptions_per_node_hour"] = 60
    code, out, err = invoke("recommend", _spec(tmp_path, RENTAL, preempted))
    assert code in (0, 3), err
    rates = re.findall(r"([\d,.e+]+) preemptions/h", " ".join(out.split()))  # sentences wrap
    assert rates and all("e" not in r for r in rates), rates



# -- a free tier (advisor.planning.explain.spot_sentence) ----------------------------------------------------
# usd_per_gpu_hour = 0 on both tiers: every plan costs $0.00, spot's cost equals on-demand's at every count
# (recommend.spot_payoff compares with >=), and the sentence said spot's cost "is above" on-demand's.

def test_a_spot_tier_as_free_as_on_demand_is_not_said_to_cost_more(tmp_path):
    def free(doc):
        for tier in doc["tiers"]:
            tier["usd_per_gpu_hour"] = 0
    code, out, err = invoke("recommend", _spec(tmp_path, RENTAL, free))
    text = " ".join(out.split())
    assert code == 0, err
    assert "never pays off here: at every count its expected cost (preemptions included) is at or above" in text, text


# -- a cost many times another (advisor.planning.explain._more_cost) ----------------------------------------
# One GPU, a tier at $0.0001/GPU-h (preempted, but restarting at once: as fast as on-demand) next to
# on-demand at $2.10: the stop sentence read "would save 0% of the time for 2099900% more cost".

def test_a_step_that_multiplies_the_cost_reads_as_a_multiplier(tmp_path):
    def one_gpu_and_a_nearly_free_tier(doc):
        doc["name"] = "one-gpu"   # no checked-in calibration
        doc["model"].update(params="1.0B", layers=16, hidden=2048, heads=16)   # fits one 96 GB GPU
        doc["cluster"].update(max_gpus=1, gpus_per_node=1)
        doc["calibration"]["gpus"] = [1]
        doc["tiers"] = [doc["tiers"][0], {"name": "cheap", "usd_per_gpu_hour": 0.0001,
                                          "preemptions_per_node_hour": 60, "restart": "0 s"}]
    code, out, err = invoke("recommend", _spec(tmp_path, RENTAL, one_gpu_and_a_nearly_free_tier))
    text = " ".join(out.split())
    assert code == 0, err
    assert "21,000x the cost" in text and not re.search(r"\d{4,}% more cost", text), text
