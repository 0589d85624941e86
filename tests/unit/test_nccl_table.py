"""Calibration probes in nccl-tests' columns: values recomputed here from the raw file (tomllib) with
nccl-tests' formulas (doc/PERFORMANCE.md), not read back from the code under test."""

from __future__ import annotations

import io
import json
import tomllib
from contextlib import redirect_stdout

import pytest

from conftest import ROOT

CAL = ROOT / "calibrations" / "tiny-cpu_cpu_2026-11-30.toml"
FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
          "all_gather": lambda n: (n - 1) / n}


def _load():
    from advisor.calibration_data import load_calibration
    from advisor.spec import load_workload

    return load_workload(ROOT / "workloads" / "tiny-cpu.toml"), load_calibration(CAL)


def test_probe_text_has_nccl_tests_columns_and_values():
    from advisor.cli.nccl_table import probe_text

    _, cal = _load()
    raw = tomllib.loads(CAL.read_text())["collectives"]
    lines = probe_text(cal).splitlines()
    assert lines[1].split()[1:] == ["size", "count", "type", "redop", "root", "time", "algbw", "busbw"]
    blocks = [line for line in lines if line.startswith("# ") and "_perf equivalent" in line]
    assert len(blocks) == len({(c["op"], c["gpus"], c.get("nodes", 1)) for c in raw})
    rows = [line.split() for line in lines if not line.startswith("#")]
    assert len(rows) == len(raw)
    for op in FACTOR:  # each block names its op; rows follow it
        assert any(b.startswith(f"# {op}_perf equivalent") for b in blocks)
    by_size_op = {}
    op = gpus = None
    for line in lines:
        if "_perf equivalent" in line:
            op = line.split()[1].removesuffix("_perf")
            gpus = int(line.split(": ")[1].split()[0])
        elif not line.startswith("#"):
            by_size_op[(op, gpus, int(line.split()[0]))] = line.split()
    for c in raw:
        _, count, dtype, redop, root, time_us, algbw, busbw = by_size_op[(c["op"], c["gpus"], c["bytes"])]
        assert int(count) == c["bytes"] // 4 and dtype == "float"  # advisor probes float32 buffers
        assert redop == ("none" if c["op"] == "all_gather" else "sum") and root == "-1"
        assert float(time_us) == pytest.approx(c["seconds"] * 1e6, abs=0.06)
        assert float(algbw) == pytest.approx(c["bytes"] / c["seconds"] / 1e9, abs=0.006, rel=1e-3)
        assert float(busbw) == pytest.approx(c["bytes"] / c["seconds"] / 1e9 * FACTOR[c["op"]](c["gpus"]),
                                             abs=0.006, rel=1e-3)


def test_summary_names_the_op_of_each_busbw_and_json_is_one_document():
    from advisor.calibrate import summary
    from advisor.cli import output
    from advisor.cli.nccl_table import print_calibration

    w, cal = _load()
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        output.configure()
        print_calibration(w, cal, CAL, summary(cal, w))
    text = buffer.getvalue()
    for op in ("all_reduce", "reduce_scatter", "all_gather"):
        assert f"{op} busbw GB/s" in text
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        output.configure(json=True)
        print_calibration(w, cal, CAL, summary(cal, w))
    output.configure()
    doc = json.loads(buffer.getvalue())
    assert [r["gpus"] for r in doc["runs"]] == [1, 2, 4]
    assert doc["runs"][0]["busbw"]["all_reduce"] is None  # one rank: nothing to reduce
    assert set(doc["runs"][1]["busbw"]) == {"all_reduce", "reduce_scatter", "all_gather"}
    assert len(doc["collectives"]) == len(tomllib.loads(CAL.read_text())["collectives"])
