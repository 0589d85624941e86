"""Run the CLI in-process (fast, for property tests): returns (exit status, stdout, stderr).

Any exception other than SystemExit escapes, so a test sees a traceback as a failure.
"""

from __future__ import annotations

import contextlib
import io

from advisor.cli import main


def invoke(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()
