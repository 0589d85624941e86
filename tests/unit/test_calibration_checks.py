"""The torch-free parts of what a calibration records about itself: quality warnings and notes
(advisor.calibrate.quality), the CUDA warm-up rule, the probes' latency fit, the communication
variables of the environment, new run fields through results.py, and the device check script."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from advisor.calibrate import quality
from advisor.calibrate.environment import comm_variables, device_line
from advisor.calibrate.probes import fit_latencies, fit_latency
from advisor.calibrate.results import parse_result, run_from_result
from advisor.calibrate.session import check_warmup, checked_result
from advisor.calibration_data import Calibration, Provenance, Run
from advisor.errors import InputError
from advisor.spec import load_workload
from conftest import ROOT, WORKLOADS


def _cal(runs, **env) -> Calibration:
    return Calibration(workload="tiny-cpu", provenance=Provenance(source="measured", created="2026-12-01T00:00:00Z"),
                       environment=env, runs=runs)


def _run(gpus, steps, **kw) -> Run:
    return Run(gpus=gpus, step_seconds=steps, **kw)


W = load_workload(WORKLOADS / "tiny-cpu.toml")  # fixed-global 32 samples


def test_superlinear_point_above_noise_is_warned_and_noted():
    # per-GPU: N=1 32/1.0 = 32/s; N=4 32/0.22/4 = 36.4/s: 114%, spreads 2%: above the 5% floor
    cal = _cal([_run(1, [1.0, 1.01, 0.99]), _run(4, [0.22, 0.221, 0.219])])
    found = quality.run_warnings(cal, W, 4, 1)
    assert len(found) == 1 and "per-GPU throughput 114% of N=1's" in found[0]
    noted = quality.with_notes(cal, found)
    assert found[0] in noted.provenance.notes
    assert quality.with_notes(noted, found).provenance.notes == noted.provenance.notes  # not twice


def test_superlinear_point_within_noise_is_not_warned():
    cal = _cal([_run(1, [1.0, 1.3, 1.0]), _run(4, [0.22, 0.221, 0.219])])  # baseline spread 30%
    assert not any("superlinear" in t for t in quality.run_warnings(cal, W, 4, 1))


def test_a_new_smaller_baseline_checks_the_counts_above_it():
    cal = _cal([_run(1, [1.0]), _run(2, [0.4])])  # N=2 at 125% of the N=1 added after it
    assert any("N=2: per-GPU throughput 125%" in t for t in quality.run_warnings(cal, W, 1, 1))


def test_host_load_spread_and_memory_near_capacity_are_warned():
    cal = _cal([_run(4, [1.0, 1.5, 1.0], peak_reserved_bytes=95, peak_memory_bytes=80)],
               cpus=2, load_average={"4": [7.6, 5.0, 3.0]}, device_memory_bytes=100)
    found = quality.run_warnings(cal, W, 4, 1)
    assert [t.split(":")[1].split()[0] for t in found] == ["host", "timed", "peak"]
    assert "host load 7.6 on 2 cores" in found[0] and "spread 50%" in found[1] and "95% of" in found[2]


def test_checked_result_notes_the_warnings_in_the_file():
    result = parse_result({"gpus": 1, "nodes": 1, "step_seconds": [1.0, 2.0], "global_batch": 32,
                           "environment": {"cpus": 2, "load_average": [9.0, 1.0, 1.0]}}, ROOT / "r.json")
    cal, found = checked_result(_cal([]), W, result)
    assert len(found) == 2 and all(t in cal.provenance.notes for t in found)


def test_reserved_peak_and_latency_fit_travel_from_result_to_run():
    result = parse_result({"gpus": 2, "nodes": 1, "step_seconds": [1.0], "global_batch": 32,
                           "peak_memory_bytes": 10, "peak_reserved_bytes": 12,
                           "probe_latency_seconds": {"all_reduce/world": 2e-5}}, ROOT / "r.json")
    run, _ = run_from_result(W, result)
    assert run.peak_reserved_bytes == 12 and run.probe_latency_seconds == {"all_reduce/world": 2e-5}


def test_cuda_calibration_without_warmup_is_refused_naming_the_option():
    check_warmup("cpu", 0)
    check_warmup("cuda", 1)
    with pytest.raises(InputError) as err:
        check_warmup("cuda", 0, "calibration.warmup_steps")
    assert "calibration.warmup_steps" in str(err.value) and "warm-up" in str(err.value)


def test_latency_fit_recovers_alpha_of_an_alpha_beta_series():
    points = [(b, 20e-6 + b / 100e9) for b in (2**20, 2**22, 2**24, 2**26)]
    assert fit_latency(points) == pytest.approx(20e-6, rel=1e-6)
    assert fit_latency(points[:1]) is None  # one size: no line
    assert fit_latency([(2**20, 1e-3), (2**22, 1e-3 / 2)]) is None  # faster when larger: no latency
    rows = [{"op": "all_reduce", "group": "tp", "bytes": b, "seconds": s} for b, s in points]
    assert list(fit_latencies(rows)) == ["all_reduce/tp"]


def test_communication_variables_are_every_nccl_and_libfabric_one():
    env = {"NCCL_IB_HCA": "mlx5", "TORCH_NCCL_BLOCKING_WAIT": "1", "FI_PROVIDER": "efa", "PATH": "/bin",
           "MY_NCCL_X": "no"}
    assert comm_variables(env) == {"FI_PROVIDER": "efa", "NCCL_IB_HCA": "mlx5", "TORCH_NCCL_BLOCKING_WAIT": "1"}
    assert device_line({"host": "h", "device": "NVIDIA H200", "compute_capability": "9.0", "driver": "550.1"}) \
        == "h: NVIDIA H200, compute capability 9.0, driver 550.1"


def test_device_check_installs_nothing_from_the_network():
    script = ROOT / "scripts" / "device_check.sh"
    text = script.read_text()
    commands = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    calls = [ln for ln in commands if re.search(r"\bpip\b", ln)]  # every pip call, whatever its verb
    assert calls and all("--no-index" in ln for ln in calls), calls
    if shutil.which("bash"):
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
