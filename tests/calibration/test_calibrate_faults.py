"""Calibration faults injected for real (issue 8): a worker killed, a hung rank past --timeout,
SIGINT to the CLI then --resume, a read-only output folder, two calibrations on one file.
Each checks the exit status, the one-line message, the file, and that no worker survives."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.calibration_data import load_calibration
from calibrate_support import (
    assert_no_workers_left,
    cli_env,
    needs_torch,
    small_workload,
    start_cli,
    valid_result,
    wait_for,
    workers_of,
    write_result,
)
from conftest import run_cli

pytestmark = pytest.mark.slow

CPU = ("--device", "cpu", "--warmup", "1")

#: --timeout of the hung-rank test: well under the ranks' 30 s collective timeout (see there).
HUNG_TIMEOUT = 6


def _rank_pid(cli: subprocess.Popen, rank: int) -> int:
    def find():
        return next((pid for pid, info in workers_of(cli.pid).items() if info["rank"] == rank), None)
    return wait_for(find, 60, f"rank {rank} to start", cli)


def _saved_counts(path: Path) -> list[int]:
    try:
        return [r.gpus for r in load_calibration(path).runs]
    except Exception:
        return []


def _one_count_saved(spec: Path, out: Path, env: dict | None = None) -> None:
    """`out` holding a finished N=1 count, as a first calibration leaves it, collected from a
    result.json as the worker writes it instead of measured: a test that would otherwise run a
    CLI of its own (or many steps) for N=1 before its fault in N=2 pays only a --collect (then
    `--gpus 1,2 --resume` runs N=2 alone). Where N=1 is a 2-step count of the faulted run itself,
    it costs about what the --collect does (a few seconds), so those tests measure it."""
    results = out.parent / f"{out.name}.n1"
    write_result(results / "gpus1-nodes1", {**valid_result(gpus=1, nodes=1), "collectives": []}, ranks=1)
    r = run_cli("calibrate", spec, "--collect", results, "--out", out, env=env)
    assert r.returncode == 0, r.stderr
    shutil.rmtree(results)
    assert _saved_counts(out) == [1]


@needs_torch
def test_training_ranks_listen_on_loopback_only_and_a_killed_one_is_named(tmp_path):
    # One 2-rank run for both checks (each cost a torch start-up of its own): while the ranks train,
    # every socket they listen on is on loopback; then rank 1 is killed and named, and no rank survives.
    # torch's own TCPStore would listen on every interface (*:PORT): rank 0 must serve the store
    # on the loopback socket the launcher bound, and gloo's pairs listen on lo too.
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    env, scratch = _tmp_env(tmp_path)
    cli = start_cli("calibrate", spec, "--gpus", "2", "--steps", "200", *CPU, "--out", out, env=env)
    try:
        rank0, victim = _rank_pid(cli, 0), _rank_pid(cli, 1)
        # past start-up: both ranks are in the training loop (their first timed step done), however
        # slow the machine
        for rank in (0, 1):
            wait_for(lambda rank=rank: "@progress step" in _rank_log(scratch, rank), 120, f"rank {rank} to train", cli)
        listening = {pid: _listening_addresses(pid) for pid in workers_of(cli.pid)}
        loopback = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1
        assert len(listening[rank0]) >= 2, listening  # the store and gloo's listener at least
        assert all(addr in loopback for addrs in listening.values() for addr in addrs), listening
    except BaseException:
        cli.send_signal(signal.SIGINT)
        cli.communicate(timeout=60)
        raise
    os.kill(victim, signal.SIGKILL)
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 1, err
    assert "N=2: rank 1 failed: killed by SIGKILL" in err and "Traceback" not in err
    assert_no_workers_left(cli.pid)
    assert not out.exists()  # no count finished: nothing written, nothing half-written
    logs = Path(re.search(r"\(logs: (\S+)\)", err).group(1))
    assert logs.parent == tmp_path / "cal.toml.logs" and (logs / "rank1.log").exists()
    assert _leftovers(scratch) == []


@needs_torch
def test_hung_rank_is_killed_by_timeout_with_its_whole_group(tmp_path):
    # Deterministic under load: N=1 is in the file first (collected: no ranks, so no start-up a
    # loaded machine could stretch past a fixed bound), then only N=2 runs under --timeout; rank 1 is
    # stopped as soon as it exists, so the count can only end by the timeout, however slow the
    # machine (if the ranks are still starting, they hang in the rendezvous instead). The ranks' own
    # collective timeout is never below settings.min_collective_timeout (30 s), so rank 0 cannot give
    # up first: any --timeout under it ends the count the same way.
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    env, scratch = _tmp_env(tmp_path)
    _one_count_saved(spec, out, env)
    cli = start_cli("calibrate", spec, "--gpus", "1,2", "--steps", "2", *CPU, "--timeout", str(HUNG_TIMEOUT),
                    "--out", out, "--resume", env=env)
    hung = _rank_pid(cli, 1)
    os.kill(hung, signal.SIGSTOP)  # a real hang: rank 1 stops, rank 0 waits for it
    peers = list(workers_of(cli.pid))
    _, err = cli.communicate(timeout=120)
    assert cli.returncode == 1, err
    assert f"N=2: no result after {HUNG_TIMEOUT} s (--timeout); killed all 2 ranks" in err and "rank 1:" in err
    assert f"finished counts kept in {out}: none" in err
    assert_no_workers_left(cli.pid)
    for pid in peers:  # the stopped rank too: SIGKILL ends stopped processes
        assert (not Path(f"/proc/{pid}").exists()
                or b"Z" in Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[-1][:3])
    assert _saved_counts(out) == [1]
    assert _leftovers(scratch) == []


@needs_torch
def test_sigint_keeps_finished_counts_then_resume_completes(tmp_path):
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    env, scratch = _tmp_env(tmp_path)
    # Two counts: N=1 finished and kept, N=2 interrupted while it runs and measured by the resume
    # (a third count, never started, would only cost the resume another launch).
    cli = start_cli("calibrate", spec, "--gpus", "1,2", "--steps", "2", *CPU, "--out", out, env=env)
    wait_for(lambda: _saved_counts(out) == [1], 90, "N=1 saved", cli)
    _rank_pid(cli, 0)  # N=2 is running
    cli.send_signal(signal.SIGINT)
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 130, err
    assert _leftovers(scratch) == []
    assert "interrupted" in err and f"finished counts kept in {out}: N=1" in err and "Traceback" not in err
    assert_no_workers_left(cli.pid)
    first = load_calibration(out)
    assert [r.gpus for r in first.runs] == [1]
    r = run_cli("calibrate", spec, "--gpus", "1,2", "--steps", "2", *CPU, "--out", out, "--resume", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "N=1: already in" in r.stderr and "N=2: saved" in r.stderr
    done = load_calibration(out)
    assert [x.gpus for x in done.runs] == [1, 2]
    assert done.runs[0] == first.runs[0] and done.provenance.created == first.provenance.created
    assert {c.gpus for c in done.collectives} == {2}


def test_existing_file_is_not_overwritten_without_resume(tmp_path):
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    out.write_text("keep me\n")
    r = run_cli("calibrate", spec, "--gpus", "1", *CPU, "--out", out)
    assert r.returncode == 2 and "exists; pass --resume" in r.stderr
    assert out.read_text() == "keep me\n"


@needs_torch
def test_second_calibration_of_the_same_file_is_refused(tmp_path):
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    # Started as a shell starts a background job (SIGINT ignored): `kill -INT` must still stop it.
    first = start_cli("calibrate", spec, "--gpus", "1", "--steps", "50", *CPU, "--out", out,
                      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    _rank_pid(first, 0)  # the lock is taken before any rank starts
    r = run_cli("calibrate", spec, "--gpus", "1", *CPU, "--out", out, "--resume")
    assert r.returncode == 2, r.stderr
    assert "another advisor process is writing this file" in r.stderr and "Traceback" not in r.stderr
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 130 and "interrupted" in err
    assert_no_workers_left(first.pid)


def _make_read_only(folder: Path) -> None:
    """A folder the CLI cannot write to. Root ignores permission bits, so as root the folder is
    made immutable (chattr +i: no entry can be created, renamed or removed, even by root)."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode != 0:
            pytest.skip("running as root without chattr +i: cannot make a folder read-only for root")
    else:
        folder.chmod(0o555)


