"""advisor.topology.collectives: nccl-tests' bus-bandwidth factors, hops and THE crossing rule, against
numbers worked by hand (a 7B job on H100 nodes: 450 GB/s NVLink at 3 us, 3200 Gbit/s = 400 GB/s of
NICs per node at 10 us)."""

from __future__ import annotations

import numpy as np
import pytest
from h100_job import LLM7B

from advisor.topology import collectives as C


def test_bottleneck_is_the_intra_link_in_one_node_and_the_node_nics_across():
    bw = C.bus_bandwidth(LLM7B, np.array([1, 2, 16]))
    assert bw[0] == pytest.approx(450e9)
    assert bw[1] == bw[2] == pytest.approx(3200e9 / 8)  # 3200 Gbit/s = 400 GB/s, under NVLink's 450
    assert C.crossing_bandwidth(LLM7B) == pytest.approx(400e9)


def test_the_crossing_bandwidth_is_capped_by_the_intra_node_link():
    fast = LLM7B.model_copy(update={"cluster": LLM7B.cluster.model_copy(update={"inter_node_bandwidth": 900e9})})
    assert C.crossing_bandwidth(fast) == pytest.approx(450e9)


def test_hops_ring_inside_tree_across_half_for_one_pass_one_for_a_send():
    ring, tree = C.hops("all_reduce", np.array([8.0, 64.0]))
    assert ring.tolist() == [14.0, 126.0] and tree.tolist() == pytest.approx([6.0, 12.0])
    _, ring_across = C.hops("all_reduce", np.array([64.0]), inter_hops="ring")
    assert ring_across[0] == 126.0
    ring, tree = C.hops("all_gather", np.array([8.0]))
    assert ring[0] == 7.0 and tree[0] == pytest.approx(3.0)
    assert [h[0] for h in C.hops("send_recv", np.array([2.0]))] == [1.0, 1.0]


def test_bus_bandwidth_matches_nccl_tests_definition():
    # nccl-tests: busbw = size/time * 2(n-1)/n for all_reduce.
    assert C.bus_bandwidth_gbps("all_reduce", 8, 1e9, 0.01) == pytest.approx(100 * 2 * 7 / 8)
    assert C.bus_bandwidth_gbps("all_gather", 8, 1e9, 0.01) == pytest.approx(100 * 7 / 8)


def load(group, stride, gpus, nodes, op="all_reduce"):
    one = np.ones(1)
    return C.LinkLoad.of(op, np.array([group]), np.array([stride]), np.array([gpus]), np.array([nodes]), one, one)


def test_a_group_in_one_node_uses_only_the_intra_link():
    got = load(8, 1, 16, 2)  # the first 8 ranks: node 0
    assert (got.intra_bytes[0], got.inter_bytes[0]) == (1.0, 0.0)
    assert got.intra_hops[0] == 14.0 and got.inter_hops[0] == 0.0


def test_a_group_with_several_members_per_node_counts_on_both_links():
    got = load(16, 1, 16, 2, op="reduce_scatter")  # flat FSDP over 2 nodes: 8 members per node, 8 GPUs per node
    assert (got.intra_bytes[0], got.inter_bytes[0]) == (1.0, 1.0)
    assert got.inter_hops[0] == pytest.approx(4.0) and got.intra_hops[0] == 0.0
    # an all-reduce on 2 nodes takes the tree: the buffer (bus / 2·15/16) once through the NICs, an
    # all-reduce over the node's 8 on NVLink (test_crossing.py has the nccl-tests check)
    tree = load(16, 1, 16, 2)
    assert tree.inter_bytes[0] == pytest.approx(16 / 30) and tree.intra_bytes[0] == pytest.approx(2 * 7 / 8 * 16 / 30)
    assert tree.inter_hops[0] == pytest.approx(8.0)


def test_one_member_per_node_goes_straight_to_the_nic_once_per_local_rank():
    # HSDP's replica group over 4 nodes of 8: stride 8, one member per node; the node's 8 local ranks
    # each run their own replica ring through its NICs, and no byte of it crosses NVLink
    got = load(4, 8, 32, 4)
    assert (got.intra_bytes[0], got.inter_bytes[0]) == (0.0, 8.0)


def test_loads_add_and_price_at_the_declared_speeds():
    total = C.LinkLoad.zero((1,)) + load(8, 1, 16, 2) + load(16, 1, 16, 2, op="reduce_scatter")
    s = total.seconds(LLM7B)
    assert s.intra_bytes[0] == 2.0 and s.inter_bytes[0] == 1.0
    # the crossing collective is pipelined: its NVLink byte and NIC byte overlap, the slower (NICs) counts
    assert s.intra_bandwidth[0] == pytest.approx(1.0 / 450e9) and s.inter_bandwidth[0] == pytest.approx(1.0 / 400e9)
    assert s.intra_latency[0] == pytest.approx(14 * 3e-6) and s.inter_latency[0] == pytest.approx(4 * 10e-6)
