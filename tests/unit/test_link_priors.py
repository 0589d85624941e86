"""The link prior by declared class (advisor.scaling.priors.LINK_CLASS_LOG_BW): each value recomputed
here from the published measurements it cites, and the prior it gives a workload that declares a class;
and the link factors' crossing rule on both parts of the traffic (hidden and exposed).

The busbw figures are the published ones: the nccl-tests logs of tests/fixtures/nccl-tests read with
advisor's importer, the rows of ../shared/data/published (when present), and the NCCL maintainers'
figures as the thread states them. The rates are the hardware's (GPU datasheets, NIC line rates).
"""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.imports.algorithm import busbw_ceiling_factor
from advisor.imports.nccl_tests import read_nccl_tests
from advisor.scaling.priors import DEFAULTS, LEARNED, LINK_CLASS_LOG_BW, VAGUE
from advisor.spec import workload_from_dict

ROOT = Path(__file__).resolve().parents[2]
NCCL = ROOT / "tests" / "fixtures" / "nccl-tests"
BUSBW_CSV = ROOT.parent / "shared" / "data" / "published" / "allreduce_busbw_vs_message_size.csv"


def _log_busbw(name: str) -> tuple[float, int, int]:
    """(busbw of the largest message, ranks, hosts) of a fixture log, as advisor imports it."""
    table, _ = read_nccl_tests(NCCL / name)[0]
    return table.rows[-1].busbw, table.gpus, len(table.hosts)


def _achieved(busbw: float, rate: float, gpus: int, nodes: int, algorithm: str | None = None) -> float:
    """ln(declared / achieved): achieved = busbw / (the algorithm's busbw ceiling x the declared rate)."""
    return math.log(rate * busbw_ceiling_factor(algorithm, "all_reduce", gpus, nodes) / busbw)


def _csv_busbw(system_starts: str, nodes: int) -> float:
    with BUSBW_CSV.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["system"].startswith(system_starts) and int(r["nodes"]) == nodes]
    return float(max(rows, key=lambda r: int(r["message_bytes"]))["busbw_GBps"])


def test_fixture_logs_give_the_oci_and_gcp_values():
    # OCI A100 one node: 232.20 GB/s of NVLink 3's 300 (A100 datasheet); ln 0.256
    busbw, gpus, nodes = _log_busbw("a100_1node_oci_all_reduce.log")
    assert (busbw, gpus, nodes) == (232.20, 8, 1)
    assert _achieved(busbw, 300, gpus, nodes) == pytest.approx(0.256, abs=5e-4)
    # OCI A100 two nodes, RoCEv2 16 x 100 Gbit/s = 200 GB/s per node, the 2-node tree's ceiling 1.875
    busbw, gpus, nodes = _log_busbw("a100_2node_oci_all_reduce.log")
    assert (gpus, nodes) == (16, 2)
    assert _achieved(busbw, 200, gpus, nodes) == pytest.approx(LINK_CLASS_LOG_BW["roce"], abs=5e-4)
    # GCP a3-mega, GPUDirect-TCPXO 8 x 200 Gbit/s = 200 GB/s per node, 2-node tree
    busbw, gpus, nodes = _log_busbw("h100_2node_gcp_a3mega_all_reduce.log")
    assert _achieved(busbw, 200, gpus, nodes) == pytest.approx(0.101, abs=5e-4)


@pytest.mark.skipif(not BUSBW_CSV.is_file(), reason="../shared/data/published is not present")
def test_each_class_is_the_mean_of_its_measured_systems():
    a100_oci = _log_busbw("a100_1node_oci_all_reduce.log")[0]
    nvlink = [_achieved(_csv_busbw("8x A100", 1), 300, 8, 1), _achieved(a100_oci, 300, 8, 1),
              math.log(450 / 370),  # H100 NVLink 4, ring / non-all-reduce ~370 GB/s (NVIDIA/nccl-tests #212)
              _achieved(_csv_busbw("8x H200", 1), 450, 8, 1),
              _achieved(_csv_busbw("AWS P6-B200", 1), 900, 8, 1)]
    infiniband = [math.log(50 / 47),  # NDR 400G, 46-48 GB/s per NIC with NCCL_ALGO=RING (nccl-tests #290)
                  math.log(200 / 192)]  # DGX A100 8x HDR, 192 GB/s multi-node (NVIDIA/nccl #812)
    gcp = _log_busbw("h100_2node_gcp_a3mega_all_reduce.log")[0]
    ethernet = [_achieved(gcp, 200, 16, 2), _achieved(_csv_busbw("AWS P6-B200", 4), 400, 32, 4)]
    for name, values in (("nvlink", nvlink), ("infiniband", infiniband), ("ethernet", ethernet)):
        assert sum(values) / len(values) == pytest.approx(LINK_CLASS_LOG_BW[name], abs=5e-4), name


