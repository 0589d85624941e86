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


#: Environment variable prefixes that change how NCCL (and libfabric under it, on EFA) moves bytes:
#: every variable with one is recorded, so a number can be explained by the transport it used.
COMM_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "FI_")


def comm_variables(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Every NCCL_*, TORCH_NCCL_* and FI_* variable of the rank's environment, sorted by name."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in sorted(environ) if k.startswith(COMM_ENV_PREFIXES)}


def _nvidia_smi(*args: str) -> str | None:
    """`nvidia-smi ARGS` output, or None where there is none (no driver tools, a timeout)."""
    import subprocess

    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


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
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    if hasattr(os, "getloadavg"):  # other work on the host at the end of the run (1, 5, 15 min)
        env["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if device_type == "cuda":
        env.update(describe_cuda(local_rank))
    else:
        env["backend"] = "gloo"
        env["device"] = f"cpu ({env['cpu']})"
    return env


def describe_cuda(local_rank: int) -> dict:
    """The rank's GPU: name, compute capability, memory, driver (nvidia-smi), CUDA and NCCL versions,
    the communication variables, and `nvidia-smi topo -m` (how the GPUs of the host are linked)."""
    import torch

    major, minor = torch.cuda.get_device_capability(local_rank)
    env = {
        "backend": "nccl",
        "device": torch.cuda.get_device_name(local_rank),
        "compute_capability": f"{major}.{minor}",
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "device_memory_bytes": torch.cuda.get_device_properties(local_rank).total_memory,
        "driver": _nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader", f"--id={local_rank}"),
        "comm_variables": comm_variables(),
        "topology": _nvidia_smi("topo", "-m") if local_rank == 0 else None,
    }
    return {k: v for k, v in env.items() if v not in (None, {})}


def device_line(env: dict) -> str:
    """One rank's device as recorded per host: `host: NAME, compute capability X.Y, driver D`."""
    parts = [str(env.get("device"))]
    if "compute_capability" in env:
        parts.append(f"compute capability {env['compute_capability']}")
    if "driver" in env:
        parts.append(f"driver {env['driver']}")
    return f"{env['host']}: " + ", ".join(parts)


def gather_devices(env: dict, device) -> tuple[list[str], list[str]]:
    """(every rank's host, every rank's device_line), gathered as byte tensors (rendezvous)."""
    from advisor.calibrate.rendezvous import all_gather_strings

    return all_gather_strings(env["host"], device), all_gather_strings(device_line(env), device)


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
