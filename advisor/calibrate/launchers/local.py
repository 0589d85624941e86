"""Start the ranks of one local calibration run and watch them: failures, hangs, Ctrl-C.

`launch_local(...)` starts N worker processes (`python -m advisor.calibrate.worker`) on this
machine, one per rank, with the standard env:// variables, and waits for them. Why not torchrun
or `elastic_launch` here: a launcher that owns the ranks directly can (1) put all of them in one
process group of their own and kill that whole group on a timeout, a failure or Ctrl-C, (2) read
each rank's own one-line error file and log, so a failure names the rank and its cause, and
(3) set OMP_NUM_THREADS per worker (`threads_per_rank`; elastic_launch does not: unset, a 2-rank
CPU DDP step was ~60x slower on the development machine). Multi-node runs use torchrun (the
emitters beside this module); the worker is the same.

No orphans: the ranks run in their own process group (so a terminal's Ctrl-C reaches only the
CLI, which then kills the group: SIGTERM, then SIGKILL after KILL_GRACE_SECONDS), and each
worker asks the kernel to SIGKILL it if the launcher dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from advisor.calibrate.settings import SETTINGS

#: Seconds between SIGTERM and SIGKILL when stopping a run's process group.
KILL_GRACE_SECONDS = 3.0

#: How often the launcher looks at its ranks.
POLL_SECONDS = 0.05

#: Errors a rank reports when a *peer* failed first (gloo/NCCL connection loss); used to name the
#: rank that failed first when several fail at once.
PEER_FAILURE = re.compile(
    r"Connection closed by peer|Connection reset|Broken pipe|ECONNRESET|EPIPE|Socket Timeout|"
    r"timed out|NCCL communicator was aborted|DistNetworkError|DistBackendError|"
    r"Connection refused|terminated with signal SIGTERM",
    re.IGNORECASE,
)


class CalibrationFailed(Exception):
    """A calibration run failed (a rank crashed, or the run hung past --timeout). One line.

    The session adds `out` (the calibration file) and `saved` (the counts saved to it this run)."""

    def __init__(self, message: str, out: Path | None = None, saved: list[int] | None = None):
        super().__init__(message)
        self.out, self.saved = out, list(saved or [])


@dataclass
class RankState:
    rank: int
    proc: subprocess.Popen
    log: Path
    exited_at: float | None = None


def threads_per_rank(ranks: int, device: str) -> int:
    """OpenMP threads per rank. CPU ranks stand in for GPUs, so each gets one thread: a rank is one
    fixed unit of compute whatever N is, and adding ranks adds compute as adding GPUs does (with
    cores // N threads, N=1 would get every core and the 1 -> 2 step would measure nothing but
    thread scaling; OpenMP's spinning threads also collapse when other jobs share the cores).
    CUDA ranks: the host's cores shared evenly, at least 1 (data loading and kernel launches)."""
    if device == "cpu":
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // ranks)


def last_progress(log: Path) -> str:
    """The rank's latest `@progress` line ('step 3/8'), or 'starting'."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "starting"
    found = re.findall(r"^@progress (.+)$", text, flags=re.MULTILINE)
    return found[-1] if found else "starting"


def rank_error(results: Path, state: RankState) -> str:
    """One line saying why a rank stopped: its error file, else its exit signal or status."""
    error_file = results / f"rank{state.rank}.error"
    if error_file.is_file():
        line = error_file.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        if line:
            return line[0]
    code = state.proc.returncode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    tail = [ln for ln in _read_lines(state.log) if ln.strip() and not ln.startswith("@progress")]
    return f"exit status {code}" + (f": {tail[-1].strip()}" if tail else "")


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def first_failure(results: Path, failed: list[RankState]) -> tuple[RankState, str]:
    """The rank to blame: the earliest to fail whose error is not a peer's loss; else the earliest."""
    ordered = sorted(failed, key=lambda s: (s.exited_at or 0.0, s.rank))
    errors = {s.rank: rank_error(results, s) for s in ordered}
    for s in ordered:
        if not PEER_FAILURE.search(errors[s.rank]):
            return s, errors[s.rank]
    return ordered[0], errors[ordered[0].rank]


def kill_group(pgid: int, states: list[RankState]) -> None:
    """SIGTERM the run's process group, SIGKILL it after a grace period, reap every rank."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(s.proc.poll() is None for s in states):
            time.sleep(POLL_SECONDS)
        if all(s.proc.poll() is not None for s in states):
            break
    for s in states:
        with contextlib.suppress(subprocess.TimeoutExpired):
            s.proc.wait(timeout=5)


def _store_socket() -> socket.socket:
    """Rank 0's store socket, bound to loopback and listening (advisor.calibrate.rendezvous)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _rank_env(gpus: int, device: str, port: int, store_fd: int) -> dict:
    """The env:// variables of a local run (RANK and LOCAL_RANK added per rank)."""
    from advisor.calibrate.rendezvous import STORE_FD_ENV

    env = dict(os.environ)
    env.update({
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        STORE_FD_ENV: str(store_fd),
        "WORLD_SIZE": str(gpus),
        "LOCAL_WORLD_SIZE": str(gpus),
        "OMP_NUM_THREADS": str(threads_per_rank(gpus, device)),
        "ADVISOR_PARENT_PID": str(os.getpid()),
        "PYTHONUNBUFFERED": "1",
    })
    if sys.platform.startswith("linux"):  # one host: loopback, whatever the hostname resolves to
        env.setdefault("GLOO_SOCKET_IFNAME" if device == "cpu" else "NCCL_SOCKET_IFNAME", "lo")
    return env


def _start_ranks(command: list[str], env: dict, gpus: int, results: Path, store: socket.socket) -> list[RankState]:
    """One process per rank, all in one new process group (rank 0's pid); rank 0 inherits the store socket."""
    states: list[RankState] = []
    pgid = 0
    try:
        for rank in range(gpus):
            log = results / f"rank{rank}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    command, env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, process_group=pgid,
                    pass_fds=(store.fileno(),) if rank == 0 else (),
                )
            pgid = pgid or proc.pid
            states.append(RankState(rank, proc, log))
    except BaseException:
        if pgid:
            kill_group(pgid, states)
        raise
    return states


