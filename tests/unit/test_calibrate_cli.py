"""advisor/cli/calibrate.py: options are checked before torch is looked for (a planner's install has
none), and the command's shape (emit choices from the launchers registry) holds."""

from __future__ import annotations

import importlib.util

import pytest

from cli_inprocess import invoke
from conftest import WORKLOADS

TINY = WORKLOADS / "tiny-cpu.toml"
NO_TORCH = "needs torch, which is not installed"


@pytest.fixture
def no_torch(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))


@pytest.mark.parametrize("args, named", [
    (["--gpus", "0"], "--gpus"),
    (["--gpus", "8@2"], "--gpus"),
    (["--gpus", "1,1"], "--gpus"),
    (["--gpus", "a"], "--gpus"),
    (["--out", "."], "."),
])
def test_options_are_checked_before_torch(no_torch, tmp_path, args, named):
    code, out, err = invoke("calibrate", TINY, "--device", "cpu", *args)
    assert code == 2 and out == "" and err.startswith(named) and NO_TORCH not in err, err


def test_without_torch_valid_options_say_how_to_install(no_torch, tmp_path):
    code, _out, err = invoke("calibrate", TINY, "--device", "cpu", "--gpus", "1,2", "--out", tmp_path / "x.toml")
    assert code == 2 and NO_TORCH in err and not (tmp_path / "x.toml").exists()


def test_emit_needs_no_torch(no_torch):
    code, out, err = invoke("calibrate", TINY, "--emit", "torchrun", "--gpus", "8@2")
    assert code == 0 and out.count("torchrun --nnodes 2") == 2, err


def test_calibrate_command_is_under_60_lines_besides_its_options():
    import inspect

    from advisor.cli.calibrate import calibrate_command

    source = inspect.getsource(calibrate_command)
    body = source[source.index('    """'):]
    assert len(body.splitlines()) <= 45, len(body.splitlines())


@pytest.mark.parametrize(("args", "named"), [
    (["--warmup", "0"], "--warmup: a CUDA calibration needs at least 1 warm-up step"),
])
def test_emitted_cuda_runs_need_a_warmup(args, named):
    """An emitted GPU calibration with no warm-up would time NCCL's and cuBLAS's set-up: refused as
    locally (advisor.calibrate.session.check_warmup); on CPU ranks 0 stays allowed."""
    code, _, err = invoke("calibrate", WORKLOADS / "llm7b.toml", "--emit", "slurm", "--gpus", "16@2", *args)
    assert code == 2 and named in err
    code, _, err = invoke("calibrate", WORKLOADS / "tiny-cpu.toml", "--emit", "torchrun", "--gpus", "2@2",
                          "--device", "cpu", *args)
    assert code == 0, err
