"""Calibration: real torch.distributed training steps and collective probes at several GPU counts.

Public API (torch is imported only inside the functions that launch or run ranks):

    calibrate(workload_path, gpus="1,2,4", device="auto", ...) -> (Calibration, Path)
    collect(workload_path, results_dir, out=None) -> (Calibration, Path)
    emit_placements(workload, "16,32@4") -> [(gpus, nodes)]
    launchers.emit('slurm'|'torchrun'|'skypilot', emit_job(...)) -> [EmittedFile]   # multi-node
    summary(calibration, workload) -> [SummaryRow]

Modules: plan (batch split, proxy shape, probe sizes), proxy (the model), worker (one rank),
launchers (local ranks, failures, timeouts; the torchrun/Slurm/SkyPilot emitters), settings (the
defaults), session (lock, resume, save per count), results (result.json -> runs), environment
(versions, devices).
"""

from advisor.calibrate.launchers.job import emit_placements
from advisor.calibrate.launchers.local import CalibrationFailed
from advisor.calibrate.results import SummaryRow, summary
from advisor.calibrate.session import CalibrationInterrupted, calibrate, collect

__all__ = [
    "CalibrationFailed", "CalibrationInterrupted", "SummaryRow", "calibrate", "collect", "emit_placements",
    "summary",
]
