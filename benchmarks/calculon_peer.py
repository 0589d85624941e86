"""Calculon (Isaev et al., SC'23, github.com/calculon-ai/calculon) on peers.py's published LLM cases.

    python benchmarks/peers.py --calculon PATH     # PATH: a Calculon checkout; nothing of it is copied here

Each case's advisor spec (model, layout, batch, recipe; benchmarks/peers.py says where each field
comes from) becomes Calculon's two inputs, its application JSON (the model) and its execution JSON
(the layout), and runs through Calculon's single-run API in-process (what its `llm` command does:
`Llm(app).compile(system, execution)`, then `run(system)`; calculon/llm/runner.py), on Calculon's
own example system file for the GPU (`systems/` of the checkout, read unchanged). The prediction is
its `get_total_time()`, seconds per optimizer step (global batch). Nothing is tuned per case: every
field follows one rule from the spec, the same for all eleven cases.

How advisor's recipe maps onto Calculon's execution fields (calculon/llm/llm.py, `Llm.Execution`),
one rule each:
- tensor / pipeline parallel degree -> tensor_par / pipeline_par, as declared.
- context_parallel_degree (cp) -> folded into data_par (dp·cp). Calculon has no context parallelism;
  a cp-way split of each sequence does the same FLOPs per GPU as cp times more data-parallel ranks on
  whole sequences (Calculon counts the full s^2 attention either way), and the gradient reduction
  spans the same dp·cp ranks (Megatron reduces over DP x CP). Not charged: CP's K/V exchange (under
  the attention in Megatron's ring attention); the bubble is priced with 1/cp as many micro-batches
  of cp times the tokens.
- batch.global_samples -> batch_size; the micro-batch advisor resolves (`advisor.batch.micro_batch`),
  at most Calculon's per-rank batch -> microbatch_size.
- model.precision -> datatype: fp8 -> float8 (Calculon's H100 file has a float8 matrix peak; Calculon
  then moves 1 byte per element everywhere), fp16 and bf16 -> float16 (the files' 16-bit peak).
- activation_checkpoint -> activation_recompute: full -> full; none and selective -> attn_only.
  Calculon's none keeps the s x s attention scores, which fused attention never stores: it
  recomputes them in the backward (FlashAttention, Dao et al. 2022 §3.1), as advisor's memory model
  assumes (advisor/topology/memory.py); attn_only is that recomputation. With none, the 405B rows
  need ~490 GiB per GPU in Calculon and are refused.
- pipeline_virtual_stages (interleaved schedule) -> pipeline_interleaving (1 for 1f1b).
- distributed_optimizer -> optimizer_sharding (Calculon needs data_par > 1).
- sequence_parallel -> tensor_par_comm_type rs_ag (reduce-scatter + all-gather), else ar.
- tp_comm_overlap -> tensor_par_overlap ring (Transformer Engine userbuffers' ring exchange, its
  default for the all-gather GEMMs), else none.
- overlap_grad_reduce -> data_par_overlap (data_par > 1); overlap_param_gather has no switch of its own.
- kv_heads -> attention_type: multihead without grouped-query attention; multiquery when kv_heads <=
  tensor_par (each TP rank then holds one K/V head, what Calculon's multiquery projects per rank);
  anything between is refused.
- networks: tensor_par_net 0, pipeline_par_net 1, data_par_net 1, the assignment of Calculon's own
  example (examples/3072_t4_p64_d12_mbs4_full.json): TP in the NVLink domain, PP and DP over the
  inter-node network (every PP and DP group of these cases spans nodes).
- fixed: fused_activation true (Megatron-LM and NeMo fuse bias + GeLU, Narayanan et al. SC21 §4.2, as
  Calculon's example does), seq_par_ag_redo false, no offload, training.

The application: hidden, heads, head size hidden/heads, layers, seq_len from the spec; the
feed-forward width per model family in `MLP_WIDTH`. Calculon's MLP has two matrices; a gated one
(SwiGLU, three matrices of hidden x f) is declared as width 3f/2: the same weights and FLOPs.
Calculon does not model the embedding or the output layer.

Calculon needs numpy, and its package imports its optimizer commands, which import pandas and
psutil: all three must be importable (pip install pandas psutil), although the single run uses only numpy.
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
from pathlib import Path

#: Calculon's example system file per catalog GPU (the checkout's systems/, used unchanged).
SYSTEM_FILES = {"A100-SXM": "a100_80g.json", "H100-SXM": "h100_80g_nvl8.json"}
#: Calculon datatype per model.precision (calculon/system.py `System.TypeSizes`). Its system files give
#: the 16-bit tensor-core peak under "float16" only, so bf16 is priced there too.
DATATYPES = {"fp8": "float8", "fp16": "float16", "bf16": "float16", "fp32": "float32"}
#: activation_checkpoint -> Calculon's activation_recompute. attn_only (Korthikanti et al. 2022's selective)
#: for none too: fused attention keeps no s x s scores and recomputes them in the backward (Dao et al. 2022).
RECOMPUTE = {"none": "attn_only", "selective": "attn_only", "full": "full"}
#: Feed-forward width (as a multiple of hidden, or in units) and whether the MLP is gated, per series
#: of peers.py. GPT-style models: 4·hidden (Brown et al. 2020 Table 2.1, d_ff = 4·d_model; Megatron-LM
#: SC21 §5.1 uses the GPT-2 architecture). Llama 3.1 405B: intermediate_size 53248 with SwiGLU (Meta's
#: model card and config.json, Dubey et al. 2024 Table 3).
MLP_WIDTH = {"megatron-sc21": ("x hidden", 4, False), "mlperf-gpt3": ("x hidden", 4, False),
             "mlperf-llama31_405b": ("units", 53248, True)}
#: Calculon's network tiers as its example execution assigns them (0: the NVLink domain, 1: inter-node).
TP_NET, PP_NET, DP_NET = 0, 1, 1
#: Relative error within which a prediction counts as close (the issue's bar: 25%).
CLOSE = 0.25


class Unavailable(Exception):
    """The --calculon checkout cannot be used (not a checkout, or a dependency missing): one line."""


class Refused(Exception):
    """Calculon refuses the case, or cannot express its recipe: the reason, in one line."""


def load(checkout: Path):
    """Import Calculon from `checkout` (its package directory, not an installed copy)."""
    checkout = Path(checkout).resolve()
    if not (checkout / "calculon" / "llm" / "llm.py").is_file():
        raise Unavailable(f"--calculon {checkout}: not a Calculon checkout (no calculon/llm/llm.py; "
                          "git clone github.com/calculon-ai/calculon)")
    sys.path.insert(0, str(checkout))
    try:
        import calculon
    except ModuleNotFoundError as e:
        raise Unavailable(f"--calculon {checkout}: Calculon needs {e.name} (its package imports pandas and "
                          f"psutil for its optimizer commands): pip install {e.name}") from None
    finally:
        sys.path.remove(str(checkout))
    if Path(calculon.__file__).resolve().parent.parent != checkout:
        raise Unavailable(f"--calculon {checkout}: another Calculon was imported ({calculon.__file__})")
    return calculon


def _workload(case: dict):
    from advisor.spec import workload_from_dict

    return workload_from_dict(case["spec"], case["case"])


def application(case: dict) -> dict:
    """Calculon's application JSON (calculon/llm/llm.py `Llm.Application`) for one of peers.py's cases."""
    m = _workload(case).model
    unit, width, gated = MLP_WIDTH[case["series"]]
    ff = width * m.hidden if unit == "x hidden" else width
    return {"hidden": m.hidden, "feedforward": ff * 3 // 2 if gated else ff, "seq_size": m.seq_len,
            "attn_heads": m.heads, "attn_size": m.hidden // m.heads, "num_blocks": m.layers}


def execution(case: dict) -> dict:
    """Calculon's execution JSON (calculon/llm/llm.py `Llm.Execution.fields()`) for one of peers.py's
    cases, by the rules of the module's table."""
    import numpy as np

    from advisor.batch import micro_batch

    w = _workload(case)
    p, n = w.parallelism, case["gpus"]
    tp, pp = p.tensor_parallel_degree or 1, p.pipeline_parallel_degree
    dp = n // (tp * pp)  # context parallelism folded in
    batch = w.batch.global_samples
    if w.model.precision not in DATATYPES:
        raise Refused(f"Calculon has no datatype for model.precision {w.model.precision!r}")
    kv = w.model.kv_heads or w.model.heads
    if kv == w.model.heads:
        attention = "multihead"
    elif kv <= tp:
        attention = "multiquery"
    else:
        raise Refused(f"Calculon has no grouped-query attention with {kv} K/V heads over {tp} TP ranks")
    micro = min(int(micro_batch(w, np.array([float(n)]))[0]), batch // dp)
    return {"num_procs": n, "tensor_par": tp, "pipeline_par": pp, "data_par": dp,
            "tensor_par_net": TP_NET, "pipeline_par_net": PP_NET, "data_par_net": DP_NET,
            "batch_size": batch, "microbatch_size": micro, "datatype": DATATYPES[w.model.precision],
            "fused_activation": True, "attention_type": attention,
            "activation_recompute": RECOMPUTE[p.activation_checkpoint],
            "pipeline_interleaving": p.virtual_stages if pp > 1 else 1,
            "optimizer_sharding": p.distributed_optimizer and dp > 1,
            "tensor_par_comm_type": "rs_ag" if p.sequence_parallel_on else "ar",
            "tensor_par_overlap": "ring" if p.tp_comm_overlap and tp > 1 else "none",
            "seq_par_ag_redo": False, "data_par_overlap": p.overlap_grad_reduce and dp > 1,
            "weight_offload": False, "activations_offload": False, "optimizer_offload": False,
            "training": True}


def system_file(case: dict) -> str:
    """The name of Calculon's example system file for the case's GPU."""
    gpu = case["spec"]["cluster"]["gpu"]
    if gpu not in SYSTEM_FILES:
        raise Refused(f"Calculon ships no system file for {gpu}")
    return SYSTEM_FILES[gpu]


def predict(calculon, checkout: Path, case: dict) -> float:
    """Calculon's step seconds for one case; raises Refused with Calculon's own reason."""
    app, exe = application(case), execution(case)
    system = json.loads((Path(checkout) / "systems" / system_file(case)).read_text())
    log = logging.getLogger("calculon")
    log.setLevel(logging.WARNING)
    llm = calculon.llm.Llm
    try:
        model = llm(llm.Application(app), log)
        syst = calculon.System(system)
        model.compile(syst, llm.Execution.from_json(exe))
        model.run(syst)
    except (llm.Error, AssertionError) as e:  # Calculon checks its inputs with asserts
        reason = " ".join(str(a) for a in e.args) or type(e).__name__
        raise Refused(f"{reason} (tensor_par {exe['tensor_par']}, pipeline_par {exe['pipeline_par']}, "
                      f"pipeline_interleaving {exe['pipeline_interleaving']}, {app['num_blocks']} blocks)") from None
    return float(model.get_total_time())


def compare(checkout: Path, cases: list[dict]) -> dict:
    """Calculon on every case: per-case rows (step and error, or the reason it refused) and the summary."""
    calculon = load(checkout)
    rows = []
    for case in cases:
        try:
            step = predict(calculon, checkout, case)
        except Refused as e:
            rows.append({"case": case["case"], "published": case["published"], "refused": str(e)})
            continue
        rows.append({"case": case["case"], "published": case["published"], "step": step,
                     "error": step / case["published"] - 1})
    errors = [abs(r["error"]) for r in rows if "error" in r]
    return {"checkout": str(Path(checkout).resolve()), "version": getattr(calculon, "__version__", None),
            "rows": rows, "cases": len(errors), "refused": len(rows) - len(errors),
            "mean_abs_error": statistics.fmean(errors) if errors else None,
            "within_25": sum(e <= CLOSE for e in errors)}


def cells(row: dict) -> str:
    """Calculon's columns of one printed row: its step seconds and error, or 'refused'."""
    if "error" not in row:
        return f" {'refused':>10}"
    return f" {row['step']:10.4g} {row['error']:+7.1%}"


HEADER = f" {'Calculon s':>10} {'error':>7}"


def summary_line(result: dict) -> str:
    """The printed summary of Calculon's side, with each refused case and its reason."""
    if not result["cases"]:
        line = "Calculon: no case ran"
    else:
        line = (f"Calculon: mean |error| {result['mean_abs_error']:.1%}, within 25% {result['within_25']}/"
                f"{result['cases']}")
    refused = [f"\n  refused {r['case']}: {r['refused']}" for r in result["rows"] if "refused" in r]
    return line + (f" ({len(refused)} refused)" if refused else "") + "".join(refused)
