"""Property-based: whatever text a user gives an emitted launcher (an --env value, --setup, --results,
the workload file's name), the emit exits 2 naming it, or every emitted file holds it as data:
the SkyPilot YAML reads back as exactly the tasks' keys with the value where it belongs, and the
Slurm script passes `bash -n` with the value one quoted word. Never a new key, never a traceback."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_inprocess import invoke
from conftest import WORKLOADS

#: Characters that break lines or quoting somewhere (C0, C1, DEL, the Unicode line separators,
#: YAML indicators, shell metacharacters), mixed with ordinary text.
NASTY = st.sampled_from([*list("\n\r\t\x00\x1b\x7f\x85\u2028\u2029\ufeff:#-|>&*!%@`'\"$(){};\\ "), "é", "∂"])
TEXT = st.lists(st.one_of(NASTY, st.characters(blacklist_categories=("Cs",))), min_size=1, max_size=20).map("".join)
TASK_KEYS = {"name", "num_nodes", "resources", "workdir", "envs", "setup", "run"}


def _emit(folder: Path, *args: str) -> tuple[int, str, str]:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        return invoke("calibrate", "w.toml", *args)
    finally:
        os.chdir(cwd)


def _fresh(tmp_path: Path) -> Path:
    folder = tmp_path / "case"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    shutil.copy(WORKLOADS / "llm7b.toml", folder / "w.toml")
    return folder


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=TEXT)
def test_an_env_value_is_refused_or_round_trips_in_every_task(tmp_path, value):
    folder = _fresh(tmp_path)
    code, _out, err = _emit(folder, "--emit", "skypilot", "--gpus", "16@2,24@3", "--out-dir", "t",
                           "--env", f"NCCL_DEBUG={value}")
    assert code in (0, 2) and "Traceback" not in err, err
    if code == 2:
        assert err.startswith("--env: ") and err.count("\n") == 1 and not (folder / "t").exists()
        return
    for f in sorted((folder / "t").glob("*.yaml")):
        (task,) = list(yaml.safe_load_all(f.read_text(encoding="utf-8")))
        assert set(task) == TASK_KEYS and task["envs"]["NCCL_DEBUG"] == value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=TEXT)
def test_a_results_folder_is_refused_or_one_word_of_the_slurm_script(tmp_path, value):
    folder = _fresh(tmp_path)
    code, out, err = _emit(folder, "--emit", "slurm", "--gpus", "16@2", "--results", f"r/{value}")
    assert code in (0, 2) and "Traceback" not in err, err
    if code == 2:
        # one line naming it; a NUL byte is refused by typer's Path option itself (its usage block, naming it)
        assert ((err.startswith("--results: ") and err.count("\n") == 1) or "'--results'" in err) and out == ""
        return
    assert subprocess.run(["bash", "-n"], input=out, text=True).returncode == 0
    step = next(ln for ln in out.splitlines() if ln.startswith("srun --nodes 2"))
    words = shlex.split(step.replace('"$ROOT"', "ROOT").removesuffix(" \\"))
    assert words[words.index("--results") + 1] == str(Path("ROOT") / Path(f"r/{value}") / "gpus16-nodes2")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=TEXT.filter(lambda t: "/" not in t and "\x00" not in t and t not in (".", "..")))
def test_a_workload_file_name_is_refused_or_data_in_every_task(tmp_path, value):
    folder = _fresh(tmp_path)
    name = f"w{value}.toml"
    try:
        shutil.copy(folder / "w.toml", folder / name)
    except OSError:  # a name this file system refuses (too long in bytes)
        return
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        code, _out, err = invoke("calibrate", name, "--emit", "skypilot", "--gpus", "16@2", "--out-dir", "t")
    finally:
        os.chdir(cwd)
    assert code in (0, 2) and "Traceback" not in err, err
    if code == 2:
        assert err.count("\n") == 1 and not (folder / "t").exists(), err
        return
    (task,) = list(yaml.safe_load_all((folder / "t" / "advisor-llm7b-gpus16-nodes2.yaml").read_text(encoding="utf-8")))
    assert set(task) == TASK_KEYS and shlex.quote(name) in task["run"]
