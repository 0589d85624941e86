"""advisor's first estimate (the prior, no measurement) on eleven published LLM runs, beside an analytic peer.

    python benchmarks/peers.py                       # advisor's prior on the eleven runs
    python benchmarks/peers.py --calculon PATH       # also Calculon (Isaev et al., SC'23), from a checkout
    python benchmarks/peers.py --json

The cases (../shared/data/published, read at run time; nothing tuned to them): six rows of
Megatron-LM SC21 Table 1 (Narayanan et al. 2021, weak scaling on 32-3,072 A100-80GB of Selene,
8x200 Gbit/s HDR per node; the step time follows from the table's TFLOP/s per GPU and the paper's
FLOPs formula 96·B·s·l·h²·(1 + s/6h + V/16lh), which counts full recomputation), and five MLPerf
Training H100 rows (NVIDIA's NeMo submissions, GPT-3 175B v3.0/v3.1 and Llama-3.1-405B v5.0, median
step time from the result logs; 8x400 Gbit/s NDR per node). Both are NVSwitch nodes on InfiniBand
(`intra_node_link = "nvlink"`, `inter_node_link = "infiniband"`). Each case is declared with its published
recipe: degrees, micro-batch, schedule, recomputation, precision (FP8 for MLPerf: Transformer Engine),
sequence parallelism, the distributed optimizer, the overlap switches (MLPerf configs: SEQ_PARALLEL,
TP_COMM_OVERLAP, FP8, distributed optimizer with overlapped gradient reduce and parameter gather;
Megatron SC21: fp16, full recomputation, no sequence parallelism, which came in 2022; Table 1's
micro-batch, interleaving, DDP implementation and gradient dtype from the scripts that produced it,
`MEGATRON_RECIPE`). Where a source does not give a field, the spec default is used.

Printed per case: published and predicted step seconds, the error, whether the published step lies
inside the 90% interval, the interval's high/low; then the mean absolute error, the count within 25%,
the count inside, the median high/low. Calculon runs only with a checkout path (its source is public;
none of it is copied here); without one the script says it skipped it.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PUBLISHED = ROOT.parent / "shared" / "data" / "published"
if not PUBLISHED.is_dir():
    PUBLISHED = Path("/work/shared/data/published")

#: Megatron SC21 Table 1 rows used (GPU counts), spread over the table's range.
MEGATRON_ROWS = (32, 128, 512, 1024, 1920, 3072)
#: MLPerf rows used: (benchmark, system) for the H100 rows of 768-8,192 GPUs with a logged step time.
MLPERF_ROWS = (("gpt3", "dgxh100_n96_nemo"), ("gpt3", "eos-dfw_n512_ngc23.09_nemo"),
               ("gpt3", "eos-dfw_n1024_ngc23.09_nemo"), ("llama31_405b", "eos-dfw_n256_ngc25.01_nemo"),
               ("llama31_405b", "eos-dfw_n1024_ngc25.01_nemo"))
#: Model shapes of the MLPerf benchmarks (MLPerf Training rules: GPT-3 175B as Brown et al. 2020;
#: Llama 3.1 405B as Meta's model card, 126 layers, 16384 wide, 128 heads, 8 KV heads, vocab 128256).
MLPERF_MODELS = {
    "gpt3": {"params": 175e9, "layers": 96, "hidden": 12288, "heads": 96, "vocab": 50257},
    "llama31_405b": {"params": 405e9, "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8, "vocab": 128256},
}
#: Virtual pipeline stages of the NeMo MLPerf configs (INTERLEAVED_PIPELINE): 12 for GPT-3's 96 layers
#: over 8 stages; 8 for Llama-3.1-405B in the v5.0 H100 configs (INTERLEAVED_PIPELINE=8 with
#: ASYM_PP_EMBED and ASYM_PP_LOSS true: the embedding and the loss take a layer slot each, 126 + 2 = 128
#: slots over pp 8 x vp 8; 7 is the GB200 configs' value). Declared as published: 126 layers, vp 8;
#: advisor accepts 126 layers over 64 chunks (it asks only pp x vp <= layers) and its bubble
#: (p-1)/(v·m + p - 1) reads v alone, so the two extra slots change nothing else.
MLPERF_VP = {"gpt3": 12, "llama31_405b": 8}
#: Megatron SC21's vocabulary (GPT-2 BPE padded, §5.1) and sequence length.
MEGATRON_VOCAB, MEGATRON_SEQ = 51200, 2048
#: Table 1's recipe per row (GPU count -> micro-batch, virtual stages, DDP implementation), from the
#: scripts that produced it: NVIDIA/Megatron-LM examples/sc21/run_table_1.sh (MBS, DDP, and
#: --num-layers-per-virtual-pipeline-stage: 76B 5 of its 15 layers per stage = 3 chunks, 310B 3 of 6 = 2,
#: none for 1T) and examples/sc21/CONFIG.sh (--fp16, --DDP-impl, --micro-batch-size), commit
#: cf547dea839f709ec2f147da0679d663da3c20da. `torch` DDP reduces its buckets during the backward;
#: Megatron's `local` DDP of 2021 all-reduced after it (no overlap). Under --fp16 without
#: --accumulate-allreduce-grads-in-fp32 (not set there; only bf16 forces it) gradients are reduced in fp16.
#: The 2021 schedules' pipeline sends were blocking (--overlap-p2p-communication came in 2023).
MEGATRON_RECIPE = {32: (16, 1, "torch"), 128: (16, 1, "torch"), 512: (4, 1, "local"), 1024: (2, 3, "local"),
                   1920: (1, 2, "local"), 3072: (1, 1, "local")}


def _spec(name, gpus, model, batch, micro, parallelism, gpu, inter) -> dict:
    return {"name": name, "model": model,
            "batch": {"policy": "fixed-global", "global_samples": batch, **({"micro_samples": micro} if micro else {})},
            "parallelism": parallelism,
            "cluster": {"gpu": gpu, "gpus_per_node": 8, "max_gpus": gpus, "inter_node_bandwidth": inter,
                        "intra_node_link": "nvlink", "inter_node_link": "infiniband"},
            "job": {"steps": 1000}, "tiers": [{"name": "on-demand", "usd_per_gpu_hour": 2.0}],
            "calibration": {"gpus": [gpus]}}


def megatron_cases() -> list[dict]:
    out = []
    with open(PUBLISHED / "megatron_lm_2021_table1_weak_scaling.csv", newline="") as f:
        for r in csv.DictReader(f):
            n = int(r["gpus"])
            if n not in MEGATRON_ROWS:
                continue
            h, layers, b, tp, pp = (int(r[k]) for k in ("hidden_size", "layers", "global_batch", "tensor_parallel",
                                                          "pipeline_parallel"))
            s, v = MEGATRON_SEQ, MEGATRON_VOCAB
            flops = 96 * b * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
            step = flops / (n * float(r["tflops_per_gpu"]) * 1e12)
            micro, vp, ddp = MEGATRON_RECIPE[n]
            par = {"strategy": "ddp", "tensor_parallel_degree": tp, "pipeline_parallel_degree": pp,
                   "activation_checkpoint": "full", "overlap_grad_reduce": ddp == "torch", "reduce_dtype": "fp16"}
            if tp > 1:
                par["sequence_parallel"] = False
            if pp > 1:
                par["overlap_p2p_comm"] = False
            if vp > 1:
                par.update(pipeline_schedule="interleaved", pipeline_virtual_stages=vp)
            model = {"params": float(r["params_billion"]) * 1e9, "layers": layers, "hidden": h,
                     "heads": int(r["attention_heads"]), "seq_len": s, "vocab": v, "precision": "fp16"}
            spec = _spec(f"megatron-{r['params_billion'].replace('.', 'p')}b", n, model, b, micro, par,
                         "A100-SXM", "1600 Gbit/s")
            out.append({"case": f"Megatron SC21 {r['params_billion']}B @ {n}", "spec": spec, "gpus": n,
                        "nodes": n // 8, "published": step, "series": "megatron-sc21"})
    return out


def mlperf_cases() -> list[dict]:
    out = []
    with open(PUBLISHED / "mlperf_llm_pretraining_step_time_nvidia.csv", newline="") as f:
        rows = {(r["benchmark"], r["system"]): r for r in csv.DictReader(f)}
    for key in MLPERF_ROWS:
        r = rows[key]
        bench, n = key[0], int(r["gpus"])
        tp, pp, cp = int(r["tp"]), int(r["pp"]), int(r["cp"])
        model = {**MLPERF_MODELS[bench], "seq_len": int(r["seq_len"]), "precision": "fp8"}
        par = {"strategy": "ddp", "tensor_parallel_degree": tp, "pipeline_parallel_degree": pp,
               "context_parallel_degree": cp, "pipeline_schedule": "interleaved",
               "pipeline_virtual_stages": MLPERF_VP[bench], "sequence_parallel": True, "tp_comm_overlap": True,
               "distributed_optimizer": True, "overlap_grad_reduce": True, "overlap_param_gather": True}
        spec = _spec(f"mlperf-{bench.replace('_', '-')}-{n}", n, model, int(r["global_batch_seqs"]), 1, par,
                     "H100-SXM", "3200 Gbit/s")
        out.append({"case": f"MLPerf {r['round']} {bench} @ {n}", "spec": spec, "gpus": n,
                    "nodes": int(r["nodes"]), "published": float(r["step_time_s_median"]),
                    "series": f"mlperf-{bench}"})
    return out


def advisor_prediction(case: dict) -> dict:
    import numpy as np

    from advisor.scaling.model import build_model
    from advisor.spec import workload_from_dict

    w = workload_from_dict(case["spec"], case["case"])
    model = build_model(w, n_bootstrap=8)
    p = model.predict(np.array([float(case["gpus"])]), np.array([float(case["nodes"])]))
    step, low, high = float(p.step_seconds[0]), float(p.step_low[0]), float(p.step_high[0])
    return {"step": step, "low": low, "high": high, "error": step / case["published"] - 1,
            "inside": low <= case["published"] <= high, "ratio": high / low,
            "breakdown": {k: float(v[0]) for k, v in p.breakdown.items()}}


def summary(rows: list[dict]) -> dict:
    errors = [abs(r["error"]) for r in rows]
    return {"cases": len(rows), "mean_abs_error": statistics.fmean(errors),
            "within_25": sum(e <= 0.25 for e in errors), "inside_90": sum(r["inside"] for r in rows),
            "median_high_over_low": statistics.median(r["ratio"] for r in rows)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calculon", type=Path, help="a Calculon checkout (github.com/calculon-ai/calculon)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    cases = megatron_cases() + mlperf_cases()
    rows = [{"case": c["case"], "published": c["published"], **advisor_prediction(c)} for c in cases]
    result = {"advisor": {"rows": rows, **summary(rows)}}
    if args.calculon is None:
        result["calculon"] = "skipped: no --calculon checkout given"
    else:
        import calculon_peer

        try:
            result["calculon"] = calculon_peer.compare(args.calculon, cases)
        except calculon_peer.Unavailable as e:
            print(f"peers.py: {e}", file=sys.stderr)
            return 2
    peer = result["calculon"] if isinstance(result["calculon"], dict) else None
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{'case':38} {'published s':>11} {'advisor s':>10} {'error':>7} {'90% interval':>17} inside  hi/lo"
          + (calculon_peer.HEADER if peer else ""))
    for i, r in enumerate(rows):
        print(f"{r['case']:38} {r['published']:11.4g} {r['step']:10.4g} {r['error']:+7.1%} "
              f"{r['low']:8.3g}-{r['high']:<8.3g} {'yes' if r['inside'] else 'NO ':>5} {r['ratio']:6.2f}"
              + (calculon_peer.cells(peer["rows"][i]) if peer else ""))
    s = result["advisor"]
    print(f"advisor prior: mean |error| {s['mean_abs_error']:.1%}, within 25% {s['within_25']}/{s['cases']}, "
          f"inside the 90% interval {s['inside_90']}/{s['cases']}, median high/low {s['median_high_over_low']:.2f}")
    print(calculon_peer.summary_line(peer) if peer else f"Calculon: {result['calculon']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
