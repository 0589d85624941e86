"""Shared by the stub executables in this folder (see README.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def log(name: str, argv: list[str]) -> None:
    path = os.environ.get("STUB_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(" ".join([name, *argv]) + "\n")


def run_all(commands: list[tuple[list[str], dict, str | None]], timeout: float | None = None) -> int:
    """Start every (argv, env, cwd) at once, each in its own process group; wait for all (killing the
    rest when one fails, as srun --kill-on-bad-exit does); the worst exit status."""
    procs = [subprocess.Popen(argv, env=env, cwd=cwd, start_new_session=True) for argv, env, cwd in commands]
    deadline = time.monotonic() + timeout if timeout is not None else None
    try:
        while any(p.poll() is None for p in procs):
            if any(p.returncode not in (None, 0) for p in procs):
                return max(abs(p.returncode or 0) for p in procs)
            if deadline is not None and time.monotonic() > deadline:
                return 124
            time.sleep(0.1)
        return max(abs(p.returncode) for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def main_guard(fn) -> None:
    sys.exit(fn(sys.argv[1:]))
