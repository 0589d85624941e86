"""What a calibration ran on: versions, backend, devices, hosts (recorded in `[environment]`).

`describe_rank` runs inside a worker (torch is imported there); `merge_environments` combines what
the runs at each GPU count reported into the file's one `[environment]` table.
"""

from __future__ import annotations

import os
import platform
import socket


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_rank(device_type: str, local_rank: int) -> dict:
    """This rank's software and device (called in the worker, after torch is imported)."""
    import torch

    import advisor

    env = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "advisor": advisor.__version__,
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "cpu": cpu_name(),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "omp_threads": torch.get_num_threads(),
    }
    if hasattr(os, "getloadavg"):  # other work on the host at the end of the run (1, 5, 15 min)
        env["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if device_type == "cuda":
        env["backend"] = "nccl"
        env["device"] = torch.cuda.get_device_name(local_rank)
        env["cuda"] = torch.version.cuda
        env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        env["device_memory_bytes"] = torch.cuda.get_device_properties(local_rank).total_memory
    else:
        env["backend"] = "gloo"
        env["device"] = f"cpu ({env['cpu']})"
    return env


#: Values that differ between GPU counts, stored as tables keyed by the count.
PER_COUNT = ("omp_threads", "gpus_per_node", "load_average")


def merge_environments(old: dict, new: dict, gpus: int) -> dict:
    """One `[environment]` for the file: the first run's values, hosts united over runs, and the
    per-count values (OpenMP threads per rank, ranks per node, rank 0's host load average at the
    end of the run) keyed by GPU count."""
    merged = dict(old) if old else {k: v for k, v in new.items() if k not in ("hosts", *PER_COUNT)}
    hosts = [h for env in (old, new) if isinstance(env.get("hosts"), list) for h in env["hosts"]]
    merged["hosts"] = sorted({str(h) for h in hosts})
    for key in PER_COUNT:
        if key in new:
            table = dict(merged.get(key, {}) if isinstance(merged.get(key), dict) else {})
            table[str(gpus)] = new[key]
            merged[key] = dict(sorted(table.items(), key=lambda kv: int(kv[0])))
    for key, value in new.items():  # keys a later run adds (e.g. a CUDA run after a CPU one)
        merged.setdefault(key, value)
    return merged
