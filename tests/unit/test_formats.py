"""docs/formats.md: every example block parses with the real readers, and the documented JSON
fields exist in the real outputs (fields marked † are being added elsewhere and may be absent)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC, flags=re.S | re.M)


def pending() -> set[str]:
    return set(re.findall(r"`?(\w+)`?†", DOC))


def test_spec_and_calibration_examples_load(tmp_path):
    from advisor.calibration_data import calibration_from_dict
    from advisor.spec import load_workload

    *specs, cal = sorted(blocks("toml"), key=lambda b: "schema = 1" in b)
    loaded = []
    for i, spec in enumerate(specs):  # the smallest useful spec, then the mixture-of-experts one
        (tmp_path / f"example{i}.toml").write_text(spec)
        loaded.append(load_workload(tmp_path / f"example{i}.toml"))
    w = loaded[0]
    assert len(loaded) == 2 and loaded[1].model.active_params < loaded[1].model.params
    c = calibration_from_dict(tomllib.loads(cal), "formats.md", w.name)
    assert len(c.runs) == 1 and c.collectives[0].nodes == 2


def test_csv_example_reads(tmp_path):
    from advisor.measurements import read_measurements_csv
    from advisor.spec import load_workload

    (csv_text,) = blocks("csv")
    path = tmp_path / "m.csv"
    path.write_text(csv_text)
    m = read_measurements_csv(path, load_workload(ROOT / "workloads" / "llm7b.toml"))
    assert [r.median_step for r in m.runs] == [2.84346]


def test_log_examples_parse_as_documented(tmp_path):
    from advisor.imports.nccl_tests import read_nccl_tests
    from advisor.imports.torchtitan import read_torchtitan

    nccl, titan = blocks("text")
    (tmp_path / "log.txt").write_text(nccl)
    ((table, op),) = read_nccl_tests(tmp_path / "log.txt")
    assert (op, table.gpus, len(table.hosts)) == ("all_reduce", 16, 2)
    (row,) = table.rows
    assert (row.bytes, row.seconds, row.busbw) == (10737418240, 0.104989, 191.76)
    fixture = (ROOT / "tests" / "fixtures" / "nccl-tests" / "a100_2node_oci_all_reduce.log").read_text()
    assert nccl.splitlines()[-3].strip() in fixture  # the example is the checked-in real log
    (tmp_path / "titan.log").write_text(titan)
    assert [(s, t) for s, t, _, _ in read_torchtitan(tmp_path / "titan.log")] == [(10, 34574.0)]


def _keys(example: dict, actual: dict, skip: set[str]) -> None:
    missing = {k for k in example if k not in actual} - skip
    assert not missing, missing


def _json(*args) -> dict:
    code, out, err = invoke(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_predict_json_fields_exist():
    doc = json.loads(blocks("json")[0])
    actual = _json("predict", ROOT / "workloads" / "llm7b.toml", "--gpus", "16")
    _keys(doc, actual, set())
    _keys(doc["model"], actual["model"], pending())
    _keys(doc["predictions"][0], actual["predictions"][0], pending())


def test_plan_calibration_json_fields_match():
    doc = json.loads(blocks("json")[1])
    actual = _json("plan-calibration", ROOT / "workloads" / "llm7b.toml", "--budget", "300")
    assert set(doc) == set(actual) and set(doc["runs"][0]) == set(actual["runs"][0])


@pytest.mark.parametrize("command, fields", [
    (("fit", "workloads/llm7b.toml"), ["workload", "baseline_gpus", "model", "residuals", "warnings"]),
    (("backtest", "workloads/bert-large.toml", "--calibration", "calibrations/bert-large_published_nvidia_dle.toml",
      "--fit-max-gpus", "16"), ["workload", "fit_max_gpus", "model", "points", "mape", "naive_linear_mape", "coverage",
                                "warnings"]),
    (("recommend", "workloads/llm7b.toml", "--budget", "20000"), ["recommendations", "candidates", "workloads"]),
])
def test_other_json_top_level_fields_are_documented(command, fields):
    code, out, err = invoke(*[str(ROOT / c) if c.endswith(".toml") else c for c in command], "--json")
    assert code in (0, 3), err
    actual = json.loads(out)
    assert set(fields) <= set(actual)
    for f in fields:
        assert f"`{f}`" in DOC
