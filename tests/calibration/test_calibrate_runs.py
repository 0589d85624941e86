"""Real calibrations on CPU with gloo: 1 and 2 ranks, DDP and FSDP2, the emitted torchrun path
(two torchrun processes on localhost as two nodes), and CUDA when present."""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys

import pytest

from advisor.calibration_data import load_calibration
from calibrate_support import cli_env, needs_torch, small_workload
from conftest import run_cli

pytestmark = [pytest.mark.slow, needs_torch]


def _check_file(path, name, counts, nodes=1, strategy="ddp"):
    cal = load_calibration(path, name)
    assert [(r.gpus, r.nodes) for r in cal.runs] == [(n, nodes) for n in counts]
    for run in cal.runs:
        assert len(run.step_seconds) == 2 and all(s > 0 for s in run.step_seconds)
        assert run.compute_seconds and all(s > 0 for s in run.compute_seconds)
        assert run.micro_samples == 4
    for n in counts:
        probes = [c for c in cal.collectives if c.gpus == n]
        if n == 1:
            assert not probes
            continue
        for op, factor in (("all_reduce", 2 * (n - 1) / n), ("reduce_scatter", (n - 1) / n),
                           ("all_gather", (n - 1) / n)):
            sizes = sorted(c.bytes for c in probes if c.op == op)
            assert len(sizes) >= 4 and sizes[0] <= 2**20
            for c in (c for c in probes if c.op == op):  # nccl-tests: busbw = bytes/s/1e9 * factor
                assert c.busbw == pytest.approx(c.bytes / c.seconds / 1e9 * factor)
    env = cal.environment
    assert env["backend"] == "gloo" and env["strategy"] == strategy and env["precision"] == "fp32"
    assert env["torch"] and env["python"] and env["advisor"] and env["hosts"] == [socket.gethostname()]
    assert env["proxy_params"] == env["declared_params"]
    assert cal.provenance.source == "measured" and cal.provenance.host == socket.gethostname()
    return cal


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_calibrate_one_and_two_ranks(tmp_path, strategy):
    spec = small_workload(tmp_path, strategy)
    out = tmp_path / "cal.toml"
    r = run_cli("calibrate", spec, "--gpus", "1,2", "--device", "cpu", "--steps", "2", "--warmup", "1", "--out", out,
                timeout=400)  # 2 min at a load of 12 on 2 cores
    assert r.returncode == 0, r.stderr
    cal = _check_file(out, "tiny-test", [1, 2], strategy=strategy)
    assert cal.environment["float32_matmul_precision"] == "highest"
    assert all(r.peak_reserved_bytes is None for r in cal.runs)  # CPU: torch keeps no such counter
    assert "N=2: saved" in r.stderr and "speedup" in r.stdout  # progress on stderr, table on stdout


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """The emitted `--gpus 2@2` torchrun commands of the small workload, run as two nodes on localhost:
    (spec, results folder, the emitted command lines, each node's exit status and output). Shared by
    the tests that collect real results (one pair of torchrun launches for both)."""
    tmp_path = tmp_path_factory.mktemp("two-nodes")
    spec = small_workload(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = tmp_path / "results"
    r = run_cli("calibrate", spec, "--emit", "torchrun", "--gpus", "2@2", "--device", "cpu", "--steps", "2",
                "--warmup", "1", "--results", results, "--rdzv-host", "127.0.0.1", "--rdzv-port", port)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln and not ln.startswith("#")]
    env = cli_env({"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]})
    nodes = [subprocess.Popen(["bash", "-c", line], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True) for line in lines]
    try:
        outputs = [p.communicate(timeout=240)[0] for p in nodes]
    finally:
        for p in nodes:  # a failed or hung node leaves nothing behind
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return spec, results, lines, [p.returncode for p in nodes], outputs


def test_emitted_torchrun_commands_run_as_two_nodes_and_collect(tmp_path, two_nodes):
    spec, results, lines, codes, outputs = two_nodes
    assert len(lines) == 2 and all("--node-rank" in ln for ln in lines)
    assert codes == [0, 0], outputs
    out = tmp_path / "cal.toml"
    r = run_cli("calibrate", spec, "--collect", results, "--out", out)
    assert r.returncode == 0, r.stderr
    cal = _check_file(out, "tiny-test", [2], nodes=2)
    assert cal.environment["gpus_per_node"] == {"2": 1}
    # Collecting again keeps the run already there instead of duplicating it.
    r = run_cli("calibrate", spec, "--collect", results, "--out", out)
    assert r.returncode == 0 and "already in" in r.stderr
    assert len(load_calibration(out).runs) == 1


def test_collect_rejects_results_of_another_workload(tmp_path, two_nodes):
    # Real results of tiny-test (the emitted 2@2 run above), collected for a spec named `other`.
    _spec, results, _lines, codes, outputs = two_nodes
    assert codes == [0, 0], outputs
    other = small_workload(tmp_path, name="other")
    r = run_cli("calibrate", other, "--collect", results, "--out", tmp_path / "cal.toml")
    assert r.returncode == 2 and "another workload" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "cal.toml").exists()


@pytest.mark.gpu
def test_calibrate_cuda_one_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    r = run_cli("calibrate", spec, "--gpus", "1", "--device", "cuda", "--steps", "2", "--warmup", "1", "--out", out)
    assert r.returncode == 0, r.stderr
    cal = load_calibration(out)
    assert cal.environment["backend"] == "nccl" and cal.runs[0].peak_memory_bytes > 0
    assert cal.runs[0].peak_reserved_bytes >= cal.runs[0].peak_memory_bytes
    assert cal.environment["float32_matmul_precision"] == "high"  # fp32 spec: TF32 on CUDA
    assert cal.environment["compute_capability"] and cal.environment["devices"]
    assert statistics.median(cal.runs[0].step_seconds) > 0
