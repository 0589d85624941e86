"""The fit uses what was measured: each run in the layout it ran, and bounds that do not break the
fit at the measured counts. Measured values are the checked-in published calibrations' rows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from advisor.calibration_data import calibration_from_dict, load_calibration
from advisor.measurements import recorded_layout
from advisor.scaling.model import build_model
from advisor.spec import load_workload

ROOT = Path(__file__).resolve().parents[2]
BERT = ROOT / "workloads" / "bert-large.toml"
BERT_CAL = ROOT / "calibrations" / "bert-large_published_nvidia_dle.toml"


def _cal(runs, **extra):
    return calibration_from_dict({"schema": 1, "workload": "x", "provenance": {"source": "measured",
                                  "created": "2026-12-01T00:00:00Z"}, "runs": runs, **extra}, "<test>")


def test_recorded_layout_from_run_labels_setup_and_environment():
    step = [1.0]
    runs = [{"gpus": 8, "nodes": 1, "step_seconds": step, "layout": "dp_shard=8, dp_replicate=1, tp=1, pp=1"},
            {"gpus": 16, "nodes": 2, "step_seconds": step, "layout": "dp_shard=8, dp_replicate=2, tp=1, pp=1"}]
    assert recorded_layout(_cal(runs)) == ("hsdp", 1, 8, 1, 1, 1)  # the widest run decides: HSDP's node reads as FSDP
    ddp = [{"gpus": 4, "nodes": 1, "step_seconds": step, "layout": "dp_shard=1, dp_replicate=4, tp=2, pp=1"}]
    assert recorded_layout(_cal(ddp)) == ("ddp", 2, None, 1, 1, 1)
    assert recorded_layout(_cal([{"gpus": 2, "nodes": 1, "step_seconds": step}],
                                setup={"parallelism.strategy": "fsdp"})) == ("fsdp", None, None, None, None, None)
    assert recorded_layout(_cal([{"gpus": 2, "nodes": 1, "step_seconds": step}])) is None
    assert recorded_layout(load_calibration(BERT_CAL)) == ("ddp",) + (None,) * 5  # Horovod: [environment]


def test_auto_strategy_fits_ddp_runs_as_ddp(tmp_path):
    """bert-large measured with DDP (Horovod), spec switched to strategy = "auto": the DDP layout at a
    measured count is priced as measured (5.873 s at 32 GPUs), not as the FSDP fit made it (5.32 s)."""
    spec = tmp_path / "bert-large.toml"
    spec.write_text(re.sub(r'(?m)^strategy = "ddp"', 'strategy = "auto"', BERT.read_text()))
    auto = build_model(load_workload(spec), calibration=BERT_CAL)
    declared = build_model(load_workload(BERT), calibration=BERT_CAL)
    from advisor.topology.layouts import with_layout

    as_ddp = auto.for_workload(with_layout(auto.workload, "ddp"))
    g, n = np.array([32.0]), np.array([4.0])
    assert as_ddp.step_time(g, n)[0][0] == pytest.approx(5.873, rel=0.02)
    assert as_ddp.step_time(g, n)[0][0] == pytest.approx(declared.step_time(g, n)[0][0], rel=1e-9)
    assert [r["error"] for r in auto.residuals()] == pytest.approx([r["error"] for r in declared.residuals()])


def test_the_band_at_the_measured_counts_stays_near_the_measurement():
    """llm7b: one published reading at 8 and at 128 GPUs; parameters held at a bound by the fit must
    not open the band there (it was -3%/+71%)."""
    m = build_model(load_workload(ROOT / "workloads" / "llm7b.toml"))
    med, lo, hi = m.step_time(np.array([8.0, 128.0]), np.array([1.0, 16.0]))
    assert np.all(hi / med < 1.15) and np.all(lo / med > 0.85)
    assert np.all(lo < med) and np.all(med < hi)


@pytest.mark.parametrize("inter", ["800 Gbit/s", "12800 Gbit/s"])
def test_redeclaring_the_inter_node_link_does_not_move_one_node_steps(tmp_path, inter):
    """llm7b's published runs (8@1 and 128@16) fitted with another declared inter-node link: the
    multi-node prediction may change, a one-node step may not (it never uses that link), even where
    the declared link is slower than the 128-GPU run proves it is (the bound then holds that fit)."""
    spec = tmp_path / "llm7b.toml"
    spec.write_text(re.sub(r'(?m)^inter_node_bandwidth = .*$', f'inter_node_bandwidth = "{inter}"',
                           (ROOT / "workloads" / "llm7b.toml").read_text()))
    cal = ROOT / "calibrations" / "llm7b_published_torchtitan.toml"
    base = build_model(load_workload(ROOT / "workloads" / "llm7b.toml"), calibration=cal)
    other = build_model(load_workload(spec), calibration=cal)
    g, n = np.array([1.0, 2.0, 4.0, 8.0]), np.ones(4)
    assert other.step_time(g, n)[0] == pytest.approx(base.step_time(g, n)[0], rel=1e-9)


def test_small_batch_penalty_by_hand():
    from advisor.scaling.small_batch import small_batch_efficiency, small_batch_penalty, tokens_per_micro_batch

    # R = 200 FLOP/byte: 512 tokens wait 200/512 of their compute time on the weights
    assert small_batch_penalty(np.array([512.0]))[0] == pytest.approx(0.390625)
    assert small_batch_efficiency(np.array([200.0]))[0] == pytest.approx(0.5)
    assert small_batch_penalty(np.array([0.0]))[0] == 0.0
    w = load_workload(ROOT / "workloads" / "llm7b.toml")  # 2 samples x 8192 tokens per GPU, micro 2
    assert tokens_per_micro_batch(w, np.array([8.0]), np.array([16.0]))[0] == 16384.0


def test_a_smaller_micro_batch_than_any_measured_is_predicted_slower_per_sample():
    """Constant MFU made rows with fewer tokens per micro-batch than any fitted row too fast; the
    small-batch column makes per-sample compute grow as the micro-batch shrinks."""
    w = load_workload(ROOT / "workloads" / "llm7b.toml")
    m = build_model(w)
    g, n = np.array([8.0, 8.0]), np.ones(2)
    per_sample = m.step_time(g, n, np.array([16.0, 8.0]))[0] / np.array([16.0, 8.0])
    assert per_sample[1] > per_sample[0] * 1.003


def test_crossing_columns_take_the_slower_link_at_the_fitted_factors_by_hand():
    """Crossing traffic of 10 GB on NVLink (100 GB/s declared: 0.1 s) and 5 GB through the NICs (50 GB/s:
    0.1 s): at intra x2, inter x1 the NVLink hop is the slower (0.2 s against 0.1 s) and its seconds go to
    the intra column; at intra x1, inter x3 the NICs are (0.3 s) and theirs stay in the inter column."""
    from types import SimpleNamespace

    from advisor.scaling.families import crossing_columns

    w = SimpleNamespace(intra_node_bandwidth=100e9, cluster=SimpleNamespace(inter_node_bandwidth=50e9))
    links = SimpleNamespace(intra_bandwidth=np.array([0.02]), inter_bandwidth=np.array([0.1]),
                            intra_bytes=np.array([12e9]), inter_bytes=np.array([5e9]))  # 2 GB of one-node traffic
    intra, inter = crossing_columns(w, links, (2.0, 1.0))
    assert (intra[0], inter[0]) == (pytest.approx(0.12), 0.0)
    intra, inter = crossing_columns(w, links, (1.0, 3.0))
    assert (intra[0], inter[0]) == (pytest.approx(0.02), pytest.approx(0.1))
    assert crossing_columns(w, links, None) == (links.intra_bandwidth, links.inter_bandwidth)


def test_a_slow_intra_link_measured_on_one_node_stays_slow_across_nodes():
    """Transformer-XL fp16 on DGX-2H (16 GPUs a node), published at 1-16 GPUs on one node: the fit
    finds the intra-node link slower than declared. Priced at the declared NVLink on the crossing
    traffic, 32 GPUs on 2 nodes came out 28% faster per GPU than 16 on one (the published 32-GPU row
    is 0.8% slower). Per-GPU throughput across nodes may not beat the full node's."""
    from advisor.scaling.model import ScalingModel, load_measurements

    w = load_workload(ROOT / "benchmarks" / "workloads" / "transformerxl-large-pyt-dgx2h.toml")
    data = load_measurements(w, measurements=ROOT / "benchmarks" / "data" / "transformerxl-large-pyt-dgx2h.csv")
    fit = data.subset(data.nodes == 1)
    m = ScalingModel(w, fit)
    b16 = float(fit.global_batch[fit.gpus == 16].min())
    step = m.step_time(np.array([16.0, 32.0]), np.array([1.0, 2.0]), np.array([b16, 2 * b16]))[0]
    assert step[1] >= step[0] * 0.99
