"""advisor.integrations.skypilot: the job's seconds on a candidate sky.Resources equal what
`advisor predict` gives for the whole job there (steps x step time), calibrated on the spec's GPU,
from the prior (logged once) on other catalog accelerators; nothing of skypilot imported."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys

import pytest

from advisor.integrations.skypilot import time_estimator
from cli_inprocess import invoke
from conftest import ROOT, WORKLOADS

LLM7B = WORKLOADS / "llm7b.toml"


class Resources:
    """The part of sky.Resources an estimator reads."""

    def __init__(self, accelerators):
        self.accelerators = accelerators


def _predicted_job_seconds(gpus: int, nodes: int) -> float:
    code, out, err = invoke("predict", LLM7B, "--gpus", f"{gpus}@{nodes}", "--json")
    assert code == 0, err
    (row,) = json.loads(out)["predictions"]
    steps = math.ceil(19.5e6 / row["global_batch"])  # llm7b: job.samples over the global batch per step
    return steps * row["step_seconds"]


@pytest.mark.parametrize("gpus, nodes", [(8, 1), (128, 16)])  # the placements llm7b's calibration measured
def test_seconds_are_predicts_whole_job_at_a_measured_placement(gpus, nodes):
    seconds = time_estimator(LLM7B, num_nodes=nodes)(Resources({"H100": gpus // nodes}))
    assert seconds == pytest.approx(_predicted_job_seconds(gpus, nodes), rel=0.05)


def test_other_accelerators_use_the_prior_and_say_so_once(caplog):
    estimate = time_estimator(LLM7B, num_nodes=2)
    with caplog.at_level(logging.WARNING, logger="advisor.integrations.skypilot"):
        h200 = [estimate(Resources({"H200": 8})) for _ in range(3)]
        a100 = estimate(Resources({"A100": 8}))  # SkyPilot's A100 is the 40 GB card
    said = [r.getMessage() for r in caplog.records]
    assert len([s for s in said if "H200" in s]) == 1 and "uncalibrated" in said[0]
    assert any("A100-SXM-40GB" in s for s in said)
    assert h200[0] == h200[1] > 0 and math.isfinite(h200[0]) and a100 > h200[0]


def test_no_estimate_is_infinite_never_the_cheapest():
    estimate = time_estimator(LLM7B, num_nodes=1)
    assert estimate(Resources(None)) == math.inf
    assert estimate(Resources({"NOT-A-GPU": 8})) == math.inf


def test_importing_it_imports_no_skypilot_and_no_torch():
    code = ("import sys, advisor.integrations.skypilot; "
            "assert 'sky' not in sys.modules and 'torch' not in sys.modules")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_with_the_installed_skypilot_when_present():
    sky = pytest.importorskip("sky", reason="skypilot not installed; the duck-typed Resources above stand in")
    from advisor.integrations.skypilot import attach

    task = sky.Task(run="true", num_nodes=16)
    task.set_resources(sky.Resources(accelerators="H100:8"))
    attach(task, LLM7B)
    seconds = task.estimate_runtime(sky.Resources(accelerators="H100:8"))
    assert seconds == pytest.approx(_predicted_job_seconds(128, 16), rel=0.05)
