"""Measurement CSV import and N@M placements: good rows, and one-line errors for bad ones."""

from __future__ import annotations

import numpy as np
import pytest
from test_features import LLM7B  # a fixed spec: global batch 1024, 8 GPUs per node

from advisor.errors import InputError
from advisor.measurements import read_measurements_csv
from advisor.placement import parse_placements


def write(tmp_path, text):
    p = tmp_path / "m.csv"
    p.write_text(text)
    return p


def test_csv_rows_become_runs_with_defaults(tmp_path):
    p = write(tmp_path, "# source: a test\ngpus,nodes,step_seconds,throughput,global_batch\n"
                        "8,,20,,\n16,4,,51.2,\n# comment in between\n32,4,15,,2048\n")
    m = read_measurements_csv(p, LLM7B)
    assert list(m.gpus) == [8, 16, 32]
    assert list(m.nodes) == [1, 4, 4]  # default ceil(8/8) = 1
    assert list(m.global_batch) == [1024, 1024, 2048]  # workload's fixed global batch unless given
    assert m.step[1] == pytest.approx(1024 / 51.2)  # throughput -> step seconds
    assert np.isnan(m.comm).all()


BAD = {
    "missing gpus column": ("step_seconds\n1.0\n", "m.csv: line 1: missing required column 'gpus'"),
    "no time column": ("gpus,nodes\n1,1\n", "m.csv: line 1: needs a 'step_seconds' or a 'throughput' column"),
    "unknown column": ("gpus,step_secs\n1,1\n",
                       "m.csv: line 1: unknown column; did you mean 'step_seconds'? (got 'step_secs')"),
    "bad number": ("gpus,step_seconds\n1,fast\n", "m.csv: line 2.step_seconds: must be a number (got 'fast')"),
    "fractional gpus": ("gpus,step_seconds\n1.5,1\n", "m.csv: line 2.gpus: must be a whole number (got '1.5')"),
    "negative time": ("gpus,step_seconds\n2,-1\n", "m.csv: line 2.step_seconds: must be a positive number (got '-1')"),
    "more nodes than gpus": ("gpus,nodes,step_seconds\n2,4,1\n",
                             "m.csv: line 2.nodes: more nodes than GPUs (2) (got 4)"),
    "overfull node": ("gpus,nodes,step_seconds\n16,1,1\n",
                      "m.csv: line 2.nodes: 16 GPUs on 1 node exceed cluster.gpus_per_node (8) (got 1)"),
    "short row": ("gpus,step_seconds\n2\n", "m.csv: line 2: expected 2 fields like the header (got 1)"),
    "header only": ("# nothing\ngpus,step_seconds\n", "m.csv: no data rows after the header"),
}


@pytest.mark.parametrize("name", BAD)
def test_bad_csv_is_one_line_error(tmp_path, name):
    text, expected = BAD[name]
    with pytest.raises(InputError) as err:
        read_measurements_csv(write(tmp_path, text), LLM7B)
    lines = err.value.lines()
    assert len(lines) == 1
    assert lines[0] == str(tmp_path / expected)


def test_placements_default_to_filled_nodes():
    assert parse_placements("16,64,64@16,1", 8) == [(16, 2), (64, 8), (64, 16), (1, 1)]


@pytest.mark.parametrize("text,message", [
    ("16,,4", "expected comma-separated GPU counts"),
    ("x", "expected N or N@M with whole numbers"),
    ("4@8", "more nodes than GPUs"),
    ("64@4", "needs more than 8 GPUs on a node"),
    ("0", "GPU and node counts must be >= 1"),
])
def test_bad_placements(text, message):
    with pytest.raises(InputError) as err:
        parse_placements(text, 8)
    assert message in err.value.lines()[0]
    assert err.value.lines()[0].startswith("--gpus: ")


def test_calibration_compute_steps_give_exposed_communication():
    from advisor.calibration_data import calibration_from_dict
    from advisor.measurements import from_calibration

    cal = calibration_from_dict({
        "schema": 1, "workload": "t", "provenance": {"source": "measured", "created": "2026-11-30T00:00:00Z"},
        "runs": [{"gpus": 2, "step_seconds": [100.0, 120.0, 110.0], "compute_seconds": [90.0, 80.0, 100.0]},
                 {"gpus": 1, "step_seconds": [200.0]}],
    }, "<t>")
    m = from_calibration(cal, LLM7B)
    assert m.runs[0].comm_seconds == pytest.approx([10, 30, 20])  # each step minus the compute median 90
    assert m.runs[1].comm_seconds is None
    assert list(m.global_batch) == [1024, 1024]


def test_spreadsheet_csv_with_bom_is_read(tmp_path):
    p = tmp_path / "m.csv"
    p.write_bytes("\ufeffgpus,step_seconds\r\n8,20\r\n16,11\r\n".encode("utf-8"))  # Excel's "CSV UTF-8"
    m = read_measurements_csv(p, LLM7B)
    assert list(m.gpus) == [8, 16] and list(m.step) == [20.0, 11.0]


def test_throughput_agreeing_with_step_seconds_is_accepted_and_contradicting_refused(tmp_path):
    # global batch 1024: 20 s per step is 51.2 samples/s; 5% off is within the 10% tolerance.
    ok = write(tmp_path, "gpus,step_seconds,throughput\n8,20,53.7\n16,10,102.4\n")
    assert list(read_measurements_csv(ok, LLM7B).step) == [20.0, 10.0]
    bad = write(tmp_path, "gpus,step_seconds,throughput\n8,20,51.2\n16,10,10240\n")
    with pytest.raises(InputError) as err:
        read_measurements_csv(bad, LLM7B)
    assert err.value.lines() == [f"{bad}: line 3.throughput: contradicts step_seconds: 1024 samples / 10 s = 102.4 "
                                 "samples/s (more than 10% apart) (got '10240')"]


def test_fast_and_careful_parsers_agree(tmp_path):
    """numpy's parser (plain rows) and the csv-module path (quoted cells) read the same numbers."""
    from advisor.measurements import read_csv_table

    rows = "".join(f"{g},{(g + 7) // 8},{1 + g / 100:.4f},,{g / 1000}\n" for g in (1, 2, 4, 8, 16, 32))
    plain = write(tmp_path, "gpus,nodes,step_seconds,global_batch,comm_seconds\n" + rows)
    a = read_csv_table(plain).values
    quoted = tmp_path / "q.csv"
    quoted.write_text('"gpus",nodes,step_seconds,global_batch,comm_seconds\n' + rows.replace("1,1,", '"1",1,', 1))
    b = read_csv_table(quoted).values
    for column in a:
        np.testing.assert_array_equal(a[column], b[column])
    assert np.isnan(a["global_batch"]).all() and list(a["gpus"]) == [1, 2, 4, 8, 16, 32]


def test_exact_copy_is_found_among_many_rows(tmp_path):
    rows = "".join(f"{1 + i % 4},{1 + i / 1e5:.6f}\n" for i in range(20000))
    p = write(tmp_path, "gpus,step_seconds\n" + rows + "3,1.000020\n")  # a copy of i = 2 (file line 4)
    with pytest.raises(InputError, match=r"line 20002: repeats line 4 exactly"):
        read_measurements_csv(p, LLM7B)
