"""predict and recommend agree on what can run (advisor.planning.runnable): counts whose footprint
does not fit, or whose batch the layout cannot split, are flagged with the reason; the speedup
baseline is the smallest count that runs, the same in both commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.planning import runnable
from advisor.planning.recommend import recommend
from advisor.scaling.model import build_model
from advisor.spec import load_workload
from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]


def _predict(*args):
    code, out, err = invoke("predict", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_llm7b_flags_1_and_4_gpus_as_not_fitting():
    """The bar. By hand: 6.7B parameters x 16 bytes of state = 107 GB on one GPU, and a 4-way FSDP
    split still holds a quarter of it plus activations and the measured peak: above 96 GB."""
    doc = _predict("workloads/llm7b.toml", "--gpus", "1,4,8,16")
    rows = {r["gpus"]: r for r in doc["predictions"]}
    assert doc["baseline_gpus"] >= 8
    for g in (1, 4):
        assert rows[g]["fits_memory"] is False and rows[g]["runs"] is False
        assert rows[g]["left_out"].startswith("the footprint per GPU")
        assert rows[g]["memory_bytes"] > 96e9 and rows[g]["speedup"] is None and rows[g]["efficiency"] is None
    assert 6.7e9 * 16 > 96e9
    for g in (8, 16):
        assert rows[g]["runs"] is True and rows[g]["left_out"] is None and rows[g]["memory_bytes"] <= 96e9
    assert rows[8]["speedup"] == pytest.approx(1.0)
    assert rows[16]["efficiency"] == pytest.approx(rows[16]["speedup"] * 8 / 16)


def test_llm70b_baseline_fits_and_matches_recommend():
    doc = _predict("workloads/llm70b.toml", "--gpus", "64,256")
    base = doc["baseline_gpus"]
    w = load_workload("workloads/llm70b.toml")
    m = build_model(w)
    check = runnable.of(w, [base], None, m.peaks)
    assert check.ok[0] and check.memory_bytes[0] <= 80e9  # H100-SXM: 80 GB in the catalog
    assert recommend(w, m).sweep.baseline_gpus == base
    for r in doc["predictions"]:
        assert r["runs"] and r["efficiency"] <= 1.0 + 1e-9  # no super-linear 106-112% against an impossible 1 GPU


def test_uneven_fixed_global_batch_is_flagged_like_recommend():
    """llm70b: 512 sequences over 24 GPUs at TP 8 is 3 data-parallel ranks, 170.67 each: recommend
    leaves 24 out (fits_batch False), predict flags it with that arithmetic."""
    w = load_workload("workloads/llm70b.toml")
    run = runnable.of(w, [24, 32], None, ())
    assert not run.even[0] and run.even[1]
    assert run.reason(0) == ("the fixed global batch of 512 samples does not divide over 3 data-parallel ranks "
                             "(171 each)")
    m = build_model(w)
    sw = recommend(w, m).sweep
    assert bool(sw.fits_batch[list(sw.gpus).index(24)]) is False


def test_layout_cause_is_named_for_counts_tp_cannot_split():
    w = load_workload("workloads/llm70b.toml")
    run = runnable.of(w, [4, 8], None, ())
    assert run.cause(0) == runnable.LAYOUT and "tensor x pipeline x context degrees 8" in run.reason(0)
    assert run.cause(1) != runnable.LAYOUT


def test_predict_table_names_left_out_counts():
    code, out, _ = invoke("predict", "workloads/llm7b.toml", "--gpus", "4,8")
    assert code == 0
    text = " ".join(out.split())
    assert "Left out 4 GPUs (1 node): the footprint per GPU" in text and "exceeds the 96.0 GB of GPU memory" in text


def test_figures_mark_only_counts_that_run():
    from advisor.cli.model import _only

    m = build_model(load_workload("workloads/llm7b.toml"))
    p = m.predict([4, 8, 16])
    kept = _only(p, [False, True, True])
    assert kept.gpus.tolist() == [8, 16] and kept.throughput.tolist() == p.throughput[1:].tolist()
    assert _only(p, [False, False, False]) is p


def test_a_layout_no_count_holds_is_answered_with_every_count_marked(tmp_path):
    """DDP with tensor parallelism 8 on Llama-70B: each GPU holds 70.6B / 8 parameters x 16 bytes of
    state = 141 GB > 80 GB at every count, by hand. predict answers (exit 0) with each default count
    marked as not running for memory, against a baseline the layout splits (8 GPUs, not 1); an
    explicit count the layout cannot split is one line naming --gpus and the expert-free rule."""
    text = (ROOT / "workloads" / "llm70b.toml").read_text()
    text = text.replace('strategy = "fsdp"', 'strategy = "ddp"').replace("data_parallel_shard_degree = -1\n", "")
    spec = tmp_path / "w.toml"
    spec.write_text(text)
    assert 70.6e9 / 8 * 16 > 80e9
    doc = _predict(spec)
    assert doc["baseline_gpus"] == 8
    rows = doc["predictions"]
    assert rows and all(r["runs"] is False and r["left_out"].startswith("the footprint per GPU") for r in rows)
    assert [r["gpus"] for r in rows][:3] == [8, 16, 32]
    code, out, err = invoke("predict", spec, "--gpus", "4")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("--gpus:") and "degrees 8" in err and "expert" not in err


def test_a_count_the_expert_degree_cannot_split_says_so():
    """The Mixtral-like fixture: 8 experts over an expert degree of 8 carved from the data-parallel
    ranks; 4 GPUs give 4 ranks, which 8 does not divide: the reason names the expert degree."""
    code, out, err = invoke("predict", ROOT / "tests" / "fixtures" / "moe" / "mixtral.toml", "--gpus", "4")
    assert code == 2 and out == ""
    assert "the expert degree 8 must divide the data-parallel ranks" in err and err.rstrip().endswith("(got 4)")
