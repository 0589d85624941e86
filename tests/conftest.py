"""Shared fixtures: the repository root, the example workloads, and a CLI runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "workloads"
SHARED_DATA = ROOT.parent / "shared" / "data"


class CliResult:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 120, env: dict | None = None) -> CliResult:
    """Run the real CLI in a subprocess (`python -m advisor ...`), as a user would."""
    proc = subprocess.run(
        [sys.executable, "-m", "advisor", *map(str, args)],
        cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout, env=env,
    )
    return CliResult(proc)


@pytest.fixture
def cli():
    return run_cli
