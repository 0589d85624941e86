"""advisor.scaling.evidence: what the runs span and the caveats, on hand-made inputs (no fit)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from advisor.scaling.evidence import BUSBW_WARN_FRACTION, Extent, busbw_warnings, extrapolation_warnings
from advisor.scaling.fitting import FitData
from advisor.spec import load_workload
from conftest import WORKLOADS

LLM7B = load_workload(WORKLOADS / "llm7b.toml")  # 450 GB/s NVLink inside a node


def data(*placements) -> FitData:
    g = np.array([p[0] for p in placements], float)
    n = np.array([p[1] for p in placements], float)
    return FitData(gpus=g, nodes=n, batch=g, step=np.ones_like(g), comm=np.full_like(g, np.nan),
                   count=np.ones_like(g))


def test_the_extent_is_the_smallest_count_on_its_fewest_nodes_and_the_largest_counts():
    e = Extent.of(data((8, 2), (4, 1), (4, 2), (32, 4)))
    assert (e.baseline_gpus, e.baseline_nodes, e.max_gpus, e.max_nodes) == (4, 1, 32, 4) and e.measured


def test_nothing_measured_is_a_baseline_of_one_gpu_and_no_distance():
    e = Extent.of(data())
    assert e == Extent() and (e.baseline_gpus, e.baseline_nodes, e.measured) == (1, 1, False)
    assert e.distance(np.array([64.0]), np.array([8.0])).tolist() == [1.0]
    assert extrapolation_warnings(e, np.array([4096.0]), np.array([512.0])) == []


def test_distance_is_the_larger_of_the_count_and_node_ratios_and_at_least_one():
    e = Extent(baseline_gpus=1, baseline_nodes=1, max_gpus=16, max_nodes=2)
    d = e.distance(np.array([8.0, 64.0, 16.0]), np.array([1.0, 8.0, 4.0]))
    assert d.tolist() == [1.0, 4.0, 2.0]


def test_extrapolation_warnings_name_the_count_and_the_node_count():
    e = Extent(baseline_gpus=1, baseline_nodes=1, max_gpus=16, max_nodes=2)
    assert extrapolation_warnings(e, np.array([64.0]), np.array([2.0])) == []  # 4x is not past the threshold
    lines = extrapolation_warnings(e, np.array([16.0, 128.0]), np.array([2.0, 16.0]))
    assert lines == ["extrapolating to 128 GPUs, 8x the largest measured count (16): treat as an estimate, see the "
                     "interval",
                     "predicting up to 16 nodes, past the largest measured node count (2)"]


def probe(busbw, nbytes=1 << 20, op="all_reduce", gpus=8, nodes=1):
    return SimpleNamespace(op=op, gpus=gpus, nodes=nodes, bytes=nbytes, busbw=busbw)


def test_only_the_largest_message_of_a_placement_is_judged_against_the_declared_link():
    # small messages are latency-bound: 10 GB/s at 1 MiB says nothing; 400 GB/s at 1 GiB is 89% of 450
    assert busbw_warnings(LLM7B, [probe(10.0), probe(400.0, nbytes=1 << 30)]) == []


def test_a_probe_far_below_or_above_the_declared_link_is_named():
    slow = busbw_warnings(LLM7B, [probe(BUSBW_WARN_FRACTION * 450 * 0.9)])
    assert len(slow) == 1 and "all_reduce (ring) on 8 GPUs over 1 node reached 101 GB/s bus bandwidth, 22%" in slow[0]
    assert "likely a misconfiguration" in slow[0]
    fast = busbw_warnings(LLM7B, [probe(600.0)])
    assert len(fast) == 1
    assert "measured 600 GB/s bus bandwidth, above the 450 GB/s it reaches on the declared intra-node" in fast[0]
