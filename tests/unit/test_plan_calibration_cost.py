"""`advisor plan-calibration` prices the runs `advisor calibrate` really makes (issue 21): the proxy's
layers, warm-up + timed steps (each twice), and the batch the worker splits (capped accumulation).

Expected values are worked out here from the spec's numbers and the scaling model's own prediction
for the declared model (`advisor predict`'s breakdown), not read back from the planner."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
LLM70B = ROOT / "workloads" / "llm70b.toml"
LLM7B = ROOT / "workloads" / "llm7b.toml"

#: llm70b.toml: Llama-3.1-70B, calibrated on a 1-layer proxy
PARAMS, LAYERS, HIDDEN, SEQ, VOCAB = 70.6e9, 80, 8192, 8192, 128256
GLOBAL, MICRO, TP = 512, 16, 8
WARMUP, STEPS = 3, 10  # the [calibration] defaults
STARTUP = 600.0  # --startup default, 10 min


def _plan(*args):
    code, out, err = invoke("plan-calibration", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def _run(plan, gpus):
    return next(r for r in plan["runs"] if r["gpus"] == gpus)


def _proxy_params(layers, hidden, seq, vocab):
    # the proxy GPT the worker builds: token + position embeddings, blocks of 12·h² + 13·h, final norm, head tied
    return vocab * hidden + seq * hidden + layers * (12 * hidden**2 + 13 * hidden) + 2 * hidden


def _flops_per_token(params, layers, hidden, seq):
    return 6 * params + 12 * layers * hidden * seq  # PaLM App. B, as the model counts a transformer


def _breakdown(spec, gpus, batch):
    """predict's breakdown of the declared model's step at (gpus, one node, batch), and the step."""
    from advisor.scaling import build_model
    from advisor.spec import load_workload

    p = build_model(load_workload(spec), n_bootstrap=5).predict([gpus], [1], [batch])
    return {k: float(v[0]) for k, v in p.breakdown.items()}, float(p.step_seconds[0])


def _between(priced, scaled, overhead):
    """The priced step is the scaled terms plus some of the overhead part: its per-step constants stay
    whole on the proxy, its contention and small-batch terms shrink with the compute (breakdown.py),
    so the proxy's overhead is between none and all of the declared model's (1% for rounding)."""
    assert 0.99 * scaled <= priced <= 1.01 * (scaled + overhead)


def test_llm70b_8_gpus_is_priced_as_its_one_layer_proxy_for_13_step_pairs():
    """Before: the full 80-layer model's 1,097 s step, 8.09 h and $171 for 8 GPUs. The proxy does
    1/40 of the FLOPs per token (its tied embedding and head stay at any depth) and 1/80 of the
    tensor-parallel traffic (per layer); at 8 GPUs one TP group runs all 512 samples, 32
    micro-batches of 16 (no cut), and nothing crosses data-parallel ranks."""
    plan = _plan(LLM70B)
    run = _run(plan, 8)
    assert run["global_batch"] == GLOBAL and run["micro_batches"] == GLOBAL // MICRO  # 32: under the cap
    terms, full = _breakdown(LLM70B, 8, GLOBAL)
    share = (_flops_per_token(_proxy_params(1, HIDDEN, SEQ, VOCAB), 1, HIDDEN, SEQ)
             / _flops_per_token(PARAMS, LAYERS, HIDDEN, SEQ))
    assert share == pytest.approx(0.0253, abs=1e-4)
    scaled = ((terms["compute"] + terms["recompute"]) * share  # full recomputation: a third of the FLOPs
              + (terms["intra_node_comm"] + terms["inter_node_comm"]) / LAYERS)  # TP all-reduces: per layer
    _between(run["step_seconds"], scaled, terms["overhead"])
    assert run["step_seconds"] < full / 30  # not the declared model's step
    hours = (STARTUP + 2 * (WARMUP + STEPS) * run["step_seconds"]) / 3600
    assert run["hours"] == pytest.approx(hours, rel=1e-9)
    assert run["hours"] < 0.5
    assert run["usd"] == pytest.approx(8 * hours * 2.64, rel=1e-9)


def test_llm70b_16_and_32_gpus_keep_the_full_batch_and_are_priced_so():
    plan = _plan(LLM70B)
    for gpus, micros in ((16, 16), (32, 8)):  # 512 / (gpus / TP) per rank, in micro-batches of 16
        run = _run(plan, gpus)
        assert (run["global_batch"], run["micro_batches"]) == (GLOBAL, micros)
        assert run["hours"] == pytest.approx((STARTUP + 26 * run["step_seconds"]) / 3600, rel=1e-9)
    assert plan["proxy_layers"] == 1 and plan["model_layers"] == LAYERS


def _llm13b(tmp_path, **calibration):
    """A 13B job at a 1,024-sample global batch in micro-batches of 2, calibrated on a 2-layer proxy
    (llm7b.toml reshaped, as test_design's)."""
    text = LLM7B.read_text()
    for old, new in (('name = "llm7b"', 'name = "llm13b"'), ('params = "8.0B"', 'params = "13B"'),
                     ("layers = 32", "layers = 40"), ("hidden = 4096", "hidden = 5120"), ("heads = 32", "heads = 40"),
                     ("seq_len = 8192", "seq_len = 4096")):
        text = text.replace(old, new)
    text = re.sub(r'(?m)^policy = "fixed-per-gpu".*$', 'policy = "fixed-global"\nglobal_samples = 1024', text)
    text = re.sub(r"(?m)^per_gpu_samples.*$", "", text)
    for key, value in calibration.items():
        text = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
    spec = tmp_path / "llm13b.toml"
    spec.write_text(text)
    return spec


def test_a_13b_job_on_one_gpu_runs_32_micro_batches_not_its_1024_sample_batch(tmp_path):
    """Before: the full batch on one GPU (512 micro-batches of 2), priced at hours and left out. The
    worker now accumulates at most 32 micro-batches: 64 samples, priced at that batch on the proxy."""
    spec = _llm13b(tmp_path)
    plan = _plan(spec)
    run = _run(plan, 1)
    assert (run["global_batch"], run["micro_batches"]) == (32 * 2, 32)
    assert (1, 1) not in {(s["gpus"], s["nodes"]) for s in plan["skipped"]}
    # by hand: 2 of 40 layers; FSDP on one GPU moves nothing; selective recomputation repeats the
    # attention core, 4·L·h·T per token, so it scales with the layers alone
    terms, _ = _breakdown(spec, 1, 64)
    h, t = 5120, 4096
    share = _flops_per_token(_proxy_params(2, h, t, VOCAB), 2, h, t) / _flops_per_token(13e9, 40, h, t)
    _between(run["step_seconds"], terms["compute"] * share + terms["recompute"] * 2 / 40, terms["overhead"])
    assert run["hours"] == pytest.approx((STARTUP + 26 * run["step_seconds"]) / 3600, rel=1e-9)
    assert run["hours"] < 0.5


def test_worker_and_planner_run_the_same_batch(tmp_path, monkeypatch):
    """The worker's Rank (its process group stubbed: only the split is read) trains, at each planned
    count, the batch the plan priced, and the result it writes is read back with that batch for the fit."""
    pytest.importorskip("torch")
    import advisor.calibrate.rendezvous as rendezvous
    from advisor.calibrate import worker
    from advisor.calibrate.results import run_from_result
    from advisor.spec import load_workload

    spec = _llm13b(tmp_path)
    plan = _plan(spec)
    monkeypatch.setattr(rendezvous, "init_process_group", lambda *a, **k: None)
    w = load_workload(spec)
    for run in plan["runs"]:
        monkeypatch.setenv("RANK", "0")
        monkeypatch.setenv("WORLD_SIZE", str(run["gpus"]))
        monkeypatch.setenv("LOCAL_RANK", "0")
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(min(run["gpus"], 8)))
        args = worker.parse_args(["--workload", str(spec), "--results", str(tmp_path / "r"), "--device", "cpu",
                                  "--steps", "1", "--warmup", "0"])
        rank = worker.Rank(args)
        assert rank.plan.global_batch == run["global_batch"]
        assert len(rank.plan.micro_batches) == run["micro_batches"]
        recorded, _ = run_from_result(w, {"gpus": run["gpus"], "nodes": run["nodes"], "step_seconds": [1.0],
                                          "global_batch": rank.plan.global_batch})
        assert (recorded.global_batch or w.global_batch(run["gpus"])) == run["global_batch"]
    # by hand: 1,024 / N per GPU, at most 32 micro-batches of 2 (64 samples) per rank
    assert {r["gpus"]: r["global_batch"] for r in plan["runs"]} == {
        r["gpus"]: min(1024 // r["gpus"], 64) * r["gpus"] for r in plan["runs"]}


def test_a_count_whose_one_micro_batch_runs_for_hours_is_still_left_out(tmp_path):
    """No micro_samples: the whole share is one micro-batch, which no cap shortens; on 8 of 40
    layers one GPU's 1,024 samples take hours, so 1 GPU is left out while 3 node counts remain."""
    from advisor.calibrate.design import MAX_RUN_SECONDS

    spec = _llm13b(tmp_path, proxy_layers=8)
    spec.write_text(re.sub(r"(?m)^micro_samples.*$", "", spec.read_text()))
    plan = _plan(spec)
    assert (1, 1) in {(s["gpus"], s["nodes"]) for s in plan["skipped"]}
    for r in plan["runs"]:
        assert 2 * 13 * r["step_seconds"] <= MAX_RUN_SECONDS
    assert len({r["nodes"] for r in plan["runs"]}) >= 3


@pytest.mark.parametrize("value, text", [(0.49, "0.49"), (9.994, "9.99"), (10.4, "10"), (1234.5, "1,234")])
def test_money_has_cents_under_ten_dollars(value, text):
    from advisor.cli.plan_calibration import usd

    assert usd(value) == text


def test_a_refused_budget_names_the_cheapest_plan_in_cents_under_ten_dollars():
    """With no start-up llm7b's 2-layer proxy makes the cheapest identifying plan cost cents: printed
    so, not as "$0"."""
    code, out, err = invoke("plan-calibration", LLM7B, "--budget", "0.01", "--startup", "0 s")
    assert code == 2 and out == ""
    cost = re.search(r"costs \$([\d,.]+)", err).group(1)
    assert float(cost) < 10 and re.fullmatch(r"\d\.\d\d", cost)


def _tiny(**batch):
    import tomllib

    from advisor.spec import workload_from_dict

    data = tomllib.loads((ROOT / "workloads" / "tiny-cpu.toml").read_text())
    data["batch"] = batch
    return workload_from_dict(data)


@pytest.mark.parametrize("gpus, per_gpu, micros", [
    (1, 128, 32),   # 1,024 on one rank: cut to 32 micro-batches of 4
    (4, 128, 32),   # 256 per rank: cut
    (8, 128, 32),   # 128 per rank: exactly 32, nothing cut
    (16, 64, 16),   # under the cap: the policy's share
])
def test_fixed_global_accumulation_is_capped_at_32_micro_batches(gpus, per_gpu, micros):
    from advisor.calibrate.plan import batch_plan

    plan = batch_plan(_tiny(policy="fixed-global", global_samples=1024, micro_samples=4), gpus)
    assert (plan.per_gpu, len(plan.micro_batches), plan.global_batch) == (per_gpu, micros, per_gpu * gpus)
    assert set(plan.micro_batches) == {4} and plan.capped == (1024 // gpus > per_gpu)


def test_fixed_per_gpu_keeps_the_jobs_own_accumulation():
    from advisor.calibrate.plan import batch_plan

    plan = batch_plan(_tiny(policy="fixed-per-gpu", per_gpu_samples=256, micro_samples=4), 1)
    assert (plan.per_gpu, len(plan.micro_batches), plan.capped) == (256, 64, False)
