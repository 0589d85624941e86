"""`advisor calibrate --emit slurm|skypilot|torchrun` (advisor.calibrate.launchers): files that run where users rent.

The Slurm script runs for real under bash against stub `srun`/`scontrol` that record what they
were asked to run; hostile paths (spaces, quotes, `$(...)`) must arrive as one unexpanded word;
SkyPilot tasks are read back with PyYAML and, where skypilot is installed, with its own schema.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from advisor.calibrate.launchers import LAUNCHERS
from advisor.calibrate.launchers.skypilot import dump_yaml
from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
LLM7B = ROOT / "workloads" / "llm7b.toml"

SRUN = """#!/bin/bash
# stub srun: record the argument vector (one NUL-separated record per call), fail when asked to;
# the head-address lookup (`srun ... hostname --ip-address`) answers an IP
printf '%s\\0' "$@" >> "$STUB_LOG"; printf '\\n' >> "$STUB_LOG"
for a in "$@"; do [ "$a" = hostname ] && echo "10.1.2.3 fe80::1" && exit 0; done
for a in "$@"; do [ "$a" = "$STUB_FAIL" ] && exit 3; done
exit 0
"""
SCONTROL = """#!/bin/bash
[ "$1 $2" = "show hostnames" ] && printf 'node-a\\nnode-b\\nnode-c\\nnode-d\\n' && exit 0
exit 1
"""
PYTHON = """#!/bin/bash
printf '%s\\0' python "$@" >> "$STUB_LOG"; printf '\\n' >> "$STUB_LOG"
"""


def _stubs(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "stub-bin"
    bin_dir.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL), ("python", PYTHON)):
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


def _refused_in(folder: Path, *args: str) -> str:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        code, out, err = invoke("calibrate", *args)
    finally:
        os.chdir(cwd)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (code, out, err)
    return err


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


def _steps(calls: list[list[str]]) -> list[list[str]]:
    return [c for c in calls if c[0] != "python" and "torchrun" in c]


def _srun_options(call: list[str]) -> dict[str, str]:
    head = call[:call.index("torchrun")] if "torchrun" in call else call[:call.index("hostname")]
    return dict(zip(head[::2], head[1::2], strict=False))


def test_emit_choices_are_the_launchers_registry():
    assert set(LAUNCHERS) == {"torchrun", "slurm", "skypilot"}
    code, _out, err = invoke("calibrate", LLM7B, "--emit", "pbs", "--gpus", "16@2")
    assert code == 2 and "torchrun" in err and "skypilot" in err


def test_slurm_script_runs_each_placement_as_a_step_with_its_own_limit(tmp_path):
    text = _emit_in(ROOT, "workloads/llm7b.toml", "--emit", "slurm", "--gpus", "16@2,32@4", "--partition", "gpu",
                    "--account", "proj-1", "--timeout", "900", "--time", "01:00:00")
    assert str(ROOT) not in text  # no absolute path of the checkout
    sbatch = [ln for ln in text.splitlines() if ln.startswith("#SBATCH")]
    assert "#SBATCH --partition=gpu" in sbatch and "#SBATCH --account=proj-1" in sbatch
    assert "#SBATCH --time=01:00:00" in sbatch and "#SBATCH --nodes=4" in sbatch
    # whole nodes, said so: 8 ranks x 8 cores each, all memory (a site admin's checklist)
    assert {"#SBATCH --cpus-per-task=64", "#SBATCH --exclusive", "#SBATCH --mem=0"} <= set(sbatch)
    assert "export OMP_NUM_THREADS=8" in text.splitlines()
    output = next(ln for ln in sbatch if ln.startswith("#SBATCH --output="))
    assert "/" not in output.split("=", 1)[1]  # in the submit folder, which exists when Slurm opens it
    submit = tmp_path / "submit"  # the folder sbatch runs in: the same relative layout as the checkout
    (submit / "workloads").mkdir(parents=True)
    shutil.copy(LLM7B, submit / "workloads" / "llm7b.toml")
    code, calls, err = _run_job(tmp_path, text, submit)
    assert code == 0, err
    srun_calls = [c for c in calls if c[0] != "python"]
    assert all("--cpus-per-task" in c for c in srun_calls)  # every srun: 22.05+ does not inherit it
    lookup = next(c for c in srun_calls if "hostname" in c)
    assert _srun_options(lookup)["-w"] == "node-a" and lookup[-2:] == ["hostname", "--ip-address"]
    steps = _steps(calls)
    assert len(steps) == 2
    for call, (gpus, nodes) in zip(steps, [(16, 2), (32, 4)], strict=True):
        opts = _srun_options(call)
        assert opts["--nodes"] == str(nodes) and opts["--time"] == "15" and opts["--cpus-per-task"] == "64"
        torchrun = call[call.index("torchrun"):]
        t = dict(zip(torchrun[1::2], torchrun[2::2], strict=False))
        assert t["--nnodes"] == str(nodes) and t["--nproc-per-node"] == "8"
        assert t["--rdzv-endpoint"] == "10.1.2.3:29500" and t["--rdzv-id"] == f"4242-{gpus}-{nodes}"  # an IP
        assert call[call.index("--workload") + 1] == f"{submit}/workloads/llm7b.toml"
        assert call[call.index("--results") + 1] == f"{submit}/advisor-results/llm7b/gpus{gpus}-nodes{nodes}"
        assert call[call.index("--collective-timeout") + 1] == "450"  # half the 900 s step limit
    collect = calls[-1]  # the results merged at the end
    assert collect[:5] == ["python", "-m", "advisor", "calibrate", f"{submit}/workloads/llm7b.toml"]
    assert collect[5:] == ["--collect", f"{submit}/advisor-results/llm7b"]
    assert (submit / "advisor-results" / "llm7b").is_dir()


def test_failed_step_is_reported_and_the_next_still_runs(tmp_path):
    shutil.copy(LLM7B, tmp_path / "w.toml")
    text = _emit_in(tmp_path, "w.toml", "--emit", "slurm", "--gpus", "16@2,32@4")
    code, calls, err = _run_job(tmp_path, text, tmp_path, fail="4242-16-2")
    assert code == 1 and len(_steps(calls)) == 2 and "16@2 failed" in err


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
    (call,) = _steps(calls)
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
    ("--partition", "gpu --wrap=id"),
    ("--time", "1 hour"),
    ("--torch-cuda", "12.6"),
    ("--setup", ""),
    ("--root", ""),
    ("--rdzv-host", ""),
    ("--time", ""),
])
def test_unsplittable_sbatch_values_exit_2(tmp_path, args):
    code, out, err = invoke("calibrate", LLM7B, "--emit", "slurm", "--gpus", "16@2", *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith(args[0])


LINE_ENDS = ["\n", "\r", "\x1b", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
@pytest.mark.parametrize("option", ["--results", "--setup", "--root", "--env", "--rdzv-host"])
@pytest.mark.parametrize("char", LINE_ENDS, ids=[f"U+{ord(c):04X}" for c in LINE_ENDS])
def test_a_line_ending_character_names_the_option(tmp_path, launcher, option, char):
    shutil.copy(LLM7B, tmp_path / "w.toml")
    value = f"NCCL_DEBUG=INFO{char}setup: touch pwned" if option == "--env" else f"x{char}setup: touch pwned"
    err = _refused_in(tmp_path, "w.toml", "--emit", launcher, "--gpus", "16@2,24@3", "--out-dir", "d",
                      option, value)
    assert err.startswith(f"{option}: refusing a control or line-separator character (U+{ord(char):04X})"), err
    assert not (tmp_path / "d").exists()  # nothing written


@pytest.mark.parametrize("char", ["\u2028", "\x85", "\n"], ids=["U+2028", "U+0085", "newline"])
def test_a_line_separator_in_the_workload_file_name_exits_2(tmp_path, char):
    shutil.copy(LLM7B, tmp_path / f"w{char}setup: id.toml")
    err = _refused_in(tmp_path, f"w{char}setup: id.toml", "--emit", "skypilot", "--gpus", "16@2", "--out-dir", "d")
    assert err.startswith("WORKLOAD (the file name): refusing")
    assert not (tmp_path / "d").exists()


def test_yaml_values_round_trip_as_data_whatever_they_hold():
    """The second wall: even a value that skipped the checks is written as data, never as a key."""
    hostile = {"name": "a\u2028setup: id", "envs": {"X": "v\x85run: id\u2029z", "Y": "'\"\n- [x]: {y}"},
               "run": "echo 1\necho 2\n", "setup": "line\u2028setup: id\n"}
    text = dump_yaml(["# a comment"], hostile)
    assert yaml.safe_load(text) == hostile


def test_torchrun_lines_quote_hostile_paths_and_refuse_a_host_that_is_none(tmp_path):
    code, out, err = invoke("calibrate", LLM7B, "--emit", "torchrun", "--gpus", "16@2", "--rdzv-host", "h;id")
    assert code == 2 and err.startswith("--rdzv-host: expected node 0's host name or address") and out == "", err
    code, out, err = invoke("calibrate", LLM7B, "--emit", "torchrun", "--gpus", "16@2", "--rdzv-host", "h-0.x",
                            "--results", tmp_path / "r s")
    assert code == 0, err
    run = [ln for ln in out.splitlines() if ln.startswith("OMP_NUM_THREADS=")]
    words = shlex.split(run[0])
    assert words[0] == "OMP_NUM_THREADS=8" and words[1] == "torchrun"
    assert words[words.index("--rdzv-endpoint") + 1] == "h-0.x:29500"
    assert words[words.index("--results") + 1] == str((tmp_path / "r s").resolve() / "gpus16-nodes2")
    assert words[words.index("--collective-timeout") + 1] == "600"
    assert "Then: advisor calibrate" in out
    assert shlex.split(out.splitlines()[1].split("Then: ", 1)[1])[-1] == str(tmp_path / "r s")


def _sky_files(folder: Path, *extra: str, gpus: str = "8@1,16@2,24@3") -> list[Path]:
    shutil.copy(LLM7B, folder / "w.toml")
    _emit_in(folder, "w.toml", "--emit", "skypilot", "--gpus", gpus, "--out-dir", "tasks", *extra)
    return sorted((folder / "tasks").glob("*.yaml"))


def test_skypilot_writes_one_task_per_placement_that_launches_as_emitted(tmp_path):
    files = _sky_files(tmp_path, "--env", "NCCL_DEBUG=INFO")
    assert [f.name for f in files] == [f"advisor-llm7b-gpus{g}-nodes{n}.yaml" for g, n in ((16, 2), (24, 3), (8, 1))]
    # SkyPilot task YAML fields (docs.skypilot.co, "YAML Configuration"): known keys only, types as documented.
    allowed = {"name", "num_nodes", "resources", "workdir", "file_mounts", "setup", "run", "envs"}
    for f in files:
        (d,) = list(yaml.safe_load_all(f.read_text()))  # one task per file: no chain DAG
        assert set(d) <= allowed and isinstance(d["num_nodes"], int)
        assert d["resources"] == {"accelerators": "H100:8", "network_tier": "best"}
        assert d["envs"] == {"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "8"}
        assert d["workdir"] == "." and "pip install '.[calibrate]'" in d["setup"]
        assert "torch.cuda.is_available()" in d["setup"]  # the torch build is checked where it runs
        run = d["run"]
        assert not [ln for ln in run.splitlines() if ln.lstrip().startswith("export")]
        assert "timeout --kill-after 30 1800 torchrun" in run and '--node-rank "$SKYPILOT_NODE_RANK"' in run
        assert "--workload w.toml" in run and str(tmp_path) not in run and "--collective-timeout 600" in run
        for script in (run, d["setup"]):
            assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    driver = tmp_path / "tasks" / "launch.sh"
    assert os.access(driver, os.X_OK)
    assert subprocess.run(["bash", "-n", str(driver)]).returncode == 0
    text = driver.read_text()
    assert text.count("\nplace ") == 3 and "advisor calibrate w.toml --collect advisor-results/llm7b" in text


def test_skypilot_torch_build_named_and_setup_script_synced(tmp_path):
    (tmp_path / "modules.sh").write_text("export A=1\n")
    (d, *_) = [yaml.safe_load(f.read_text()) for f in _sky_files(tmp_path, "--torch-cuda", "cu126", "--setup",
                                                                   "modules.sh", gpus="16@2")]
    assert "python -m pip install torch --index-url https://download.pytorch.org/whl/cu126" in d["setup"]
    assert ". modules.sh" in d["setup"] and ". modules.sh" in d["run"]


def test_skypilot_with_a_bucket_mounts_it_for_every_node(tmp_path):
    for f in _sky_files(tmp_path, "--bucket", "my-results"):
        d = yaml.safe_load(f.read_text())
        assert d["file_mounts"] == {"/advisor-results": {"name": "my-results", "mode": "MOUNT"}}
        assert "--results /advisor-results/gpus" in d["run"]


@pytest.mark.parametrize("case", ["spec outside", "results outside", "setup in a venv", "no out-dir"])
def test_skypilot_refuses_what_the_nodes_would_not_have(tmp_path, case):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    shutil.copy(LLM7B, outside / "spec.toml")
    shutil.copy(LLM7B, work / "w.toml")
    (work / ".venv" / "bin").mkdir(parents=True)
    (work / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (work / ".venv" / "bin" / "activate").write_text("\n")
    args, named = {
        "spec outside": (["../outside/spec.toml", "--out-dir", "d"], "../outside/spec.toml"),
        "results outside": (["w.toml", "--results", "../r", "--out-dir", "d"], "--results"),
        "setup in a venv": (["w.toml", "--setup", ".venv/bin/activate", "--out-dir", "d"], "--setup"),
        "no out-dir": (["w.toml"], "--out-dir"),
    }[case]
    err = _refused_in(work, *args[:1], "--emit", "skypilot", "--gpus", "16@2,24@3", *args[1:])
    assert err.startswith(named), err
    assert not (work / "d").exists()


def test_one_placement_prints_its_task_and_json_is_strict(tmp_path):
    shutil.copy(LLM7B, tmp_path / "w.toml")
    d = yaml.safe_load(_emit_in(tmp_path, "w.toml", "--emit", "slurm", "--gpus", "16@2", "--json"))
    doc = json.loads(_emit_in(tmp_path, "w.toml", "--emit", "slurm", "--gpus", "16@2", "--json"))
    assert d == doc and doc["launcher"] == "slurm" and doc["text"].startswith("#!/bin/bash")
    doc = json.loads(_emit_in(tmp_path, "w.toml", "--emit", "skypilot", "--gpus", "16@2,24@3", "--out-dir", "t",
                              "--json"))
    assert [f["path"] for f in doc["files"]][-1] == "t/launch.sh" and doc["placements"][1] == {"gpus": 24, "nodes": 3}


@pytest.mark.parametrize("extra", [(), ("--bucket", "my-results"), ("--torch-cuda", "cu126", "--env", "A=1"),
                                   ("--device", "cpu")])
def test_skypilot_schema_of_the_installed_package_when_present(tmp_path, extra):
    sky = pytest.importorskip("sky", reason="skypilot not installed; structure checked above")
    from sky.utils import common_utils, schemas

    for f in _sky_files(tmp_path, *extra):
        d = yaml.safe_load(f.read_text())
        common_utils.validate_schema(d, schemas.get_task_schema(), "Invalid task YAML: ")
        assert sky.Task.from_yaml_config(copy.deepcopy(d)).num_nodes == d["num_nodes"]  # it pops the keys it reads


def test_runs_at_one_multi_node_count_point_to_plan_calibration():
    one = _emit_in(ROOT, "workloads/llm7b.toml", "--emit", "slurm")  # the spec's counts: only 16@2 crosses nodes
    two = _emit_in(ROOT, "workloads/llm7b.toml", "--emit", "slurm", "--gpus", "16@2,24@3")
    assert "advisor plan-calibration workloads/llm7b.toml" in one
    assert "plan-calibration" not in two


def test_out_dir_is_checked_whole_before_anything_is_written(tmp_path):
    (tmp_path / "tasks" / "launch.sh").mkdir(parents=True)  # the last file's target is a folder
    shutil.copy(LLM7B, tmp_path / "w.toml")
    err = _refused_in(tmp_path, "w.toml", "--emit", "skypilot", "--gpus", "16@2,24@3", "--out-dir", "tasks")
    assert "launch.sh: is a directory" in err
    assert [p.name for p in (tmp_path / "tasks").iterdir()] == ["launch.sh"]
