"""The whole multi-node loop without a cloud: `--emit` -> the emitted files run against stub `sky`,
`sbatch`, `srun`, `scontrol`, `rsync` (tests/support/stubs) that run what they ask on this machine
(gloo ranks, loopback rendezvous) -> a calibration file collected with every placement in it.

Two placements each (1 rank on 1 node, 2 ranks on 2 nodes) of the small tiny-cpu proxy: the point
is the plumbing (rendezvous, result folders, fetching, --collect), not the numbers.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.calibration_data import load_calibration
from calibrate_support import cli_env, small_workload
from conftest import ROOT

pytest.importorskip("torch")
pytest.importorskip("yaml")

STUBS = ROOT / "tests" / "support" / "stubs"
PLACEMENTS = "1@1,2@2"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp_path: Path) -> dict:
    path = os.pathsep.join([str(STUBS), str(Path(sys.executable).parent), os.environ["PATH"]])
    return cli_env({"PATH": path, "STUB_SKY_HOME": str(tmp_path / "sky-home"), "STUB_LOG": str(tmp_path / "stub.log"),
                    "GLOO_SOCKET_IFNAME": "lo"})


def _emit(work: Path, env: dict, launcher: str, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "advisor", "calibrate", "tiny-test.toml", "--emit", launcher, "--gpus", PLACEMENTS,
            "--device", "cpu", "--steps", "2", "--warmup", "1", "--timeout", "240",
            "--rdzv-port", str(_free_port()), *extra]
    p = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p


def _collected(work: Path) -> set[tuple[int, int]]:
    (path,) = (work / "calibrations").glob("tiny-test_cpu_*.toml")
    return load_calibration(path, "tiny-test").measured_counts()


def test_slurm_script_runs_every_placement_and_collects(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    small_workload(work)
    env = _env(tmp_path)
    script = _emit(work, env, "slurm").stdout
    (work / "calibrate.sbatch").write_text(script)
    p = subprocess.run(["sbatch", "--wait", "calibrate.sbatch"], cwd=work, env=env, capture_output=True, text=True,
                       timeout=600)
    log = "".join(f.read_text() for f in work.glob("slurm-advisor-tiny-test-*.out"))
    assert p.returncode == 0, log
    assert _collected(work) == {(1, 1), (2, 2)}, log
    sruns = [ln for ln in (tmp_path / "stub.log").read_text().splitlines() if ln.startswith("srun ")]
    assert len(sruns) == 3 and all("--cpus-per-task" in ln for ln in sruns)  # the head lookup and 2 steps


def test_skypilot_tasks_and_driver_run_every_placement_and_collect(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    small_workload(work)
    env = _env(tmp_path)
    _emit(work, env, "skypilot", "--out-dir", "tasks")
    p = subprocess.run(["bash", "tasks/launch.sh"], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert _collected(work) == {(1, 1), (2, 2)}
    # the 2-node run's rank files came home from both nodes, and each cluster was torn down
    assert sorted(f.name for f in (work / "advisor-results" / "tiny-test" / "gpus2-nodes2").glob("rank?.json")) == \
        ["rank0.json", "rank1.json"]
    calls = (tmp_path / "stub.log").read_text()
    assert "rsync -a advisor-tiny-test-gpus2-nodes2-worker1:sky_workdir/" in calls
    assert calls.count("sky down -y") == 2 and not any((tmp_path / "sky-home").iterdir())
