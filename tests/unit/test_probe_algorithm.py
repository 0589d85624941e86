"""nccl-tests probes read with their algorithm, and a calibration of probes alone predicts.

The clusters' NICs are the documented ones (tests/fixtures/nccl-tests/README.md): GCP a3-mega, 8 x
200 Gbit/s GPUDirect-TCPXO per node (1600 Gbit/s); OCI BM.GPU4.8, 16 x 100 Gbit/s RoCEv2 per node
(1600 Gbit/s). The ceilings below are computed by hand from the algorithm's bytes per node
(advisor/imports/algorithm.py docstring), not by the code under test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from advisor.calibration_data import load_calibration
from advisor.imports.algorithm import algorithm_from_text, busbw_ceiling_factor, expected_algorithm
from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
NCCL = ROOT / "tests" / "fixtures" / "nccl-tests"
H100 = NCCL / "h100_2node_gcp_a3mega_all_reduce.log"
A100 = NCCL / "a100_2node_oci_all_reduce.log"


def _spec(tmp_path: Path, name: str, gpu: str, intra: str, inter: str) -> Path:
    text = (ROOT / "workloads" / "llm7b.toml").read_text()
    text = text.replace('name = "llm7b"', f'name = "{name}"')
    text = re.sub(r'(?m)^gpu = .*$', f'gpu = "{gpu}"', text)
    text = re.sub(r'(?m)^gpu_memory = .*$', "", text)
    text = re.sub(r'(?m)^intra_node_bandwidth = .*$', f'intra_node_bandwidth = "{intra}"', text)
    text = re.sub(r'(?m)^inter_node_bandwidth = .*$', f'inter_node_bandwidth = "{inter}"', text)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def _import(spec: Path, log: Path, out: Path) -> str:
    code, _, err = invoke("import", "nccl-tests", spec, log, "--out", out)
    assert code == 0, err
    return err


def test_ceiling_factors_by_hand():
    # 16 ranks on 2 nodes: each node sends S through its NICs, a ring 2(15/16)S: 1.875x the ring's busbw
    assert busbw_ceiling_factor("tree", "all_reduce", 16, 2) == pytest.approx(1.875)
    assert busbw_ceiling_factor("tree", "all_reduce", 32, 4) == pytest.approx(31 / 32)
    assert busbw_ceiling_factor("ring", "all_reduce", 16, 2) == 1.0
    assert busbw_ceiling_factor("collnet_direct", "all_reduce", 16, 2) == pytest.approx(1.875)
    assert busbw_ceiling_factor("tree", "all_gather", 16, 2) == 1.0
    assert busbw_ceiling_factor(None, "all_reduce", 16, 2) == pytest.approx(1.875)  # expected: tree
    assert expected_algorithm("all_reduce", 2) == "tree" and expected_algorithm("all_reduce", 4) == "ring"


@pytest.mark.parametrize(("text", "algo"), [
    ("mpirun -x NCCL_ALGO=Tree ./all_reduce_perf", "tree"),
    ("host:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring", "ring"),
    ("export NCCL_ALGO=NVLSTree", "nvls_tree"),
    ("NCCL_ALGO=Tree,Ring", None),  # NCCL still chooses
    ("NCCL_ALGO=^NVLS", None),
    ("no setting here", None),
])
def test_nccl_algo_read_from_text(text, algo):
    assert algorithm_from_text(text) == algo


@pytest.mark.parametrize("log", [H100, A100])
def test_two_node_fixtures_no_false_alarm_with_the_documented_nics(tmp_path, log):
    gpu, intra = ("H100-SXM", "450 GB/s") if log == H100 else ("A100-SXM-40GB", "300 GB/s")
    spec = _spec(tmp_path, "nics", gpu, intra, "1600 Gbit/s")
    err = _import(spec, log, tmp_path / "nccl.toml")
    assert "tree (expected on 2 nodes" in err and "warning" not in err
    code, out, err = invoke("predict", spec, "--calibration", tmp_path / "nccl.toml", "--gpus", "16@2,32@4", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert not any("raise the declared" in w for w in doc["warnings"])


def test_nccl_only_calibration_predicts_and_says_what_was_measured(tmp_path):
    spec = _spec(tmp_path, "a3mega", "H100-SXM", "450 GB/s", "1600 Gbit/s")
    _import(spec, H100, tmp_path / "nccl.toml")
    code, out, err = invoke("predict", spec, "--calibration", tmp_path / "nccl.toml", "--gpus", "16@2,32@4", "--json")
    assert code == 0, err
    model = json.loads(out)["model"]
    assert model["calibrated"] is False  # no step time measured
    assert "inter_bandwidth" in model["terms"]["measured"] and "compute" in model["terms"]["prior"]
    assert model["terms"]["by"]["inter_bandwidth"] == "probes" and model["measured"]["probes"] == 31
    preds = json.loads(out)["predictions"]
    assert [p["gpus"] for p in preds] == [16, 32]
    assert all(0 < p["step_seconds_low"] < p["step_seconds"] < p["step_seconds_high"] for p in preds)


def test_probes_move_the_link_terms_only(tmp_path):
    """The probes pin the inter-node link: a step across nodes changes from the prior-only one, a
    one-node step does not (nothing measured it)."""
    spec = _spec(tmp_path, "a3mega", "H100-SXM", "450 GB/s", "1600 Gbit/s")
    _import(spec, H100, tmp_path / "nccl.toml")
    with_probes = json.loads(invoke("predict", spec, "--calibration", tmp_path / "nccl.toml", "--gpus", "1,32@4",
                                    "--json")[1])["predictions"]
    prior = json.loads(invoke("predict", spec, "--gpus", "1,32@4", "--json")[1])["predictions"]
    assert with_probes[0]["step_seconds"] == pytest.approx(prior[0]["step_seconds"], rel=1e-9)
    assert with_probes[1]["step_seconds"] != pytest.approx(prior[1]["step_seconds"], rel=1e-3)


def test_a_real_shortfall_or_an_underdeclared_link_is_still_warned(tmp_path):
    # declared 8 x 400 Gbit/s where the log reached 339 GB/s busbw on 2 nodes: fine; declared
    # 25 x 400 Gbit/s (1,250 GB/s per node: 2,344 GB/s tree ceiling, 25% = 586 GB/s): far below it
    low = _spec(tmp_path, "fast", "B200", "990 GB/s", "10000 Gbit/s")  # an H100 may not declare 4,500 GB/s of NVLink
    _import(low, H100, tmp_path / "fast_nccl.toml")
    _, out, _ = invoke("predict", low, "--calibration", tmp_path / "fast_nccl.toml", "--gpus", "16@2", "--json")
    assert any("misconfiguration" in w for w in json.loads(out)["warnings"])
    # declared 800 Gbit/s (100 GB/s): a tree reaches at most 187.5 GB/s busbw, the log 339
    slow = _spec(tmp_path, "slow", "H100-SXM", "450 GB/s", "800 Gbit/s")
    _import(slow, H100, tmp_path / "slow_nccl.toml")
    _, out, _ = invoke("predict", slow, "--calibration", tmp_path / "slow_nccl.toml", "--gpus", "16@2", "--json")
    assert any("raise the declared" in w for w in json.loads(out)["warnings"])


def test_nccl_algo_in_the_log_is_stored_and_used(tmp_path):
    """The same log forced to a ring cannot exceed the NICs: 339 GB/s over 200 GB/s declared is a
    contradiction again."""
    log = tmp_path / "ring.log"
    log.write_text("NCCL_ALGO=Ring mpirun -np 16 all_reduce_perf\n" + H100.read_text())
    spec = _spec(tmp_path, "a3mega", "H100-SXM", "450 GB/s", "1600 Gbit/s")
    _import(spec, log, tmp_path / "ring.toml")
    assert {c.algorithm for c in load_calibration(tmp_path / "ring.toml").collectives} == {"ring"}
    _, out, _ = invoke("predict", spec, "--calibration", tmp_path / "ring.toml", "--gpus", "16@2", "--json")
    assert any("raise the declared" in w and "(ring)" in w for w in json.loads(out)["warnings"])
