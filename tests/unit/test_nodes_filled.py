"""One rounding of a bare GPU count to the nodes it fills (advisor.spec.nodes_filled), read by
`Workload.nodes`, advisor.placement's bare `N` and init's calibration counts alike."""

from __future__ import annotations

import numpy as np

from advisor.cli.init import _calibration_counts
from advisor.placement import parse_placements
from advisor.spec import load_workload, nodes_filled
from conftest import WORKLOADS


def test_every_caller_rounds_a_bare_count_up_to_whole_nodes():
    w = load_workload(WORKLOADS / "llm7b.toml")  # 8 GPUs per node
    counts = [1, 7, 8, 9, 16, 24, 1024]
    assert [nodes_filled(g, 8) for g in counts] == [1, 1, 1, 2, 2, 3, 128]
    assert [w.nodes(g) for g in counts] == [nodes_filled(g, 8) for g in counts]
    assert w.nodes(np.array(counts)).tolist() == [1, 1, 1, 2, 2, 3, 128]
    assert parse_placements("1,8,16,24,64@16", 8) == [(1, 1), (8, 1), (16, 2), (24, 3), (64, 16)]
    assert parse_placements("6,12,3", 3) == [(6, 2), (12, 4), (3, 1)]
    # 3 per node: 8 and 16 fill 3 and 6 nodes unevenly, so one node and two whole nodes (3, 6) are added
    assert _calibration_counts(3, 64) == [1, 2, 3, 4, 6]
    assert _calibration_counts(8, 64) == [1, 2, 4, 8, 16]
