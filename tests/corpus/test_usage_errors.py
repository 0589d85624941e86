"""Usage errors (click's own: unknown options, missing values, typer's range and choice checks) get
the one line every other bad input gets: exit 2, one stderr line naming the option, no usage block."""

from __future__ import annotations

import pytest

from cli_inprocess import invoke
from conftest import WORKLOADS

TINY = str(WORKLOADS / "tiny-cpu.toml")
LLM7B = str(WORKLOADS / "llm7b.toml")

CASES = {
    "out of typer's range": (["calibrate", TINY, "--warmup", "-1"], "--warmup"),
    "not a choice": (["calibrate", TINY, "--device", "gpu"], "--device"),
    "unknown option": (["predict", LLM7B, "--bogus"], "--bogus"),
    "option without its value": (["recommend", "--budget"], "--budget"),
    "missing argument": (["predict"], "workload"),
    "extra argument": (["validate", TINY, TINY + ".2"], "unexpected extra argument"),
    "unknown command": (["nosuch"], "nosuch"),
    "not a number": (["calibrate", TINY, "--steps", "ten"], "--steps"),
    "range of a port": (["calibrate", LLM7B, "--emit", "torchrun", "--rdzv-port", "70000"], "--rdzv-port"),
}


@pytest.mark.parametrize(("args", "named"), CASES.values(), ids=CASES.keys())
def test_usage_error_is_one_line_naming_the_option(args, named):
    code, out, err = invoke(*args)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], err
    assert "Usage:" not in err and "Traceback" not in err


def test_help_and_version_still_exit_zero():
    assert invoke("--version")[0] == 0
    code, out, _ = invoke("predict", "--help")
    assert code == 0 and "Usage:" in out
