"""Option corpus (issue 24): `advisor init` values, `--layouts auto` without a GPU memory, and empty
or odd option values. A bad value answers as the README promises: exit 2, one line naming the
option, no traceback, nothing written; a value that is valid but unusual (a path with a newline)
works and cannot break the file it ends up in."""

from __future__ import annotations

import copy
import json
import re
import tomllib

import pytest
import tomli_w

from cli_inprocess import assert_refused, invoke
from conftest import ROOT, WORKLOADS

LLM7B, TINY, RENTAL = WORKLOADS / "llm7b.toml", WORKLOADS / "tiny-cpu.toml", WORKLOADS / "rental-ethernet.toml"
NCCL_LOG = ROOT / "tests" / "fixtures" / "nccl-tests" / "a100_1node_oci_all_reduce.log"


_one_line = assert_refused


# -- 5. advisor init --------------------------------------------------------------------------------

@pytest.mark.parametrize("params", ["0", "-5B", "0B", "-0", "0.0", "1e-3", "0.4", "1e20", "2e15", "-1e300",
                                    "1e400", "nan", "inf", "-inf"])
def test_init_params_out_of_range_name_the_option(tmp_path, params):
    out = tmp_path / "spec.toml"
    _one_line(*invoke("init", "--out", out, f"--params={params}"), "--params:")
    assert not out.exists()


PATH_CHARS = {"newline": "\n", "carriage return": "\r", "control": "\x01", "escape": "\x1b[31m", "tab": "\t",
              "U+2028": "\u2028", "U+2029": "\u2029", "U+0085": "\u0085", "quote": '"', "backslash": "\\",
              "hash": "#", "apostrophe": "'", "nul-like": "\x7f"}


@pytest.mark.parametrize("name", sorted(PATH_CHARS))
def test_init_out_with_odd_characters_writes_a_valid_spec(tmp_path, name):
    out = tmp_path / f"a{PATH_CHARS[name]}b.toml"
    code, _, err = invoke("init", "--out", out)
    assert code == 0, err
    text = out.read_text()
    tomllib.loads(text)  # the path went into a comment: it must not end the comment or the file
    assert all(line.startswith("#") or "=" in line or line.startswith("[") or not line.strip()
               for line in text.splitlines()), text[:300]
    assert invoke("validate", out)[0] == 0
    assert len(err.strip().splitlines()) == 1, err  # the note is one line too


@pytest.mark.parametrize("option", ["--intra-node-bandwidth", "--nodes-link", "--gpu", "--name", "--strategy",
                                    "--params"])
@pytest.mark.parametrize("value", ["", " "])
def test_init_empty_values_name_the_option(tmp_path, option, value):
    out = tmp_path / "spec.toml"
    _one_line(*invoke("init", "--out", out, option, value), f"{option}:")
    assert not out.exists()


# -- 6. --layouts auto / strategy = "auto" without a GPU memory ------------------------------------

def _auto_tiny(tmp_path, **cluster) -> str:
    doc = tomllib.loads(TINY.read_text())
    doc = copy.deepcopy(doc)
    doc["parallelism"]["strategy"] = "auto"
    doc["cluster"].update(cluster)
    spec = tmp_path / "tiny-cpu.toml"
    spec.write_text(tomli_w.dumps(doc))
    return spec


@pytest.mark.parametrize("args", [
    ("recommend", TINY, "--layouts", "auto"),
    ("recommend", TINY, "--layouts", "auto", "--json"),
    ("recommend", TINY, "--layouts", "auto", "--budget", "1"),
    ("recommend", TINY, "--layouts", "auto", "--deadline", "1"),
])
def test_layouts_auto_without_gpu_memory_answers(args):
    code, out, err = invoke(*args)
    assert code in (0, 3) and out and "Traceback" not in err, err
    if "--json" in args:
        json.loads(out)


def test_strategy_auto_in_the_spec_without_gpu_memory_answers(tmp_path):
    spec = _auto_tiny(tmp_path)
    (cal,) = sorted((ROOT / "calibrations").glob("tiny-cpu_*.toml"))
    for args in (("recommend", spec, "--calibration", cal), ("recommend", spec, "--calibration", cal, "--json")):
        code, out, err = invoke(*args)
        assert code in (0, 3) and out and "Traceback" not in err, err


@pytest.mark.parametrize("workload", ["llm7b", "llm70b", "rental-ethernet"])
def test_layouts_auto_memory_sentence_compares_the_right_way(workload):
    """'exceeds the 96.0 GB of GPU memory; at 4 GPUs it is 76.5 GB' named a layout the count cannot run."""
    code, out, err = invoke("recommend", WORKLOADS / f"{workload}.toml", "--layouts", "auto")
    assert code in (0, 3), err
    m = re.search(r"exceeds the ([\d,.]+) GB of GPU memory; at [\d,]+ GPUs? it is ([\d,.]+) GB", out)
    if m:
        capacity, footprint = (float(g.replace(",", "")) for g in m.groups())
        assert footprint > capacity, m.group(0)


