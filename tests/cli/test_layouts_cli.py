"""Layouts through the CLI: llm70b's tensor-parallel layout in predict's JSON, counts the degrees
cannot split refused with exit 2, and strategy auto choosing HSDP on rental-ethernet's 100 GbE.

`calibrate` refusing a count (exit 2) runs as a user runs it; the rest in-process."""

from __future__ import annotations

import json
import re

from cli_inprocess import run_in_process
from conftest import WORKLOADS, run_cli


def test_llm70b_predicts_at_1024_and_2048_with_its_layout():
    r = run_in_process("predict", WORKLOADS / "llm70b.toml", "--gpus", "1024,2048", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["predictions"]
    # tp = 8 inside each node; FSDP over the rest (data_parallel_shard_degree = -1)
    assert [row["layout"] for row in rows] == [
        "dp_shard=128, dp_replicate=1, tp=8, pp=1",
        "dp_shard=256, dp_replicate=1, tp=8, pp=1",
    ]
    assert all(row["step_seconds"] > 0 for row in rows)


def test_a_count_the_degrees_cannot_split_exits_2():
    r = run_in_process("predict", WORKLOADS / "llm70b.toml", "--gpus", "12")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("--gpus: the layout cannot split this count") and "(got 12)" in r.stderr


def test_auto_picks_hsdp_across_nodes_on_ethernet_and_says_what_it_beat():
    r = run_in_process("recommend", WORKLOADS / "rental-ethernet.toml", "--layouts", "auto", "--json")
    assert r.returncode in (0, 3), r.stderr
    plans = [p for p in json.loads(r.stdout)["candidates"] if p["tier"] == "on-demand"]
    at = {p["gpus"]: p for p in plans}
    # one node: HSDP with one replica is FSDP; two nodes over one 100 GbE port: HSDP's 2(r-1)/r·G per
    # node beats FSDP's 3(N-1)/N·G (advisor.topology.layouts)
    assert at[8]["strategy"] == "fsdp"
    assert at[16]["strategy"] == "hsdp" and at[16]["layout"] == "dp_shard=8, dp_replicate=2, tp=1, pp=1"
    assert "faster per step than fsdp" in at[16]["layout_why"]


def test_auto_on_llm70b_never_offers_a_layout_that_cannot_hold_the_state():
    r = run_in_process("recommend", WORKLOADS / "llm70b.toml", "--layouts", "auto", "--json")
    assert r.returncode in (0, 3), r.stderr
    doc = json.loads(r.stdout)
    plans = [p for p in doc["candidates"] if p["tier"] == "on-demand"]
    assert plans
    for p in plans:
        assert p["layout"].endswith("tp=8, pp=1")  # --layouts auto keeps the spec's tensor parallelism
        # DDP with TP 8 keeps 16 bytes x 70.6B / 8 = 141 GB of state on every GPU: never in 80 GB
        assert p["strategy"] != "ddp"
        assert p["memory_bytes_per_gpu"] <= 80e9


def test_calibrate_as_a_user_runs_it_refuses_a_count_the_layout_cannot_split_before_starting_ranks(tmp_path):
    text = (WORKLOADS / "tiny-cpu.toml").read_text().replace('strategy = "ddp"',
                                                             'strategy = "fsdp"\ntensor_parallel_degree = 2')
    text = text.replace("gpus = [1, 2, 4]", "gpus = [2, 4]")
    (tmp_path / "tp.toml").write_text(text)
    r = run_cli("calibrate", "tp.toml", "--gpus", "1", "--device", "cpu", "--out", "out.toml", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("--gpus: the parallel layout cannot split 1 GPU over 1 node: tensor x pipeline")
    assert not (tmp_path / "out.toml").exists()


def test_the_rental_ethernet_table_in_the_usage_guide_is_what_recommend_prints():
    """docs/usage.md's `--layouts auto` table on rental-ethernet: layout, step seconds and speedup per count."""
    from conftest import ROOT

    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| (\w+): (dp_shard=\d+, dp_replicate=\d+) \| ([\d.]+) \| ([\d.]+)x \|", text, re.M)
    assert len(rows) == 4, "the table moved or changed shape"
    r = run_in_process("recommend", WORKLOADS / "rental-ethernet.toml", "--layouts", "auto", "--json")
    plans = {p["gpus"]: p for p in json.loads(r.stdout)["candidates"] if p["tier"] == "on-demand"}
    for gpus, strategy, layout, step, speedup in rows:
        p = plans[int(gpus)]
        assert (p["strategy"], p["layout"].startswith(layout + ",")) == (strategy, True), gpus
        assert (f"{p['step_seconds']:.2f}", f"{p['speedup']:.2f}") == (step, speedup), gpus


def _sig(x: float) -> str:
    """x as the worked example prints it: three significant figures."""
    return f"{x:.3g}"


def test_usage_worked_example_8_to_16_is_what_predict_says():
    """docs/usage.md's "is 8 → 16 GPUs worth it?" table: step, its 90% interval, speedup, efficiency
    and MFU per workload and count, as `predict --json` gives them now (the table went stale once)."""
    from conftest import ROOT

    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (llm7b|rental-ethernet) \| (\d+) \| (\d+) \| ([\d.]+) \(([\d.]+)–([\d.]+)\) \| "
                      r"([\d.]+)x \| (\d+)% \| ([\d.]+)% \|$", text, re.M)
    assert len(rows) == 4, "the table moved or changed shape"
    for name in ("llm7b", "rental-ethernet"):
        r = run_in_process("predict", WORKLOADS / f"{name}.toml", "--gpus", "8,16", "--json")
        assert r.returncode == 0, r.stderr
        got = {p["gpus"]: p for p in json.loads(r.stdout)["predictions"]}
        for _, gpus, nodes, step, lo, hi, speedup, eff, mfu in (row for row in rows if row[0] == name):
            p = got[int(gpus)]
            assert (p["nodes"], _sig(p["step_seconds"]), _sig(p["step_seconds_low"]), _sig(p["step_seconds_high"]),
                    f"{p['speedup']:.2f}", f"{p['efficiency']:.0%}", f"{p['mfu']:.1%}") == (
                int(nodes), _sig(float(step)), _sig(float(lo)), _sig(float(hi)), speedup, eff + "%", mfu + "%"
            ), (name, gpus)
