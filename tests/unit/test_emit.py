"""`advisor calibrate --emit slurm|skypilot|torchrun`: scripts that run where users rent.

The Slurm script runs for real under bash against stub `srun`/`scontrol` that record what they
were asked to run; hostile paths (spaces, quotes, `$(...)`) must arrive as one unexpanded word.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
LLM7B = ROOT / "workloads" / "llm7b.toml"

SRUN = """#!/bin/bash
# stub srun: record the argument vector (one NUL-separated record per call), fail when asked to
printf '%s\\0' "$@" >> "$STUB_LOG"; printf '\\n' >> "$STUB_LOG"
for a in "$@"; do [ "$a" = "$STUB_FAIL" ] && exit 3; done
exit 0
"""
SCONTROL = """#!/bin/bash
[ "$1 $2" = "show hostnames" ] && printf 'node-a\\nnode-b\\nnode-c\\nnode-d\\n' && exit 0
exit 1
"""


def _stubs(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "stub-bin"
    bin_dir.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _emit_in(folder: Path, *args: str) -> str:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        code, out, err = invoke("calibrate", *args)
    finally:
        os.chdir(cwd)
    assert code == 0, err
    return out


def _run_job(tmp_path: Path, script: str, submit_dir: Path, fail: str = "") -> tuple[int, list[list[str]], str]:
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    log = tmp_path / "srun.log"
    env = {**os.environ, "PATH": f"{_stubs(tmp_path)}{os.pathsep}{os.environ['PATH']}", "STUB_LOG": str(log),
           "STUB_FAIL": fail, "SLURM_SUBMIT_DIR": str(submit_dir), "SLURM_JOB_NODELIST": "node-[a-d]",
           "SLURM_JOB_ID": "4242"}
    p = subprocess.run(["bash", str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    calls = [rec.split("\0")[:-1] for rec in log.read_text().split("\n") if rec] if log.exists() else []
    return p.returncode, calls, p.stderr


def test_slurm_script_runs_each_placement_as_a_step_with_its_own_limit(tmp_path):
    text = _emit_in(ROOT, "workloads/llm7b.toml", "--emit", "slurm", "--gpus", "16@2,32@4", "--partition", "gpu",
                    "--account", "proj-1", "--timeout", "900", "--time", "01:00:00")
    assert str(ROOT) not in text  # no absolute path of the checkout
    sbatch = [ln for ln in text.splitlines() if ln.startswith("#SBATCH")]
    assert "#SBATCH --partition=gpu" in sbatch and "#SBATCH --account=proj-1" in sbatch
    assert "#SBATCH --time=01:00:00" in sbatch and "#SBATCH --nodes=4" in sbatch
    output = next(ln for ln in sbatch if ln.startswith("#SBATCH --output="))
    assert "/" not in output.split("=", 1)[1]  # in the submit folder, which exists when Slurm opens it
    submit = tmp_path / "submit"  # the folder sbatch runs in: the same relative layout as the checkout
    (submit / "workloads").mkdir(parents=True)
    shutil.copy(LLM7B, submit / "workloads" / "llm7b.toml")
    code, calls, err = _run_job(tmp_path, text, submit)
    assert code == 0, err
    assert len(calls) == 2
    for call, (gpus, nodes) in zip(calls, [(16, 2), (32, 4)], strict=True):
        opts = dict(zip(call[:call.index("torchrun")][::2], call[:call.index("torchrun")][1::2], strict=False))
        assert opts["--nodes"] == str(nodes) and opts["--time"] == "15"  # 900 s per placement
        torchrun = call[call.index("torchrun"):]
        t = dict(zip(torchrun[1::2], torchrun[2::2], strict=False))
        assert t["--nnodes"] == str(nodes) and t["--nproc-per-node"] == "8"
        assert t["--rdzv-endpoint"] == "node-a:29500" and t["--rdzv-id"] == f"4242-{gpus}-{nodes}"
        assert call[call.index("--workload") + 1] == f"{submit}/workloads/llm7b.toml"
        assert call[call.index("--results") + 1] == f"{submit}/advisor-results/llm7b/gpus{gpus}-nodes{nodes}"
    assert (submit / "advisor-results" / "llm7b").is_dir()


def test_failed_step_is_reported_and_the_next_still_runs(tmp_path):
    shutil.copy(LLM7B, tmp_path / "w.toml")
    text = _emit_in(tmp_path, "w.toml", "--emit", "slurm", "--gpus", "16@2,32@4")
    code, calls, err = _run_job(tmp_path, text, tmp_path, fail="4242-16-2")
    assert code == 1 and len(calls) == 2 and "16@2 failed" in err


def test_hostile_paths_arrive_as_one_unexpanded_word(tmp_path):
    odd = tmp_path / "it's a \"dir\" $(touch pwned) `id`"
    odd.mkdir()
    shutil.copy(LLM7B, odd / "w $HOME.toml")
    setup = odd / "env; rm -rf x.sh"
    setup.write_text("export ADVISOR_SETUP_RAN=1\n")
    rel = odd.relative_to(tmp_path)
    text = _emit_in(tmp_path, str(rel / "w $HOME.toml"), "--emit", "slurm", "--gpus", "16@2", "--results",
                    str(rel / "res ults"), "--setup", str(rel / "env; rm -rf x.sh"), "--env", "NCCL_IB_HCA=mlx5_0 ; id")
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    code, calls, err = _run_job(tmp_path, text, tmp_path)
    assert code == 0, err
    (call,) = calls
    assert call[call.index("--workload") + 1] == str(odd / "w $HOME.toml")
    assert call[call.index("--results") + 1] == str(odd / "res ults" / "gpus16-nodes2")
    assert not (tmp_path / "pwned").exists() and not list(tmp_path.rglob("pwned"))


def test_nccl_settings_pass_through_and_setup_is_sourced(tmp_path, monkeypatch):
    shutil.copy(LLM7B, tmp_path / "w.toml")
    (tmp_path / "env.sh").write_text('export PATH="$PATH"\n')
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    text = _emit_in(tmp_path, "w.toml", "--emit", "slurm", "--gpus", "16@2", "--setup", "env.sh",
                    "--env", "NCCL_DEBUG=INFO", "--env", "NCCL_IB_HCA=mlx5_0,mlx5_1")
    lines = text.splitlines()
    assert "export NCCL_SOCKET_IFNAME=eth0" in lines and "export NCCL_DEBUG=INFO" in lines
    assert "export NCCL_IB_HCA=mlx5_0,mlx5_1" in lines and "export NCCL_DEBUG=WARN" not in lines
    assert '. "$ROOT"/env.sh || exit 1' in lines


@pytest.mark.parametrize("args", [
    ("--results", "a\nb"),
    ("--env", "NCCL_DEBUG=INFO\nrm -rf /"),
    ("--partition", "gpu --wrap=id"),
    ("--time", "1 hour"),
])
def test_control_characters_and_unsplittable_sbatch_values_exit_2(tmp_path, args):
    code, out, err = invoke("calibrate", LLM7B, "--emit", "slurm", "--gpus", "16@2", *args)
    assert code == 2 and out == "" and err.count("\n") == 1


def test_torchrun_lines_quote_hostile_hosts(tmp_path):
    code, out, err = invoke("calibrate", LLM7B, "--emit", "torchrun", "--gpus", "16@2", "--rdzv-host", "h;id",
                            "--results", tmp_path / "r s")
    assert code == 0, err
    run = [ln for ln in out.splitlines() if ln.startswith("torchrun")]
    words = shlex.split(run[0])
    assert words[words.index("--rdzv-endpoint") + 1] == "h;id:29500"
    assert words[words.index("--results") + 1] == str((tmp_path / "r s").resolve() / "gpus16-nodes2")
    assert "Then: advisor calibrate" in out
    assert shlex.split(out.splitlines()[1].split("Then: ", 1)[1])[-1] == str(tmp_path / "r s")


def _sky_docs(folder: Path, *extra: str) -> list[dict]:
    shutil.copy(LLM7B, folder / "w.toml")
    text = _emit_in(folder, "w.toml", "--emit", "skypilot", "--gpus", "16@2,32@4", *extra)
    return list(yaml.safe_load_all(text))


def test_skypilot_tasks_follow_the_documented_schema(tmp_path):
    docs = _sky_docs(tmp_path)
    assert [(d["num_nodes"], d["resources"]["accelerators"]) for d in docs] == [(2, "H100:8"), (4, "H100:8")]
    # SkyPilot task YAML fields (docs.skypilot.co, "YAML Configuration"): known keys only, types as documented.
    allowed = {"name", "num_nodes", "resources", "workdir", "file_mounts", "setup", "run", "envs"}
    for d in docs:
        assert set(d) <= allowed and isinstance(d["num_nodes"], int) and isinstance(d["run"], str)
        name, _, count = d["resources"]["accelerators"].partition(":")
        assert name == "H100" and int(count) == 8
        assert d["workdir"] == "."
        assert "pip install '.[calibrate]'" in d["setup"] and "pip install advisor" not in d["setup"]
        run = d["run"]
        assert "torchrun" in run and '--node-rank "$SKYPILOT_NODE_RANK"' in run and "SKYPILOT_NODE_IPS" in run
        assert subprocess.run(["bash", "-n"], input=run, text=True).returncode == 0
        assert "--workload w.toml" in run and str(tmp_path) not in run


def test_skypilot_with_a_bucket_mounts_it_for_every_node(tmp_path):
    docs = _sky_docs(tmp_path, "--bucket", "my-results")
    for d in docs:
        assert d["file_mounts"] == {"/advisor-results": {"name": "my-results", "mode": "MOUNT"}}
        assert "--results /advisor-results/gpus" in d["run"] and "rsync" not in d["run"]


def test_skypilot_schema_of_the_installed_package_when_present(tmp_path):
    sky = pytest.importorskip("sky", reason="skypilot not installed; structure checked above")
    for d in _sky_docs(tmp_path):
        task = sky.Task.from_yaml_config(d)
        assert task.num_nodes == d["num_nodes"]


def test_runs_at_one_multi_node_count_point_to_plan_calibration():
    one = _emit_in(ROOT, "workloads/llm7b.toml", "--emit", "slurm")  # the spec's counts: only 16@2 crosses nodes
    two = _emit_in(ROOT, "workloads/llm7b.toml", "--emit", "slurm", "--gpus", "16@2,24@3")
    assert "advisor plan-calibration workloads/llm7b.toml" in one
    assert "plan-calibration" not in two
