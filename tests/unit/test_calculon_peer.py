"""benchmarks/calculon_peer.py: the JSON Calculon is given for a published case, and (with a checkout
named by CALCULON_CHECKOUT) that the in-process run answers what Calculon's own `llm` command does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import calculon_peer


def _case(name, gpus, series, model, batch, micro, parallelism, gpu, published) -> dict:
    spec = {"name": name, "model": model,
            "batch": {"policy": "fixed-global", "global_samples": batch, "micro_samples": micro},
            "parallelism": parallelism,
            "cluster": {"gpu": gpu, "gpus_per_node": 8, "max_gpus": gpus, "inter_node_bandwidth": "1600 Gbit/s"},
            "job": {"steps": 1000}, "tiers": [{"name": "on-demand", "usd_per_gpu_hour": 2.0}],
            "calibration": {"gpus": [gpus]}}
    return {"case": name, "spec": spec, "gpus": gpus, "series": series, "published": published}


#: Megatron-LM SC21 Table 1, the 39.1B row: 48 layers, hidden 8192, 64 heads, TP 8, PP 2, 512 A100s,
#: global batch 1536, sequence 2048; fp16, full recomputation, no sequence parallelism (§5.1).
#: Published step: 96·B·s·l·h²·(1 + s/6h + V/16lh) / (512 · 138 TFLOP/s) = 14.45 s.
MEGATRON_39B = _case("megatron-39b", 512, "megatron-sc21",
                     {"params": 39.1e9, "layers": 48, "hidden": 8192, "heads": 64, "seq_len": 2048,
                      "vocab": 51200, "precision": "fp16"}, 1536, 1,
                     {"strategy": "ddp", "tensor_parallel_degree": 8, "pipeline_parallel_degree": 2,
                      "activation_checkpoint": "full", "overlap_grad_reduce": False, "sequence_parallel": False},
                     "A100-SXM", 14.45)

#: MLPerf v5.0 Llama-3.1-405B on 256 DGX H100 (config_DGXH100_256x8x72xtp8pp8cp2.sh: TP 8, PP 8,
#: INTERLEAVED_PIPELINE 8, CP 2, micro-batch 1, FP8, TP_COMM_OVERLAP, the distributed optimizer with
#: OVERLAP_GRAD_REDUCE and OVERLAP_PARAM_GATHER); global batch 1152 sequences of 8192; step 14.22 s.
LLAMA_405B = _case("llama-405b", 2048, "mlperf-llama31_405b",
                   {"params": 405e9, "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8,
                    "vocab": 128256, "seq_len": 8192, "precision": "fp8"}, 1152, 1,
                   {"strategy": "ddp", "tensor_parallel_degree": 8, "pipeline_parallel_degree": 8,
                    "context_parallel_degree": 2, "pipeline_schedule": "interleaved", "pipeline_virtual_stages": 8,
                    "sequence_parallel": True, "tp_comm_overlap": True, "distributed_optimizer": True,
                    "overlap_grad_reduce": True, "overlap_param_gather": True},
                   "H100-SXM", 14.22)

STATIC = {"tensor_par_net": 0, "pipeline_par_net": 1, "data_par_net": 1, "fused_activation": True,
          "seq_par_ag_redo": False, "weight_offload": False, "activations_offload": False,
          "optimizer_offload": False, "training": True}


def test_the_megatron_row_is_given_to_calculon_with_its_published_layout():
    assert calculon_peer.execution(MEGATRON_39B) == {
        **STATIC, "num_procs": 512, "tensor_par": 8, "pipeline_par": 2, "data_par": 32, "batch_size": 1536,
        "microbatch_size": 1, "datatype": "float16", "attention_type": "multihead",
        "activation_recompute": "full", "pipeline_interleaving": 1, "optimizer_sharding": False,
        "tensor_par_comm_type": "ar", "tensor_par_overlap": "none", "data_par_overlap": False}
    assert calculon_peer.application(MEGATRON_39B) == {
        "hidden": 8192, "feedforward": 4 * 8192, "seq_size": 2048, "attn_heads": 64, "attn_size": 128,
        "num_blocks": 48}
    assert calculon_peer.system_file(MEGATRON_39B) == "a100_80g.json"


def test_the_llama_row_folds_context_parallelism_into_data_parallelism_and_declares_its_gated_mlp():
    # 2048 GPUs / (TP 8 x PP 8) = 32 data-parallel ranks (16 DP x 2 CP); 8 K/V heads over 8 TP ranks is
    # one per rank: Calculon's multiquery. SwiGLU 53248 wide (three matrices) = a two-matrix MLP 79872 wide.
    assert calculon_peer.execution(LLAMA_405B) == {
        **STATIC, "num_procs": 2048, "tensor_par": 8, "pipeline_par": 8, "data_par": 32, "batch_size": 1152,
        "microbatch_size": 1, "datatype": "float8", "attention_type": "multiquery",
        "activation_recompute": "attn_only", "pipeline_interleaving": 8, "optimizer_sharding": True,
        "tensor_par_comm_type": "rs_ag", "tensor_par_overlap": "ring", "data_par_overlap": True}
    assert calculon_peer.application(LLAMA_405B)["feedforward"] == 79872
    assert calculon_peer.system_file(LLAMA_405B) == "h100_80g_nvl8.json"


def test_grouped_query_attention_calculon_cannot_express_is_refused_with_the_reason():
    case = json.loads(json.dumps(LLAMA_405B))
    case["spec"]["model"]["kv_heads"] = 32
    with pytest.raises(calculon_peer.Refused, match="32 K/V heads over 8 TP ranks"):
        calculon_peer.execution(case)


def test_a_folder_that_is_no_calculon_checkout_is_one_line_naming_the_option(tmp_path):
    with pytest.raises(calculon_peer.Unavailable, match=r"^--calculon .*: not a Calculon checkout") as e:
        calculon_peer.load(tmp_path)
    assert "\n" not in str(e.value)


def _checkout() -> Path:
    path = os.environ.get("CALCULON_CHECKOUT")
    if not path:
        pytest.skip("no Calculon checkout: set CALCULON_CHECKOUT to a clone of github.com/calculon-ai/calculon")
    try:
        calculon_peer.load(Path(path))
    except calculon_peer.Unavailable as e:
        pytest.skip(str(e))
    return Path(path)


def test_calculon_in_process_answers_what_its_own_llm_command_answers(tmp_path):
    checkout = _checkout()
    result = calculon_peer.compare(checkout, [MEGATRON_39B, LLAMA_405B])
    assert result["refused"] == 0, result["rows"]
    for case, row in zip((MEGATRON_39B, LLAMA_405B), result["rows"], strict=True):
        (tmp_path / "app.json").write_text(json.dumps(calculon_peer.application(case)))
        (tmp_path / "exe.json").write_text(json.dumps(calculon_peer.execution(case)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), *sys.path])}
        subprocess.run([sys.executable, str(checkout / "bin" / "calculon"), "llm", str(tmp_path / "app.json"),
                        str(tmp_path / "exe.json"), str(checkout / "systems" / calculon_peer.system_file(case)),
                        str(tmp_path / "stats.json")], check=True, capture_output=True, env=env, timeout=120)
        stats = json.loads((tmp_path / "stats.json").read_text())
        assert row["step"] == pytest.approx(stats["total_time"], rel=1e-9)
        assert row["error"] == pytest.approx(row["step"] / case["published"] - 1)


def test_peers_with_a_folder_that_is_no_checkout_exits_2_with_one_line(tmp_path, capsys):
    import peers

    if not peers.PUBLISHED.is_dir():
        pytest.skip(f"no published cases at {peers.PUBLISHED} (../shared/data/published)")
    assert peers.main(["--calculon", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("peers.py: --calculon ") and err.count("\n") == 1