def _make_writable(folder: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    folder.chmod(0o755)


def test_read_only_output_folder_is_refused_before_measuring(tmp_path):
    spec = small_workload(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    _make_read_only(out_dir)
    try:
        r = run_cli("calibrate", spec, "--gpus", "1", *CPU, "--out", out_dir / "cal.toml")
        assert r.returncode == 2, r.stderr
        assert f"{out_dir / 'cal.toml'}: cannot create lock file cal.toml.lock" in r.stderr
        assert "Traceback" not in r.stderr and "N=1: starting" not in r.stderr
        assert list(out_dir.iterdir()) == []
    finally:
        _make_writable(out_dir)


@needs_torch
def test_write_failure_mid_run_leaves_the_previous_file_untouched(tmp_path):
    spec = small_workload(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "cal.toml"
    cli = start_cli("calibrate", spec, "--gpus", "1,2", "--steps", "2", *CPU, "--out", out)
    try:
        wait_for(lambda: _saved_counts(out) == [1], 90, "N=1 saved", cli)
        before = out.read_bytes()
        _make_read_only(out_dir)  # the disk refuses the next write
        _, err = cli.communicate(timeout=120)
    finally:
        _make_writable(out_dir)
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 2, err
    assert f"{out}: cannot write: " in err and "Traceback" not in err
    assert out.read_bytes() == before and _saved_counts(out) == [1]
    assert not [p for p in out_dir.iterdir() if p.name.endswith(".tmp")]
    assert_no_workers_left(cli.pid)
    # Nothing lost: the N=2 measurement waits in the folder the message names; --collect adds it.
    kept = re.search(r"^(\S+): the N=2 measurement is kept here", err, re.MULTILINE).group(1)
    r = run_cli("calibrate", spec, "--collect", kept, "--out", out)
    assert r.returncode == 0, r.stderr
    assert _saved_counts(out) == [1, 2]
    shutil.rmtree(kept, ignore_errors=True)


# -- issue 15: faults in the write, full disk, concurrency, stopped/killed CLI, changed spec --------

def _tmp_env(tmp_path: Path) -> tuple[dict, Path]:
    """A CLI environment whose temp dir is this test's own, so leftovers can be counted."""
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    return cli_env({"TMPDIR": str(scratch)}), scratch


def _leftovers(scratch: Path) -> list[Path]:
    return sorted(p for p in scratch.iterdir() if p.name.startswith("advisor-calibrate-"))


def _patched_cli(patch: str, *args) -> list[str]:
    """`python -c` running the CLI after `patch` (Python source) wraps one of advisor's functions:
    the fault is a real signal sent by the process to itself at that point."""
    code = ("import os, signal, sys\n" + patch + "\nfrom advisor.cli import main\nmain(sys.argv[1:])\n")
    return [sys.executable, "-c", code, *map(str, args)]


@needs_torch
def test_sigterm_during_the_write_keeps_the_finished_count(tmp_path):
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    env, scratch = _tmp_env(tmp_path)
    # The second write of the calibration file (N=2's) gets SIGTERM in the middle of it.
    patch = ("import advisor.fileio as f\nreal = f.atomic_write_bytes\ncalls = []\n"
             "def writing(path, data):\n"
             "    if str(path).endswith('cal.toml'):\n"
             "        calls.append(path)\n"
             "        if len(calls) == 2:\n"
             "            os.kill(os.getpid(), signal.SIGTERM)\n"
             "    return real(path, data)\n"
             "f.atomic_write_bytes = writing\n")
    r = subprocess.run(_patched_cli(patch, "calibrate", spec, "--gpus", "1,2,4", "--steps", "2", *CPU, "--out", out),
                       env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 130, r.stderr
    assert f"interrupted; ranks stopped; finished counts kept in {out}: N=1, N=2" in r.stderr
    assert _saved_counts(out) == [1, 2] and "Traceback" not in r.stderr
    assert _leftovers(scratch) == [] and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@needs_torch
def test_sigterm_after_the_ranks_finished_keeps_the_result_in_a_named_folder(tmp_path):
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    env, scratch = _tmp_env(tmp_path)
    patch = ("import advisor.calibrate.session as s\nreal = s.launch_local\n"
             "def launching(path, n, *a, **k):\n"
             "    result = real(path, n, *a, **k)\n"
             "    if n == 2:\n"
             "        os.kill(os.getpid(), signal.SIGTERM)\n"
             "    return result\n"
             "s.launch_local = launching\n")
    r = subprocess.run(_patched_cli(patch, "calibrate", spec, "--gpus", "1,2", "--steps", "2", *CPU, "--out", out),
                       env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 130, r.stderr
    assert f"finished counts kept in {out}: N=1" in r.stderr and _saved_counts(out) == [1]
    hint = re.search(r"a finished count not yet saved is kept in (\S+): add it with: (.+?); rerun", r.stderr)
    assert hint, r.stderr
    words = shlex.split(hint.group(2))
    assert words[0] == "advisor"
    r2 = run_cli(*words[1:], env=env)
    assert r2.returncode == 0, r2.stderr
    assert _saved_counts(out) == [1, 2]
    shutil.rmtree(hint.group(1))
    assert _leftovers(scratch) == []


@needs_torch
def test_full_disk_keeps_the_old_file_and_the_new_count(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tiny tmpfs")
    spec = small_workload(tmp_path)
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("cannot mount tmpfs here")
    env, scratch = _tmp_env(tmp_path)
    out = disk / "cal.toml"
    try:
        cli = start_cli("calibrate", spec, "--gpus", "1,2", "--steps", "2", *CPU, "--out", out, env=env)
        wait_for(lambda: _saved_counts(out) == [1], 120, "N=1 saved", cli)
        before = out.read_bytes()
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)  # the disk fills up while N=2 runs
        try:
            while True:
                os.write(fd, b"x" * 512)
        except OSError:
            pass
        finally:
            os.close(fd)
        _, err = cli.communicate(timeout=300)
        assert cli.returncode == 2, err
        assert f"{out}: cannot write: No space left on device" in err and "Traceback" not in err
        assert out.read_bytes() == before and not [p for p in disk.iterdir() if p.name.endswith(".tmp")]
        kept = re.search(r"^(\S+): the N=2 measurement is kept here; .* add it with: (.+)$", err, re.MULTILINE)
        os.unlink(disk / "filler")
        r = run_cli(*shlex.split(kept.group(2))[1:], env=env)
        assert r.returncode == 0, r.stderr
        assert _saved_counts(out) == [1, 2]
        shutil.rmtree(kept.group(1))
        assert _leftovers(scratch) == []
        assert_no_workers_left(cli.pid)
    finally:
        subprocess.run(["umount", "-l", str(disk)])


@needs_torch
def test_concurrent_writers_one_file_never_corrupted(tmp_path):
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    env, scratch = _tmp_env(tmp_path)
    clis = [start_cli("calibrate", spec, "--gpus", "1,2", "--steps", "2", *CPU, "--out", out, "--resume", env=env)
            for _ in range(3)]
    reads = 0
    while any(c.poll() is None for c in clis):
        if out.exists():
            load_calibration(out)  # every state a reader can see is a whole, valid file
            reads += 1
        time.sleep(0.02)
    errs = [c.communicate()[1] for c in clis]
    codes = [c.returncode for c in clis]
    assert codes.count(0) >= 1 and set(codes) <= {0, 2}, errs
    for code, err in zip(codes, errs, strict=True):
        if code == 2:
            assert "another advisor process is writing this file" in err and "Traceback" not in err
    assert _saved_counts(out) == [1, 2] and reads > 0
    assert _leftovers(scratch) == []
    for c in clis:
        assert_no_workers_left(c.pid)


@needs_torch
def test_stopped_cli_keeps_its_lock_then_stops_cleanly(tmp_path):
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    env, scratch = _tmp_env(tmp_path)
    # N=1 collected, not measured: 50 steps (N=2 must outlast the second CLI) would run at N=1 too.
    _one_count_saved(spec, out, env)
    cli = start_cli("calibrate", spec, "--gpus", "1,2", "--steps", "50", *CPU, "--out", out, "--resume", env=env)
    _rank_pid(cli, 1)
    os.kill(cli.pid, signal.SIGSTOP)  # Ctrl-Z: the CLI stops, its ranks run on
    try:
        r = run_cli("calibrate", spec, "--gpus", "1,2", *CPU, "--out", out, "--resume", env=env)
        assert r.returncode == 2 and "another advisor process is writing this file" in r.stderr
    finally:
        os.kill(cli.pid, signal.SIGTERM)
        os.kill(cli.pid, signal.SIGCONT)
    _, err = cli.communicate(timeout=120)
    assert cli.returncode == 130, err
    # this run's own finished counts (N=1 was in the file before it): none, or N=2 if it finished first
    assert f"finished counts kept in {out}: none" in err or f"finished counts kept in {out}: N=2" in err
    assert _saved_counts(out) in ([1], [1, 2])
    assert_no_workers_left(cli.pid)
    assert _leftovers(scratch) == []


@needs_torch
def test_ranks_die_with_a_killed_cli_and_the_next_run_removes_its_leftovers(tmp_path):
    # SIGKILL leaves the CLI no chance to clean up: the kernel ends its ranks (PR_SET_PDEATHSIG), and
    # the result folder and lock it left behind are removed by the next run. One killed run for both.
    spec = small_workload(tmp_path)
    env, scratch = _tmp_env(tmp_path)
    out = tmp_path / "cal.toml"
    cli = start_cli("calibrate", spec, "--gpus", "2", "--steps", "200", *CPU, "--out", out, env=env)
    _rank_pid(cli, 1)
    # past start-up: the ranks are training (rank 1's first timed step done), however slow the machine
    wait_for(lambda: "@progress step" in _rank_log(scratch, 1), 120, "the ranks to train", cli)
    assert len(workers_of(cli.pid)) == 2
    cli.kill()
    cli.communicate(timeout=30)
    assert_no_workers_left(cli.pid)
    left = _leftovers(scratch)
    assert len(left) == 1 and (out.parent / "cal.toml.lock").exists()  # a stale lock too
    r = run_cli("calibrate", spec, "--gpus", "1", "--steps", "1", *CPU, "--out", out, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"removed 1 result folder left by calibrations that were killed: {left[0]}" in r.stderr
    assert _leftovers(scratch) == [] and _saved_counts(out) == [1]


@needs_torch
def test_misconfigured_network_fails_with_the_ranks_own_error_and_keeps_only_its_named_logs(tmp_path):
    # A half-configured host: gloo told to use an interface that does not exist. The ranks raise
    # at start-up; the message carries the first line of a rank's own error, and the count's logs
    # stay (named in the message) while no temporary folder does. One failed start-up for both.
    spec = small_workload(tmp_path)
    env, scratch = _tmp_env(tmp_path)
    env["GLOO_SOCKET_IFNAME"] = "advisor-no-such-if0"
    r = run_cli("calibrate", spec, "--gpus", "2", *CPU, "--out", tmp_path / "cal.toml", env=env)
    assert r.returncode == 1, r.stderr
    line = next(ln for ln in r.stderr.splitlines() if "failed:" in ln)
    assert re.search(r"N=2: rank [01] failed: \w+(Error|Exception)?: .*advisor-no-such-if0", line), line
    assert "Traceback" not in r.stderr and not (tmp_path / "cal.toml").exists()
    named = Path(re.search(r"\(logs: (\S+)\)", r.stderr).group(1))
    assert named.parent == tmp_path / "cal.toml.logs" and named.name.startswith("N2-")
    assert "advisor-no-such-if0" in (named / "rank0.log").read_text() + (named / "rank1.log").read_text()
    assert _leftovers(scratch) == []  # no temporary folder stays behind


def test_changed_spec_under_resume_is_refused_naming_the_field(tmp_path):
    spec = small_workload(tmp_path)
    out = tmp_path / "cal.toml"
    write_result(tmp_path / "results" / "gpus2-nodes2", valid_result())
    assert run_cli("calibrate", spec, "--collect", tmp_path / "results", "--out", out).returncode == 0
    before = out.read_bytes()
    changed = small_workload(tmp_path, strategy="fsdp", global_samples=16)
    r = run_cli("calibrate", changed, "--gpus", "1", *CPU, "--out", out, "--resume")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == [
        f"{out}: setup.batch.global_samples: the spec changed since this file was measured: recorded 8, the spec now "
        "gives 16; measure into another --out, or restore the spec",
        f"{out}: setup.parallelism.strategy: the spec changed since this file was measured: recorded 'ddp', the spec "
        "now gives 'fsdp'; measure into another --out, or restore the spec",
    ]
    assert out.read_bytes() == before
    # The same for --collect into that file, and for a file written before [setup] existed.
    r = run_cli("calibrate", changed, "--collect", tmp_path / "results", "--out", out)
    assert r.returncode == 2 and "global_batch: the spec's batch gives 16" in r.stderr
    legacy = tmp_path / "legacy.toml"
    legacy.write_text(before.decode().split("[setup]")[0] + "[[runs]]" + before.decode().split("[[runs]]", 1)[1])
    r = run_cli("calibrate", changed, "--gpus", "1", *CPU, "--out", legacy, "--resume")
    assert r.returncode == 2 and "setup.parallelism.strategy" in r.stderr, r.stderr


def _listening_addresses(pid: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp* writes them) of the TCP sockets `pid` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                out.append(fields[1].split(":")[0])
    return out


def _rank_log(scratch: Path, rank: int = 0) -> str:
    """The log of `rank` in the newest result folder under the CLI's temp dir ("" before it exists)."""
    logs = sorted(scratch.glob(f"advisor-calibrate-*/rank{rank}.log"))
    return logs[-1].read_text(errors="replace") if logs else ""
