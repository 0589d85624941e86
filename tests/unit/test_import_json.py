"""`advisor import ... --json`: one strict JSON document on stdout (no NaN or Infinity), naming the
file written and holding what it now contains; the notes stay on stderr."""

from __future__ import annotations

import json
from pathlib import Path

from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "fixtures" / "nccl-tests" / "h100_2node_gcp_a3mega_all_reduce.log"


def _strict(text: str):
    def refuse(name):
        raise AssertionError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_nccl_tests_import_json_is_strict(tmp_path):
    out = tmp_path / "llm7b_nccl.toml"
    spec = ROOT / "workloads" / "llm7b.toml"
    code, stdout, stderr = invoke("import", "nccl-tests", spec, LOG, "--out", out, "--json")
    assert code == 0, stderr
    doc = _strict(stdout)
    assert doc["file"] == str(out) and doc["tool"] == "nccl-tests" and doc["workload"] == "llm7b"
    assert len(doc["collectives"]) == 31  # the log's 31 message sizes
    assert {r["gpus"] for r in doc["collectives"]} == {16} and {r["nodes"] for r in doc["collectives"]} == {2}
    assert f"wrote {out}" in stderr and "wrote" not in stdout
    assert out.exists()