def _workload(**cluster):
    return workload_from_dict({
        "name": "w", "model": {"params": 1e9, "layers": 8, "hidden": 1024, "heads": 8, "seq_len": 2048},
        "batch": {"policy": "fixed-global", "global_samples": 64}, "parallelism": {"strategy": "ddp"},
        "cluster": {"gpu": "H100-SXM", "max_gpus": 64, "inter_node_bandwidth": "3200 Gbit/s", **cluster},
        "job": {"steps": 10}, "tiers": [{"name": "t", "usd_per_gpu_hour": 1.0}]}, "w")


def test_a_declared_class_centres_its_link_prior_and_keeps_the_spread():
    p = LEARNED.for_workload(_workload(intra_node_link="nvlink", inter_node_link="infiniband"))
    assert (p.log_intra_bw, p.log_inter_bw) == (0.138, 0.051)
    assert (p.log_intra_bw_sd, p.log_inter_bw_sd) == (LEARNED.log_intra_bw_sd, LEARNED.log_inter_bw_sd)
    roce = LEARNED.for_workload(_workload(inter_node_link="roce"))
    assert (roce.log_intra_bw, roce.log_inter_bw) == (LEARNED.log_intra_bw, 0.671)


def test_undeclared_or_unmeasured_class_and_vague_priors_keep_the_learned_prior():
    for w in (_workload(), _workload(intra_node_link="pcie")):
        p = LEARNED.for_workload(w)
        assert (p.log_intra_bw, p.log_inter_bw) == (LEARNED.log_intra_bw, LEARNED.log_inter_bw)
    # learning fits the corpus under VAGUE: a declared class must not pull those fits
    v = VAGUE.for_workload(_workload(intra_node_link="nvlink", inter_node_link="infiniband"))
    assert (v.log_intra_bw, v.log_inter_bw) == (VAGUE.log_intra_bw, VAGUE.log_inter_bw)
    assert replace(DEFAULTS, by_link_class=False).for_workload(_workload(inter_node_link="roce")).log_inter_bw == 1.0


def test_an_unknown_class_is_refused_naming_the_field():
    with pytest.raises(Exception, match="inter_node_link"):
        _workload(inter_node_link="omnipath")


def test_exposed_traffic_crosses_nodes_by_the_same_rule_as_the_hidden():
    """Overlap per traffic class splits each collective's bytes; the crossing rule at the fitted link
    factors (families.crossing_columns) prices each part, so hidden + exposed columns are the whole
    traffic's: with NVLink measured 50x slower than declared every crossing byte is NVLink-bound and no
    inter-node bandwidth seconds are left in either part (DDP's last gradient bucket is the exposed one)."""
    import numpy as np

    from advisor.scaling import features as F
    from advisor.scaling.families import FAMILIES, Coverage, crossing_columns

    w = _workload()
    g, n, b = np.array([16.0, 32.0]), np.array([2.0, 4.0]), np.array([64.0, 64.0])
    for speeds in ((50.0, 1.0), (1.0, 1.0)):
        d = FAMILIES["topology"].design(w, g, n, b, Coverage(True, False, speeds))
        col = {c.name: d.X[:, j] for j, c in enumerate(d.columns)}
        whole = crossing_columns(w, F.link_seconds_at_declared(w, g, n), speeds)
        assert col["exposed_inter_bandwidth"].max() > 0 or speeds[0] > 1
        for k, name in enumerate(("intra_bandwidth", "inter_bandwidth")):
            np.testing.assert_allclose(col[name] + col[f"exposed_{name}"], whole[k], rtol=1e-9)
        if speeds[0] > 1:
            assert col["inter_bandwidth"].max() == col["exposed_inter_bandwidth"].max() == 0.0
