"""Calibration defaults in one place: what every launcher and the CLI fall back to.

`SETTINGS` is the one instance; options such as `--rdzv-port`, `--timeout` and `--cpus-per-rank`
default to its fields, and the rules derived from them (the collective timeout of an emitted
run, the Slurm allocation's time limit) are its methods, so a launcher cannot drift from another.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CalibrationSettings:
    rdzv_port: int = 29500
    """Rendezvous port on node 0 of an emitted run (torchrun's default, 29500)."""
    step_timeout: float = 1800.0
    """Seconds one emitted placement may run (`--timeout`): Slurm `srun --time`, SkyPilot `timeout`."""
    allocation_slack: float = 600.0
    """Seconds a Slurm allocation gets beyond its steps' limits (start-up, the head address, --collect)."""
    results_folder: str = "advisor-results"
    """Emitted runs write under RESULTS/NAME unless `--results` says otherwise."""
    min_collective_timeout: float = 30.0
    """Shortest collective timeout any rank is given (NCCL/gloo initialisation alone can take seconds)."""
    max_collective_timeout: float = 600.0
    """Longest: torch's own default for NCCL process groups (torch.distributed, 10 min)."""
    cpus_per_rank: int = 8
    """CPU cores per GPU rank asked of a scheduler (`--cpus-per-rank`); CPU ranks get one each."""
    kill_after: float = 30.0
    """Seconds between SIGTERM and SIGKILL when an emitted placement passes its limit."""
    passed_env: tuple[str, ...] = ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG", "GLOO_SOCKET_IFNAME")
    """Variables passed into emitted jobs when set where advisor runs: the NCCL network choices every
    NCCL issue asks about (NVIDIA NCCL docs, "Environment Variables") and gloo's."""

    def results_root(self, workload_name: str) -> Path:
        return Path(self.results_folder) / workload_name

    def collective_timeout(self, step_timeout: float) -> float:
        """Seconds a collective waits for a peer in a run limited to `step_timeout`: half the limit
        within [min, max], so a node that died shows up as a rank error (naming the collective)
        while the run still has time to report it, instead of the others idling until killed."""
        return max(self.min_collective_timeout, min(self.max_collective_timeout, step_timeout / 2))

    def threads(self, device: str, cpus_per_rank: int | None = None) -> int:
        """OMP_NUM_THREADS of one rank: 1 on CPU (a rank stands in for one GPU), else its cores."""
        return 1 if device == "cpu" else (cpus_per_rank or self.cpus_per_rank)

    def allocation_seconds(self, placements: int, step_timeout: float) -> float:
        return step_timeout * placements + self.allocation_slack


SETTINGS = CalibrationSettings()