def _note_exits(states: list[RankState]) -> list[RankState]:
    """Stamp ranks that exited since the last look; return those that failed."""
    now = time.monotonic()
    for s in states:
        if s.exited_at is None and s.proc.poll() is not None:
            s.exited_at = now
    return [s for s in states if s.exited_at is not None and s.proc.returncode != 0]


def _watch(states: list[RankState], gpus: int, results: Path, timeout: float | None,
           on_progress: Callable[[str], None] | None) -> None:
    """Wait until every rank exits cleanly; on a failure or past `timeout`, kill the group and raise."""
    pgid, start, shown = states[0].proc.pid, time.monotonic(), ""
    while True:
        failed = _note_exits(states)
        if failed:
            time.sleep(0.2)  # let a peer's failure land too, so the first cause is blamed
            blamed, error = first_failure(results, _note_exits(states))
            kill_group(pgid, states)
            raise CalibrationFailed(f"N={gpus}: rank {blamed.rank} failed: {error} (logs: {results})")
        if all(s.exited_at is not None for s in states):
            return
        elapsed = time.monotonic() - start
        if timeout is not None and elapsed > timeout:
            where = ", ".join(f"rank {s.rank}: {last_progress(s.log)}" for s in states)
            kill_group(pgid, states)
            raise CalibrationFailed(
                f"N={gpus}: no result after {timeout:g} s (--timeout); killed all {gpus} ranks; "
                f"they were at: {where} (logs: {results})"
            )
        if on_progress is not None:
            text = f"N={gpus}: rank 0 {last_progress(states[0].log)}, {elapsed:.0f} s"
            if text != shown:
                on_progress(text)
                shown = text
        time.sleep(POLL_SECONDS)


def launch_local(
    workload_path: Path,
    gpus: int,
    device: str,
    steps: int,
    warmup: int,
    results: Path,
    timeout: float | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> dict:
    """Run one calibration at `gpus` ranks on this machine; return rank 0's checked result.json.

    Raises CalibrationFailed naming the failing rank and the first line of its error, or saying
    that the run passed `timeout` seconds (then listing where each rank was). Ranks' logs stay in
    `results/rank<R>.log`.
    """
    from advisor.calibrate.results import read_result_dir
    from advisor.errors import InputError

    results.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "advisor.calibrate.worker", "--workload", str(workload_path),
        "--results", str(results), "--device", device, "--steps", str(steps), "--warmup", str(warmup),
    ]
    if timeout is not None:
        command += ["--collective-timeout", str(max(SETTINGS.min_collective_timeout, timeout))]
    with _store_socket() as store:
        env = _rank_env(gpus, device, store.getsockname()[1], store.fileno())
        states = _start_ranks(command, env, gpus, results, store)
    try:
        _watch(states, gpus, results, timeout, on_progress)
    except BaseException:
        kill_group(states[0].proc.pid, states)
        raise
    if not (results / "result.json").is_file():
        raise CalibrationFailed(f"N={gpus}: every rank exited cleanly but rank 0 wrote no result.json "
                                f"(logs: {results})")
    try:
        return read_result_dir(results)
    except InputError as exc:
        raise CalibrationFailed(f"N={gpus}: rank 0's result is not valid: {exc.lines()[0]} (logs: {results})") from None
