"""Accuracy of the layout model at scale: MLPerf GPT-3 175B and Llama-3.1-405B step times.

Data: ../shared/data/published/mlperf_llm_pretraining_step_time_nvidia.csv (NVIDIA's MLPerf
Training submissions, v3.0-v5.0: mlcommons/training_results_v*, a source on every row), read in
place; rows without a per-step time (v4.0: throughput only) are skipped. Each series is one
system family at one layout (same round, accelerator, TP, PP, CP), 256 to 10,752 GPUs.

Method (one parameter, fitted on the series' smallest count, the others predicted):
    T(N) = c · W(N) / (1 - bubble(N)) + e · DP(N)
- W: per-GPU training FLOPs per step at peak (6·P·T + 12·L·h·T per token, PaLM App. B).
- bubble: (p-1)/(v·m + p - 1), m = global batch / data-parallel size / micro-batch 1 (NeMo's
  MICRO_BATCH_SIZE=1), v = 1 (1F1B): the CSV does not give NeMo's virtual pipeline size, and with
  interleaving the bubble (and the error it explains) would be smaller.
- DP: the data-parallel gradient sync of the layout at the declared link speeds (advisor.topology.layouts;
  Megatron's distributed optimizer reduce-scatters gradients and all-gathers parameters once per
  step, the volume of a ring all-reduce). Two variants: `overlap` (e = 0: NeMo overlaps the DP
  sync with the backward, the published configs set it) and `exposed` (e = 1).
- c: the series' 1/MFU, fitted on the smallest count (torch-free, no other data).
TP (per-layer all-reduces, TP_COMM_OVERLAP in these runs) and PP point-to-point traffic scale
with the tokens per GPU, like W, so within a series c absorbs them.
Beside it, the naive linear guess: per-GPU throughput of the smallest count held.

Run: python benchmarks/layout_accuracy.py [--json]. `series_errors()` returns the rows for
benchmarks/accuracy.py.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "published" / "mlperf_llm_pretraining_step_time_nvidia.csv"

#: Model shapes: GPT-3 175B (Brown et al. 2020, Table 2.1: 96 layers, d_model 12288, 96 heads;
#: MLPerf uses seq 2048) and Llama 3.1 405B (Meta model card / HF config: 126 layers, 16384 hidden,
#: 128 heads, 8 KV heads, vocab 128256, 405B parameters).
MODELS = {
    "gpt3": {"params": 175e9, "layers": 96, "hidden": 12288, "heads": 96, "vocab": 50257},
    "llama31_405b": {"params": 405e9, "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8, "vocab": 128256},
}

#: GPUs per NVLink host and per-node NIC bandwidth: DGX H100 (8 GPUs, 8x ConnectX-7 NDR 400 Gbit/s,
#: the CSV's host_networking), GB200 hosts of the v5.0 rows (4 GPUs, 4x ConnectX-7 NDR 400).
SYSTEMS = {
    "NVIDIA H100-SXM5-80GB": {"gpu": "H100-SXM", "gpus_per_node": 8, "inter": "3200 Gbit/s", "intra": "450 GB/s"},
    "NVIDIA Blackwell GPU (GB200)": {
        "gpu": "B200",
        "gpus_per_node": 4,
        "inter": "1600 Gbit/s",
        "intra": "900 GB/s",
        "peak": 2.25e15,
    },
}


def read_rows(path: Path = DATA) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r["step_time_s_median"] and r["accelerator"] in SYSTEMS]


def series_key(r: dict) -> tuple:
    family = r["system"].split("_n")[0].split("_ngpu")[0]
    return r["benchmark"], r["round"], family, r["accelerator"], r["tp"], r["pp"], r["cp"]


def workload_for(r: dict, virtual_stages: int = 1):
    from advisor.spec import workload_from_dict

    m, sysd = MODELS[r["benchmark"]], SYSTEMS[r["accelerator"]]
    gpus = int(r["gpus"])
    cluster = {
        "gpu": sysd["gpu"],
        "gpus_per_node": sysd["gpus_per_node"],
        "max_gpus": max(gpus, 16384),
        "intra_node_bandwidth": sysd["intra"],
        "inter_node_bandwidth": sysd["inter"],
    }
    if "peak" in sysd:
        cluster["peak_flops"] = sysd["peak"]
    data = {
        "name": "mlperf",
        "model": {**m, "seq_len": int(r["seq_len"]), "precision": "bf16"},
        "batch": {"policy": "fixed-global", "global_samples": int(r["global_batch_seqs"]), "micro_samples": 1},
        "parallelism": {
            "strategy": "ddp",
            "tensor_parallel_degree": int(r["tp"]),
            "pipeline_parallel_degree": int(r["pp"]),
            "context_parallel_degree": int(r["cp"]),
            "tensor_parallel_across_nodes": int(r["tp"]) > sysd["gpus_per_node"],
            **(
                {"pipeline_schedule": "interleaved", "pipeline_virtual_stages": virtual_stages}
                if virtual_stages > 1
                else {}
            ),
        },
        "cluster": cluster,
        "job": {"steps": 1},
        "tiers": [{"name": "x", "usd_per_gpu_hour": 1.0}],
        "calibration": {"gpus": [gpus]},
    }
    return workload_from_dict(data, "mlperf")


def terms(r: dict, virtual_stages: int = 1) -> tuple[float, float, float, str]:
    """(W seconds at peak, 1 / (1 - bubble), exposed DP seconds at declared speed, layout label)."""
    from advisor.scaling.features import compute_seconds
    from advisor.topology.layouts import build

    w = workload_for(r, virtual_stages)
    gpus = np.array([int(r["gpus"])])
    lay = build(w, gpus)
    assert lay.valid[0], (r["system"], lay.label())
    work = compute_seconds(w, gpus, np.array([float(r["global_batch_seqs"])]))[0]
    bubble = lay.bubble_fraction(w)[0]
    dp = lay.link_seconds(w, [t for t in lay.traffic(w) if t.name.startswith("ddp")])
    dp_seconds = dp.intra_bandwidth[0] + dp.inter_bandwidth[0] + dp.intra_latency[0] + dp.inter_latency[0]
    return work, 1 / (1 - bubble), dp_seconds, lay.label()


def series_errors(path: Path = DATA, virtual_stages: int = 1) -> list[dict]:
    """One row per predicted (non-fitted) MLPerf measurement: measured, predicted (both variants),
    naive linear, errors. `virtual_stages` > 1 reads the runs as interleaved 1F1B (a sensitivity
    check: the CSV does not say)."""
    groups: dict[tuple, list[dict]] = {}
    for r in read_rows(path):
        groups.setdefault(series_key(r), []).append(r)
    out = []
    for key, rows in groups.items():
        rows.sort(key=lambda r: int(r["gpus"]))
        if len(rows) < 2:
            continue
        base = rows[0]
        t0 = float(base["step_time_s_median"])
        w0, b0, d0, _ = terms(base, virtual_stages)
        for variant, e in (("overlap", 0.0), ("exposed", 1.0)):
            c = max(t0 - e * d0, 1e-9) / (w0 * b0)
            for r in rows[1:]:
                w, b, d, label = terms(r, virtual_stages)
                measured = float(r["step_time_s_median"])
                predicted = c * w * b + e * d
                tokens0 = float(base["global_batch_seqs"]) / int(base["gpus"])
                naive = t0 * (float(r["global_batch_seqs"]) / int(r["gpus"])) / tokens0
                out.append(
                    {
                        "series": f"{key[0]} {key[1]} {key[2]} tp{key[4]} pp{key[5]} cp{key[6]}",
                        "variant": variant,
                        "fit_gpus": int(base["gpus"]),
                        "gpus": int(r["gpus"]),
                        "layout": label,
                        "measured_s": measured,
                        "predicted_s": predicted,
                        "naive_s": naive,
                        "error": predicted / measured - 1,
                        "naive_error": naive / measured - 1,
                        "bubble": 1 - 1 / b,
                        "dp_seconds": d,
                        "source": r["source"],
                    }
                )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--virtual-stages",
        type=int,
        default=1,
        help="read the runs as interleaved 1F1B with this many model chunks per GPU (default 1: 1F1B)",
    )
    args = ap.parse_args(argv)
    if not DATA.is_file():
        print(f"skipped: {DATA} not found")
        return 0
    rows = series_errors(virtual_stages=args.virtual_stages)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(
        f"{'series':44} {'variant':8} {'fit':>5} {'GPUs':>6} {'measured':>9} {'predicted':>9} {'err':>7} "
        f"{'naive err':>9} {'bubble':>6} {'DP s':>6}  layout"
    )
    for r in rows:
        print(
            f"{r['series']:44} {r['variant']:8} {r['fit_gpus']:5d} {r['gpus']:6d} {r['measured_s']:9.3f} "
            f"{r['predicted_s']:9.3f} {r['error']:+7.1%} {r['naive_error']:+9.1%} {r['bubble']:6.1%} "
            f"{r['dp_seconds']:6.2f}  {r['layout']}"
        )
    for variant in ("overlap", "exposed"):
        sel = [r for r in rows if r["variant"] == variant]
        print(
            f"{variant}: median |error| {statistics.median(abs(r['error']) for r in sel):.1%}, "
            f"naive {statistics.median(abs(r['naive_error']) for r in sel):.1%} over {len(sel)} predictions"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
