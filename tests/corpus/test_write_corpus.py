"""Write corpus (issues 24 and 22): what advisor leaves beside the files it writes. No `.lock` beside
an output once a command is done (or refused), none created beside a directory or a device it
refuses, no temporary copy left by a killed writer once the file is written again, and a
symbolic link as the target refused rather than silently replaced by a regular file."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from calibrate_support import cli_env, small_workload, valid_result, write_result
from cli_inprocess import invoke
from conftest import ROOT, WORKLOADS

RENTAL = WORKLOADS / "rental-ethernet.toml"
NCCL_LOG = ROOT / "tests" / "fixtures" / "nccl-tests" / "a100_1node_oci_all_reduce.log"
TITAN_LOG = ROOT / "tests" / "fixtures" / "torchtitan" / "debug_model_pr1437.log"


def _leftovers(folder, keep=()) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n not in keep and (n.endswith(".lock") or n.endswith(".tmp")))


IMPORTS = {
    "nccl-tests": ("import", "nccl-tests", RENTAL, NCCL_LOG),
    "torchtitan": ("import", "torchtitan", RENTAL, TITAN_LOG, "--gpus", "8@1"),
}


@pytest.mark.parametrize("name", sorted(IMPORTS))
@pytest.mark.parametrize("times", [1, 2])
def test_no_lock_is_left_beside_an_import(tmp_path, name, times):
    out = tmp_path / "cal.toml"
    for _ in range(times):
        code, _, err = invoke(*IMPORTS[name], "--out", out)
    assert code in (0, 2) and "Traceback" not in err, err
    assert out.exists() and _leftovers(tmp_path) == []


def test_no_lock_is_left_beside_a_refused_import(tmp_path):
    bad = tmp_path / "bad.log"
    bad.write_text("hello\n")
    code, _, _ = invoke("import", "nccl-tests", RENTAL, bad, "--out", tmp_path / "cal.toml")
    assert code == 2 and _leftovers(tmp_path) == []


def test_no_lock_is_left_beside_a_collected_calibration(tmp_path):
    spec = small_workload(tmp_path)
    write_result(tmp_path / "results" / "gpus2-nodes2", valid_result())
    out = tmp_path / "out" / "cal.toml"
    out.parent.mkdir()
    code, _, err = invoke("calibrate", spec, "--collect", tmp_path / "results", "--out", out)
    assert code == 0, err
    assert _leftovers(out.parent) == []


@pytest.mark.parametrize("name", sorted(IMPORTS))
def test_no_lock_beside_a_folder_or_device_target(tmp_path, name):
    folder = tmp_path / "folder"
    folder.mkdir()
    code, out, err = invoke(*IMPORTS[name], "--out", folder)
    assert code == 2 and out == "" and "is a directory" in err, err
    assert _leftovers(tmp_path) == []
    existed = os.path.exists("/dev/null.lock")
    code, out, err = invoke(*IMPORTS[name], "--out", "/dev/null")
    assert code == 2 and "not a regular file" in err, err
    assert os.path.exists("/dev/null.lock") == existed  # as root advisor created /dev/null.lock


def test_a_stale_lock_of_a_killed_process_is_taken_and_removed(tmp_path):
    out = tmp_path / "cal.toml"
    (tmp_path / "cal.toml.lock").write_text("")  # left by a SIGKILLed import: no flock on it
    code, _, err = invoke(*IMPORTS["nccl-tests"], "--out", out)
    assert code == 0, err
    assert _leftovers(tmp_path) == []


def test_a_held_lock_refuses_and_survives_for_its_holder(tmp_path):
    out = tmp_path / "cal.toml"
    code = ("import sys, time; from advisor.fileio import exclusive_lock\n"
            "with exclusive_lock(sys.argv[1]):\n    print(1, flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True,
                              env=cli_env())
    try:
        assert holder.stdout.readline().strip() == "1"
        code_, _, err = invoke(*IMPORTS["nccl-tests"], "--out", out)
        assert code_ == 2 and "another advisor process is writing this file" in err, err
        assert (tmp_path / "cal.toml.lock").exists() and not out.exists()
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=30)


def _killed_writer(target) -> None:
    """A writer SIGKILLed between writing its temporary copy and the rename."""
    code = ("import os, sys; from pathlib import Path; from advisor.fileio import _temp_copy\n"
            "p = Path(sys.argv[1]); _temp_copy(p, p.parent, b'half', None); os.kill(os.getpid(), 9)\n")
    r = subprocess.run([sys.executable, "-c", code, str(target)], env=cli_env(), timeout=60)
    assert r.returncode == -9


@pytest.mark.parametrize("name", sorted(IMPORTS))
def test_a_killed_writers_temporary_copy_is_removed_by_the_next_write(tmp_path, name):
    out = tmp_path / "cal.toml"
    _killed_writer(out)
    assert len([n for n in os.listdir(tmp_path) if n.endswith(".tmp")]) == 1
    code, _, err = invoke(*IMPORTS[name], "--out", out)
    assert code == 0, err
    assert _leftovers(tmp_path) == []


def test_temporary_copies_of_live_writers_and_other_hosts_are_kept(tmp_path):
    out = tmp_path / "cal.toml"
    host = (socket.gethostname().replace("/", "_").replace(".", "_") or "host")[:32]
    live = tmp_path / f".cal.toml.{host}.{os.getppid()}.abc123.tmp"   # a process that is running
    other = tmp_path / ".cal.toml.other-host.1.abc123.tmp"  # another machine's writer (shared folder)
    foreign = tmp_path / ".other.toml.x.1.abc.tmp"  # another file's
    for p in (live, other, foreign):
        p.write_text("x")
    assert invoke(*IMPORTS["nccl-tests"], "--out", out)[0] == 0
    assert live.exists() and other.exists() and foreign.exists()


def _link(tmp_path):
    target = tmp_path / "real.toml"
    link = tmp_path / "link.toml"
    link.symlink_to(target)
    return target, link


@pytest.mark.parametrize("name", sorted(IMPORTS))
@pytest.mark.parametrize("existing", [True, False])
def test_a_symlinked_out_is_refused_and_kept(tmp_path, name, existing):
    target, link = _link(tmp_path)
    if existing:
        assert invoke(*IMPORTS[name], "--out", target)[0] == 0
    before = target.read_bytes() if existing else None
    code, out, err = invoke(*IMPORTS[name], "--out", link)
    assert code == 2 and out == "" and err.startswith(f"{link}: is a symbolic link"), err
    assert link.is_symlink() and (target.read_bytes() if existing else None) == before
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("command", [("predict", WORKLOADS / "llm7b.toml", "--gpus", "8,16"),
                                     ("recommend", WORKLOADS / "llm7b.toml")])
def test_a_symlinked_plot_is_refused_and_kept(tmp_path, command):
    target, link = tmp_path / "real.png", tmp_path / "link.png"  # --plot refuses a name of another format
    link.symlink_to(target)
    target.write_bytes(b"old")
    code, _, err = invoke(*command, "--plot", link)
    assert code == 2 and f"{link}: is a symbolic link" in err and "Traceback" not in err, err
    assert link.is_symlink() and target.read_bytes() == b"old"


def test_a_symlinked_init_out_is_refused(tmp_path):
    _, link = _link(tmp_path)
    code, _, err = invoke("init", "--out", link)
    assert code == 2 and str(link) in err and "Traceback" not in err, err
    assert link.is_symlink() and not link.exists()


def test_concurrent_imports_lose_nothing_and_leave_no_lock(tmp_path):
    """Imports racing for one file: each either adds its rows or is refused (another process is
    writing), and the file holds exactly the rows of those that succeeded."""
    from advisor.calibration_data import load_calibration

    logs = sorted((ROOT / "tests" / "fixtures" / "nccl-tests").glob("*.log"))
    rows = {"h100_2node_gcp_a3mega_all_reduce.log": 31, "a100_1node_oci_all_reduce.log": 1,
            "a100_2node_oci_all_reduce.log": 1}
    out = tmp_path / "cal.toml"
    procs = [subprocess.Popen([sys.executable, "-m", "advisor", "import", "nccl-tests", str(RENTAL), str(log),
                               "--out", str(out)], env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for log in logs for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    expected = set()
    for (code, err), log in zip(results, [log for log in logs for _ in range(2)], strict=True):
        assert code in (0, 2) and "Traceback" not in err, err
        if code == 2:
            assert "another advisor process is writing this file" in err, err
        else:
            expected.add(log.name)
    assert expected, results
    assert len(load_calibration(out).collectives) == sum(rows[n] for n in expected)
    assert _leftovers(tmp_path) == []
