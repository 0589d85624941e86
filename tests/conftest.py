"""Shared fixtures: the repository root, the example workloads, a CLI runner, and marks by folder.

The folders say how fast a test is and what it needs (README, "Tests"):
- tests/unit/: in-process, one file per module; the fast loop (`python -m pytest tests/unit -q`).
- tests/cli/: the commands as a user runs them (a real subprocess per command and exit status).
- tests/corpus/: hostile inputs and property tests.
- tests/calibration/: real gloo jobs, network namespaces, CUDA; marked `slow` here.
Helpers shared by several test files live in tests/support/ and are imported by module name.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))
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


def pytest_collection_modifyitems(items):
    """Mark every test under tests/calibration/ as slow (real jobs), whatever its own marks say."""
    calibration = Path(__file__).resolve().parent / "calibration"
    for item in items:
        if calibration in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.slow)
