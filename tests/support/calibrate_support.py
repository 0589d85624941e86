"""Helpers for the calibration tests: a small real workload, the CLI as a background process,
and finding (or proving the absence of) a run's worker processes through /proc."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import ROOT, WORKLOADS

#: For tests that start real ranks: skipped where torch is not installed (a planner's install, where
#: calibrate refuses to measure), instead of failing on calibrate's "needs torch" line.
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="needs torch: pip install -e '.[calibrate]'")

#: Parameters of the 2-layer proxy below: embeddings 1024·256 + 64·256, 2·(12·256² + 13·256),
#: final norm 2·256 (advisor.calibrate.proxy.params_of_transformer; checked in test_calibrate_plan).
SMALL_PARAMS = 1024 * 256 + 64 * 256 + 2 * (12 * 256 * 256 + 13 * 256) + 2 * 256


def small_workload(folder: Path, strategy: str = "ddp", name: str = "tiny-test", **batch) -> Path:
    """tiny-cpu cut to 2 layers and a global batch of 8 (micro 4): a real but quick proxy."""
    text = (WORKLOADS / "tiny-cpu.toml").read_text()
    text = text.replace('name = "tiny-cpu"', f'name = "{name}"')
    text = text.replace("layers = 4", "layers = 2")
    text = "\n".join(
        f"params = {SMALL_PARAMS}" if line.startswith("params =") else line for line in text.splitlines()
    ) + "\n"
    text = text.replace('strategy = "ddp"', f'strategy = "{strategy}"')
    text = text.replace("global_samples = 32", f"global_samples = {batch.get('global_samples', 8)}")
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def valid_result(gpus: int = 2, nodes: int = 2) -> dict:
    """A result.json as advisor.calibrate.worker writes it, for small_workload (global batch 8)."""
    return {
        "workload": "tiny-test", "gpus": gpus, "nodes": nodes, "step_seconds": [0.2, 0.21],
        "compute_seconds": [0.15, 0.16], "global_batch": 8, "micro_samples": 4, "micro_batches": [4],
        "peak_memory_bytes": None, "tokens_per_second": 2560.0,
        # busbw = bytes / seconds x nccl-tests' factor on 2 ranks (1 for all-reduce, 1/2 otherwise)
        "collectives": [{"op": op, "bytes": 1048576, "seconds": 0.01, "busbw": busbw}
                        for op, busbw in (("all_reduce", 0.1049), ("reduce_scatter", 0.0524), ("all_gather", 0.0524))],
        "environment": {"torch": "2.13.0", "backend": "gloo", "device": "cpu (test)", "hosts": ["a", "b"],
                        "gpus_per_node": 1, "omp_threads": 1, "load_average": [0.1, 0.2, 0.3],
                        "strategy": "ddp", "declared_precision": "fp32", "declared_params": SMALL_PARAMS},
    }


def write_result(folder, result, ranks: int | None = None, raw: str | bytes | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    text = raw if raw is not None else json.dumps(result)
    (folder / "result.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    for r in range(ranks if ranks is not None else 2):
        (folder / f"rank{r}.json").write_text(json.dumps({"rank": r, "host": "a", "peak_memory_bytes": 0}))


def cli_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def start_cli(*args: str, **popen) -> subprocess.Popen:
    """`python -m advisor ARGS` in the background, output captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "advisor", *map(str, args)], cwd=ROOT, env=popen.pop("env", cli_env()),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen,
    )


def wait_for(predicate: Callable[[], object], timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            _out, err = proc.communicate()
            raise AssertionError(f"CLI exited ({proc.returncode}) before {what}:\n{err}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def worker_processes() -> dict[int, dict]:
    """Every live advisor.calibrate.worker process: pid -> {ppid, rank, parent (ADVISOR_PARENT_PID)}."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        cmd = _read(f"/proc/{entry}/cmdline").split(b"\0")
        if b"advisor.calibrate.worker" not in cmd:
            continue
        stat = _read(f"/proc/{entry}/stat").decode(errors="replace")
        if not stat or stat.rsplit(")", 1)[-1].split()[0] == "Z":
            continue  # gone, or a zombie awaiting its parent's wait()
        env = dict(
            item.split(b"=", 1) for item in _read(f"/proc/{entry}/environ").split(b"\0") if b"=" in item
        )
        found[int(entry)] = {
            "ppid": int(stat.rsplit(")", 1)[-1].split()[1]),
            "rank": int(env.get(b"RANK", b"-1")),
            "parent": int(env.get(b"ADVISOR_PARENT_PID", b"0")),
        }
    return found


def workers_of(cli_pid: int) -> dict[int, dict]:
    return {pid: info for pid, info in worker_processes().items() if info["parent"] == cli_pid}


def assert_no_workers_left(cli_pid: int, grace: float = 5.0) -> None:
    """No worker of that CLI run survives (allowing the kernel a moment to reap)."""
    deadline = time.monotonic() + grace
    while workers_of(cli_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = workers_of(cli_pid)
    assert not left, f"orphaned worker processes: {left}"
