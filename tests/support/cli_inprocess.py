"""Run the CLI in-process: `invoke` returns (exit status, stdout, stderr); `run_in_process` the same
as an object shaped like `conftest.run_cli`'s, from the same working folder (the repository root
unless given), for the many cases that need no process of their own.

Any exception other than SystemExit escapes, so a test sees a traceback as a failure. What needs a
real process stays on `conftest.run_cli`: one case per (command, exit status) as a user runs it,
signals, process groups, what importing advisor pulls in, input that could hang (FIFOs, devices).
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

from advisor.cli import main, output

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    output.configure()  # a usage error exits before the command configures its own: no -q left from the last
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()


@dataclass(frozen=True)
class InProcessResult:
    returncode: int
    stdout: str
    stderr: str


def run_in_process(*args: str, cwd: Path | None = None) -> InProcessResult:
    """`invoke(*args)` run from `cwd` (the repository root by default, as `run_cli`)."""
    with contextlib.chdir(cwd or ROOT):
        return InProcessResult(*invoke(*args))


def assert_refused(code: int, out: str, err: str, prefix: str, *needles: str) -> None:
    """The README's promise for bad input: exit 2, nothing on stdout, no traceback or Python warning
    (a numpy RuntimeWarning prints the install path), one line starting with `prefix` (the file and
    field, or the option) and holding every needle."""
    assert code == 2, (code, err)
    assert out == "" and "Traceback" not in err and "Warning" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith(prefix), err
    for needle in needles:
        assert needle in err, err
