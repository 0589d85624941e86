"""Commands about the spec itself: validate, schema, gpus."""

from __future__ import annotations

import json

from advisor.cli.app import app
from advisor.cli.options import JsonOpt, WorkloadArg


@app.command()
def validate(workload: WorkloadArg) -> None:
    """Check a workload spec; print one line per problem (exit 2) or a summary (exit 0)."""
    from advisor.spec import load_workload

    w = load_workload(workload)
    batch = (
        f"global batch {w.batch.global_samples}" if w.batch.policy == "fixed-global"
        else f"{w.batch.per_gpu_samples} samples per GPU"
    )
    print(
        f"{workload}: valid: {w.name}: {w.model.params / 1e9:.3g}B params, {w.parallelism.strategy}, "
        f"{w.batch.policy} ({batch}), {w.cluster.gpu} x{w.cluster.gpus_per_node} per node, "
        f"up to {w.cluster.max_gpus} GPUs, tiers: {', '.join(t.name for t in w.tiers)}"
    )


@app.command()
def schema() -> None:
    """Print the JSON Schema of the workload spec, with every field's description."""
    from advisor.spec import workload_json_schema

    print(json.dumps(workload_json_schema(), indent=2))


@app.command()
def gpus(as_json: JsonOpt = False) -> None:
    """List the GPU catalog: peak dense FLOP/s, memory, intra-node bandwidth, source."""
    from advisor.catalog import gpus as catalog

    rows = [
        {
            "name": g.name,
            "aliases": list(g.aliases),
            "memory_gb": g.memory_bytes / 1e9,
            "peak_bf16_tflops": _tera(g.peak_flops("bf16")),
            "peak_fp16_tflops": _tera(g.peak_flops("fp16")),
            "peak_fp32_tflops": _tera(g.peak_flops("fp32")),
            "intra_node_gbps": g.intra_node_bandwidth / 1e9 if g.intra_node_bandwidth else None,
            "source": g.source,
        }
        for g in catalog()
    ]
    if as_json:
        print(json.dumps({"gpus": rows}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title="GPU catalog: dense peak FLOP/s (fp32 column: TF32 where the GPU has it)",
        caption="Sources per number: advisor/data/gpus.toml, or `advisor gpus --json`.",
    )
    for col in ("GPU", "memory GB", "bf16 TFLOP/s", "fp16 TFLOP/s", "fp32/tf32 TFLOP/s", "intra-node GB/s"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["name"], f"{r['memory_gb']:.0f}", _fmt(r["peak_bf16_tflops"]), _fmt(r["peak_fp16_tflops"]),
            _fmt(r["peak_fp32_tflops"]), _fmt(r["intra_node_gbps"]),
        )
    Console().print(table)


def _tera(x):
    return None if x is None else x / 1e12


def _fmt(x):
    return "-" if x is None else f"{x:g}"