# -- 7. empty and odd option values ---------------------------------------------------------------

EMPTY_PATHS = [
    ("--out", ("import", "nccl-tests", RENTAL, NCCL_LOG)),
    ("--out", ("import", "torchtitan", RENTAL, NCCL_LOG, "--gpus", "8@1")),
    ("--out", ("calibrate", TINY, "--gpus", "1")),
    ("--out", ("calibrate", TINY, "--collect", ROOT / "tests")),
    ("--out", ("init",)),
    ("--plot", ("predict", LLM7B, "--gpus", "8,16")),
    ("--plot", ("recommend", LLM7B)),
]


@pytest.mark.parametrize("option, args", EMPTY_PATHS, ids=[f"{a[0]}-{o}" for o, a in EMPTY_PATHS])
@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_path_names_its_option(option, args, value):
    _one_line(*invoke(*args, option, value), ".: is a directory", f"empty {option}")


EMPTY_VALUES = [
    ("--time", ("calibrate", LLM7B, "--emit", "slurm", "--gpus", "16@2")),
    ("--partition", ("calibrate", LLM7B, "--emit", "slurm", "--gpus", "16@2")),
    ("--account", ("calibrate", LLM7B, "--emit", "slurm", "--gpus", "16@2")),
    ("--setup", ("calibrate", LLM7B, "--emit", "slurm", "--gpus", "16@2")),
    ("--root", ("calibrate", LLM7B, "--emit", "slurm", "--gpus", "16@2")),
    ("--env", ("calibrate", LLM7B, "--emit", "slurm", "--gpus", "16@2")),
    ("--bucket", ("calibrate", LLM7B, "--emit", "skypilot", "--gpus", "16@2")),
    ("--rdzv-host", ("calibrate", LLM7B, "--emit", "torchrun", "--gpus", "16@2")),
    ("--notes", ("calibrate", TINY, "--collect", ROOT / "tests")),
    ("--gpus", ("predict", LLM7B)),
    ("--tier", ("recommend", LLM7B)),
    ("--tier", ("plan-calibration", LLM7B)),
    ("--target", ("plan-calibration", LLM7B)),
    ("--startup", ("plan-calibration", LLM7B)),
    ("--objective", ("recommend", LLM7B)),
    ("--op", ("import", "nccl-tests", RENTAL, NCCL_LOG)),
    ("--gpus", ("import", "torchtitan", RENTAL, NCCL_LOG)),
]


@pytest.mark.parametrize("option, args", EMPTY_VALUES, ids=[f"{a[0]}-{o}" for o, a in EMPTY_VALUES])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_value_names_its_option(option, args, value):
    _one_line(*invoke(*args, option, value), f"{option}:")


@pytest.mark.parametrize("startup", ["-10 min", "-1", "-0.5 s", "8 days", "1e300 h", "1e400 s"])
def test_plan_calibration_startup_out_of_range(startup):
    _one_line(*invoke("plan-calibration", LLM7B, "--startup", startup), "--startup:")


LIMITS = [("recommend", w, flag, v) for w in (LLM7B, TINY) for flag in ("--budget", "--deadline")
          for v in ("inf", "nan", "1e308", "1e300", "1e13", "-1", "0")]
LIMITS += [("plan-calibration", LLM7B, "--budget", v) for v in ("inf", "nan", "1e308", "1e13", "-1")]


@pytest.mark.parametrize("command, workload, flag, value", LIMITS,
                         ids=[f"{c}-{w.stem}{f}={v}" for c, w, f, v in LIMITS])
def test_budget_and_deadline_out_of_range(command, workload, flag, value):
    code, out, err = invoke(command, workload, flag, value)
    if code == 2 and err.startswith("Usage"):  # typer's own bound (min=0) answers first
        assert flag in err and "Traceback" not in err
        return
    _one_line(code, out, err, f"{flag}:")
    assert "$inf" not in out


@pytest.mark.parametrize("command, flag", [("recommend", "--budget"), ("recommend", "--deadline"),
                                           ("plan-calibration", "--budget")])
def test_large_but_finite_limits_answer_without_warnings(command, flag):
    code, out, err = invoke(command, TINY, flag, "1e11")
    assert code in (0, 2, 3) and "RuntimeWarning" not in err and "Traceback" not in err and "$inf" not in out, err


@pytest.mark.parametrize("name", sorted(PATH_CHARS))
def test_an_error_naming_an_odd_path_is_one_line(tmp_path, name):
    odd = tmp_path / f"a{PATH_CHARS[name]}b"
    for args in (("validate", odd), ("import", "nccl-tests", RENTAL, odd),
                 ("import", "nccl-tests", RENTAL, NCCL_LOG, "--out", odd / "x.toml")):
        code, out, err = invoke(*args)
        assert code == 2 and out == "" and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1 and "\x1b" not in err and "\u2028" not in err, err
