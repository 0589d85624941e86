"""Bad-input corpus for every command that reads data: each case exits 2 with one line naming
file and field or row, no traceback, nothing on stdout. Cases run through the real CLI."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_inprocess import invoke
from conftest import ROOT, WORKLOADS, run_cli

TINY = WORKLOADS / "tiny-cpu.toml"
LLM7B = WORKLOADS / "llm7b.toml"
TORCHTITAN = (ROOT / "calibrations" / "llm7b_published_torchtitan.toml").read_text()

CSV_CASES = {
    "missing columns": ("gpus,foo\n1,0.5\n2,0.6\n",
                        "data.csv: line 1: unknown column; known columns: gpus, nodes, step_seconds, throughput, "
                        "global_batch, comm_seconds, memory_bound (got 'foo')"),
    "no step column": ("gpus,nodes\n1,1\n2,1\n", "data.csv: line 1: needs a 'step_seconds' or a 'throughput' column"),
    "non-numeric cell": ("gpus,step_seconds\n1,abc\n2,0.6\n",
                         "data.csv: line 2.step_seconds: must be a number (got 'abc')"),
    "nan cell": ("gpus,step_seconds\n1,nan\n2,0.6\n",
                 "data.csv: line 2.step_seconds: must be a positive number (got 'nan')"),
    "negative cell": ("gpus,step_seconds\n1,-1\n2,0.6\n",
                      "data.csv: line 2.step_seconds: must be a positive number (got '-1')"),
    "fractional gpus": ("gpus,step_seconds\n1.5,0.5\n2,0.6\n",
                        "data.csv: line 2.gpus: must be a whole number (got '1.5')"),
    "ragged row": ("gpus,step_seconds\n1,0.5,9\n2,0.6\n",
                   "data.csv: line 2: expected 2 fields like the header (got 3)"),
    "duplicate row": ("gpus,step_seconds\n1,0.5\n2,0.3\n1,0.5\n",
                      "data.csv: line 4: repeats line 2 exactly; remove the copy "
                      "(rows of one placement with different values count as repeated measurements)"),
    "empty file": ("", "data.csv: no header row (expected columns: gpus, step_seconds or throughput, ...)"),
    "header only": ("gpus,step_seconds\n", "data.csv: no data rows after the header"),
    "more nodes than gpus": ("gpus,nodes,step_seconds\n1,2,0.5\n2,1,0.6\n",
                             "data.csv: line 2.nodes: more nodes than GPUs (1) (got 2)"),
}


CAL_CASES = {
    "truncated": (TORCHTITAN[:300], "cal.toml: end of file: malformed TOML: Unterminated string"),
    "other schema version": (TORCHTITAN.replace("schema = 1", "schema = 7", 1),
                             "cal.toml: schema: unsupported calibration schema; this advisor reads schema 1 (got 7)"),
    "another workload": (TORCHTITAN.replace('workload = "llm7b"', 'workload = "tiny-cpu"', 1),
                         "cal.toml: workload: calibration is for another workload, not 'llm7b' (got 'tiny-cpu')"),
    "negative step": (TORCHTITAN.replace("step_seconds = [", "step_seconds = [ -1.0, ", 1),
                      "cal.toml: runs[0].step_seconds[0]: must be >= 1e-09 (got -1.0)"),
    "unknown key": (TORCHTITAN.replace("[provenance]", "[provenance]\nsourse = 1", 1),
                    "cal.toml: provenance.sourse: unknown key; did you mean 'source'? (got 1)"),
}


DATA_CASES = [(cmd, TINY, "--measurements", "data.csv", *CSV_CASES[case]) for cmd in ("fit", "predict", "recommend")
              for case in sorted(CSV_CASES)]
DATA_CASES += [(cmd, LLM7B, "--calibration", "cal.toml", *CAL_CASES[case]) for cmd in ("fit", "predict")
               for case in sorted(CAL_CASES)]


@pytest.mark.parametrize("command, workload, option, name, text, expected", DATA_CASES)
def test_bad_data_file(tmp_path, command, workload, option, name, text, expected):
    """A bad measurement CSV or calibration file: exit 2, the exact line, nothing on stdout."""
    path = tmp_path / name
    path.write_text(text)
    code, out, err = invoke(command, workload, option, path)
    assert (code, out, err.strip()) == (2, "", expected.replace(name, str(path)))


def test_bad_calibration_through_a_subprocess(tmp_path):
    """One case end to end in a real process: exit status, one line, no traceback."""
    (tmp_path / "cal.toml").write_text(TORCHTITAN[:300])
    r = run_cli("predict", LLM7B, "--calibration", "cal.toml", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr.strip()) == (
        2, "", "cal.toml: end of file: malformed TOML: Unterminated string")


@pytest.mark.parametrize("args, expected", [
    (["predict", LLM7B, "--gpus", "0"], "--gpus: GPU and node counts must be >= 1 (got '0')"),
    (["predict", LLM7B, "--gpus", "8@0"], "--gpus: GPU and node counts must be >= 1 (got '8@0')"),
    (["recommend", LLM7B, "--budget", "-5"], "--budget: must be a positive number (got -5.0)"),
    (["recommend", LLM7B, "--budget", "nan"],
     "--budget: expected an amount in USD like '20000', '20k', '$20,000' or '1.5M USD' (got 'nan')"),
    (["fit", LLM7B, "--model", "magic"], None),
])
def test_bad_options(args, expected):
    code, out, err = invoke(*args)
    assert code == 2 and out == ""
    if expected:
        assert err.strip() == expected


cells = st.one_of(st.integers(-3, 70).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                  st.sampled_from(["", "abc", "1e400", "nan", "0", "1@2", " 3 "]), st.text(max_size=6))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.lists(st.sampled_from(["gpus", "nodes", "step_seconds",
                                        "throughput", "global_batch", "comm_seconds", "x"]),
                       min_size=0, max_size=4),
       rows=st.lists(st.lists(cells, min_size=0, max_size=5), max_size=5))
def test_any_csv_exits_0_or_2(tmp_path, header, rows):
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    path = tmp_path / "data.csv"
    path.write_text(buf.getvalue())
    code, _out, err = invoke("fit", TINY, "--measurements", path, "--json")
    assert code in (0, 2), err
    if code == 2:
        assert err.strip() and all(line.startswith(str(path)) for line in err.strip().splitlines()), err


def test_calibrate_without_torch_says_how_to_install(tmp_path):
    """A planner's install has no torch: calibrate refuses up front (exit 2), writes nothing."""
    import subprocess
    import sys

    code = ("import importlib.util, sys\n"
            "real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda name, *a: None if name == 'torch' else real(name, *a)\n"
            "from advisor.cli import main\n"
            f"main(['calibrate', {str(TINY)!r}, '--gpus', '1', '--device', 'cpu', '--out', 'x.toml'])\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "needs torch, which is not installed: pip install -e '.[calibrate]'" in r.stderr
    assert not (tmp_path / "x.toml").exists()
