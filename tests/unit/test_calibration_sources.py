"""Calibration sources combine: several --calibration files, or --calibration with --measurements."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from advisor.calibration_data import load_calibration
from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
RENTAL = ROOT / "workloads" / "rental-ethernet.toml"
RENTAL_CAL = ROOT / "calibrations" / "rental-ethernet_published_torchtitan.toml"
LOG = ROOT / "tests" / "fixtures" / "nccl-tests" / "h100_2node_gcp_a3mega_all_reduce.log"


def _measured(*args):
    code, out, err = invoke("predict", RENTAL, "--gpus", "16@2", "--json", *args)
    assert code == 0, err
    return json.loads(out)["model"]["measured"], err


def test_two_calibration_files_merge_runs_and_probes(tmp_path):
    probes_only = tmp_path / "nccl.toml"
    assert invoke("import", "nccl-tests", RENTAL, LOG, "--out", probes_only)[0] == 0
    measured, err = _measured("--calibration", RENTAL_CAL, "--calibration", probes_only)
    n_probes = len(load_calibration(RENTAL_CAL).collectives) + len(load_calibration(probes_only).collectives)
    assert measured["probes"] == n_probes and measured["runs"] == len(load_calibration(RENTAL_CAL).runs)
    assert "no measurement crossed nodes" not in err


def test_calibration_probes_with_measurement_csv_runs(tmp_path):
    probes_only = tmp_path / "nccl.toml"
    assert invoke("import", "nccl-tests", RENTAL, LOG, "--out", probes_only)[0] == 0
    csv = tmp_path / "steps.csv"
    # The published 8-GPU torchtitan step (calibrations/rental-ethernet_published_torchtitan.toml).
    csv.write_text("# torchtitan Table 1, 8 GPUs FSDP\ngpus,nodes,step_seconds\n8,1,2.84346\n")
    measured, _err = _measured("--calibration", probes_only, "--measurements", csv)
    assert measured["runs"] == 1 and measured["probes"] == 31
    assert str(probes_only) in measured["source"] and str(csv) in measured["source"]


def test_a_probe_only_file_alone_predicts_from_the_prior_with_measured_links(tmp_path):
    probes_only = tmp_path / "nccl.toml"
    assert invoke("import", "nccl-tests", RENTAL, LOG, "--out", probes_only)[0] == 0
    code, out, err = invoke("predict", RENTAL, "--calibration", probes_only, "--gpus", "16@2", "--json")
    assert code == 0, err
    model = json.loads(out)["model"]
    assert model["calibrated"] is False and model["measured"]["probes"] == 31
    assert "no step of rental-ethernet measured" in err


def test_a_file_with_neither_runs_nor_probes_has_nothing_to_fit(tmp_path):
    empty = tmp_path / "empty.toml"
    empty.write_text('schema = 1\nworkload = "rental-ethernet"\n[provenance]\nsource = "measured"\n'
                     'created = "2026-12-01T10:00:00Z"\n')
    code, _, err = invoke("predict", RENTAL, "--calibration", empty, "--gpus", "16@2")
    assert code == 2 and "no measured runs or collective probes" in err


def test_files_of_another_workload_are_refused(tmp_path):
    other = tmp_path / "other.toml"
    shutil.copy(ROOT / "calibrations" / "llm7b_published_torchtitan.toml", other)
    code, _, err = invoke("predict", RENTAL, "--calibration", RENTAL_CAL, "--calibration", other, "--gpus", "16")
    assert code == 2 and "another workload" in err
